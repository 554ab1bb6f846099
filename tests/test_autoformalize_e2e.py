"""`python -m pipelines.autoformalize` end to end on the simulators: real ProofNet rows, an index of real Mathlib
files, bad input lines; the table, its statuses and scores, the report; a second start over the same input with rows
added asks only for the new rows; a first start on a disk that fills (where a tmpfs can be mounted) is one line,
exit 4, and resumes on a bigger one. `mode=got`: a concept graph for every row that compiled, its leaves grounded in
the index and its new notion defined before the theorem; `mode=agent`: tool calls never above the budget, SR@K in the
report. Also `mine faithfulness.enabled=true`: a drifted candidate is marked and not proved.

The test owns the LLM sim server, with the faithfulness labeller's random labels off, so every status and score
below follows from the prompts' triggers and the repair script alone."""

from __future__ import annotations

import contextlib
import io
import json
import shutil
from pathlib import Path

import polars as pl
import pytest
import ray

from operators.llm.sim.server import SimServer, fetch_stats, reset_stats
from pipelines import autoformalize, mine, report
from pipelines import index as index_pipeline
from tests.full_disk import (
    DISK_FULL_EXIT,
    left_half_written,
    refused_write_line,
    tiny_disk_at,
    without_a_tiny_disk,
)
from tests.mine_support import read_table, sim_server_config

pytestmark = pytest.mark.ray
PROOFNET_ROWS = 8
# Rows added to the input of a finished run: a second start asks only for these.
ADDED = {"added_refused": ("Every group of even order has an element of order two (sim:refuse).", "refused", None)}
# Rows written by the test: what the sim's triggers make of them.
TRIGGERED = {
    "plain_union": ("The union of two finite sets is finite.", "faithful", 1.0),
    "minor_dvd": ("Let p be a prime. If p divides a * b then p divides a or b (sim:minor).", "faithful", 0.9),
    "major_comp": ("Let f be continuous. Then f composed with itself is continuous (sim:major).", "unfaithful", 0.0),
    "refused_group": ("Every group of prime order is cyclic (sim:refuse).", "refused", None),
    "never_code": ("Every bounded monotone sequence converges (sim:nocode).", "not_compilable", None),
}
# mode=got and mode=agent: ProofNet rows, the agent's budget, rows the sim's triggers send elsewhere.
MODE_ROWS = 6
BUDGET = 9
MODE_TRIGGERED = {
    "got": {"cyclic_notion": ("A notion built on itself (sim:cycle).", "refused"),
            "axiom_notion": ("Every group of prime order is cyclic (sim:refuse).", "refused")},
    "agent": {"wandering": ("The union of two finite sets is finite (sim:wander).", "not_compilable"),
              "refused_agent": ("Every group of prime order is cyclic (sim:refuse).", "refused")},
}
BAD_LINES = [b"\xff\xfe not utf-8", b"{not json", b"[1, 2]", json.dumps({"name": "blank", "informal": " "}).encode()]
MAX_REPAIRS = 3
# The Mathlib files indexed: one file's few hundred declarations are enough for every row to be shown its nearest ones
# (the sims ground on whatever the prompt lists), and embed in a fraction of the time all of Mathlib/Logic takes.
INDEXED = "Mathlib/Logic/Basic.lean"


@pytest.fixture(scope="module")
def world(tmp_path_factory, mathlib_sample_dir, shared_dir):
    """Ray, a sim server without random faithfulness labels, and an index of a Mathlib/Logic file from the sample."""
    out = tmp_path_factory.mktemp("index") / "logic"
    ray.init(num_cpus=10, include_dashboard=False, log_to_driver=False)  # the demo's, for mine with faithfulness
    try:
        built = index_pipeline.main([f"mathlib_dir={mathlib_sample_dir}", f"out={out}", f"include=[{INDEXED}]"])
        assert built == 0
        sim = sim_server_config(median_s=0.01)
        sim["script"]["faithfulness"] = {"major_rate": 0.0, "minor_rate": 0.0}
        with SimServer(sim) as server:
            yield {"index": out, "base_url": server.base_url}
    finally:
        ray.shutdown()


def _overrides(world: dict, run_dir: Path) -> list[str]:
    return ["preset=demo", f"run_dir={run_dir}", f"index.dir={world['index']}", "llm.backend=openai",
            f"llm.endpoints.sim.base_url={world['base_url']}", f"formalize.max_repairs={MAX_REPAIRS}",
            "lean.sim.import_s=0.05", "lean.sim.check_s=0.01", "lean.sim.burn_cpu=false", "output.rows_per_file=4"]


def _write_input(path: Path, proofnet: list[dict], extra: dict[str, tuple[str, str, float | None]]) -> None:
    lines = [json.dumps(row, ensure_ascii=False).encode() for row in proofnet]
    lines += [json.dumps({"name": name, "informal": text}).encode() for name, (text, _, _) in extra.items()]
    path.write_bytes(b"\n".join(lines + BAD_LINES) + b"\n")


def _proofnet(shared_dir: Path, rows: int = PROOFNET_ROWS) -> list[dict]:
    lines = (shared_dir / "fixtures" / "proofnet-lean4-sample" / "proofnet.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines[:rows]]


@pytest.fixture(scope="module")
def direct_run(world, shared_dir, tmp_path_factory) -> dict:
    """One finished `mode=direct` run over ProofNet rows, the triggered rows and the bad lines: its input file, run
    directory and printed summary. Read-only for its users, who copy the run and restore the input they change."""
    root = tmp_path_factory.mktemp("direct")
    source = root / "problems.jsonl"
    _write_input(source, _proofnet(shared_dir), TRIGGERED)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        assert autoformalize.main([*_overrides(world, root / "run"), f"input={source}"]) == 0
    return {"source": source, "run_dir": root / "run", "printed": printed.getvalue()}


def test_autoformalize_writes_one_row_per_input_with_statuses_scores_and_a_report(direct_run, shared_dir):
    proofnet = _proofnet(shared_dir)
    run_dir = direct_run["run_dir"]
    printed = direct_run["printed"]
    assert "SIMULATED run" in printed and "formalizations: 17" in printed
    assert "formalized in this start: 17 (mode=direct)" in printed

    table = read_table(run_dir, "formalizations")
    assert table.height == PROOFNET_ROWS + len(TRIGGERED) + len(BAD_LINES)
    assert table["id"].n_unique() == table.height and set(table["mode"]) == {"direct"}, "direct is the default"
    rows = {row["id"]: row for row in table.iter_rows(named=True)}
    for name, (_, status, score) in TRIGGERED.items():
        assert (rows[name]["status"], rows[name]["faithfulness_score"]) == (status, score), name
    assert rows["refused_group"]["reason"].startswith("refused before Lean")
    attempts = MAX_REPAIRS + 1
    assert rows["never_code"]["reason"] == (f"no answer held `error-free code` code in {attempts} attempts, so no "
                                            f"Lean check ran (attempt {attempts}: the answer has no line with "
                                            "`error-free code`)")
    first_bad = PROOFNET_ROWS + len(TRIGGERED) + 1
    bad = sorted(table.filter(pl.col("status") == "bad_input")["reason"])
    assert len(bad) == len(BAD_LINES) and bad[-1].startswith("no informal text")
    assert bad[0].startswith(f"line {first_bad} is not UTF-8")
    assert bad[1].startswith(f"line {first_bad + 1} is not JSON")
    assert bad[2] == f"line {first_bad + 2} is not a JSON object"

    for item in proofnet:
        row = rows[item["name"]]
        assert row["informal"] == item["informal_stmt"].split("\\begin{proof}")[0].strip()
        assert row["reference"] == item["formal_statement"] and row["header"] == item["header"]
        assert row["retrieved"], "the index was given: the draft saw the nearest declarations"
        assert row["status"] in ("faithful", "not_compilable")
        calls = [call["stage"] for call in row["llm_calls"]]
        assert calls[:2] == ["think", "draft"]
        assert calls.count("diagnose") == calls.count("formalize") == len(row["diagnoses"]) == row["repairs"]
        if row["status"] == "faithful":
            statement = row["statement"]
            assert f"theorem {item['name']} " in statement
            for line in filter(None, item["header"].splitlines()):
                assert statement.count(line) == 1, f"header line {line!r} once in {statement}"
            assert row["reference_match"] is False, "the sim's drafts are not ProofNet's statements"
            assert row["faithfulness_score"] == 1.0 and calls[-2:] == ["decompose", "faithfulness"]
            assert row["finished_at"] is not None and row["grounded_terms"]
        else:
            assert row["statement"] is None and row["reference_match"] is None
            assert row["repairs"] == MAX_REPAIRS

    assert report.main([f"run_dir={run_dir}"]) == 0
    page = (run_dir / "report" / "report.md").read_text()
    assert "Compile rate and final accuracy" in page
    assert "| problems.jsonl |" in page


def test_a_second_start_asks_only_for_the_rows_added_to_its_input(world, direct_run, shared_dir, tmp_path):
    run_dir = tmp_path / "run"
    shutil.copytree(direct_run["run_dir"], run_dir)
    before = read_table(run_dir, "formalizations")
    source = direct_run["source"]
    written = source.read_bytes()
    _write_input(source, _proofnet(shared_dir, PROOFNET_ROWS + 1), {**TRIGGERED, **ADDED})
    reset_stats(world["base_url"])
    try:
        assert autoformalize.main([*_overrides(world, run_dir), f"input={source}"]) == 0
    finally:
        source.write_bytes(written)
    after = read_table(run_dir, "formalizations")
    new_rows = 1 + len(ADDED)
    assert after.height == before.height + new_rows and after["id"].n_unique() == after.height
    asked = fetch_stats(world["base_url"])["received_by_call"]
    assert asked["think"] == new_rows, "rows written by the first start are not asked again"
    kept = after.filter(pl.col("id").is_in(before["id"].to_list())).sort("id")
    assert kept.select("id", "status", "statement").equals(before.select("id", "status", "statement").sort("id"))
    for name, (_, status, score) in ADDED.items():
        [added] = after.filter(pl.col("id") == name).iter_rows(named=True)
        assert (added["status"], added["faithfulness_score"]) == (status, score), name


def test_a_start_on_a_full_disk_is_one_line_and_resumes_on_a_bigger_one(world, shared_dir, tmp_path, capsys):
    source = tmp_path / "problems.jsonl"
    first = dict(list(TRIGGERED.items())[:2])
    _write_input(source, _proofnet(shared_dir)[:3], first)
    run_dir = tmp_path / "run"
    with tiny_disk_at(tmp_path / "tiny") as tiny:
        if tiny is None:
            without_a_tiny_disk()
        # The first start fills the small disk and is resumed on a bigger one.
        assert autoformalize.main([*_overrides(world, tiny / "run"), f"input={source}"]) == DISK_FULL_EXIT
        refused_write_line(capsys.readouterr().err, tiny / "run")
        assert left_half_written(tiny / "run") == []
        shutil.copytree(tiny / "run", run_dir)
    assert autoformalize.main([*_overrides(world, run_dir), f"input={source}"]) == 0
    table = read_table(run_dir, "formalizations")
    assert table.height == 3 + len(first) + len(BAD_LINES) and table["id"].n_unique() == table.height
    rows = {row["id"]: row for row in table.iter_rows(named=True)}
    for name, (_, status, score) in first.items():
        assert (rows[name]["status"], rows[name]["faithfulness_score"]) == (status, score), name


def test_mine_marks_a_drifted_candidate_unfaithful_and_does_not_prove_it(world, tmp_path):
    run_dir = tmp_path / "mine"
    sim = sim_server_config(median_s=0.01)
    sim["script"]["faithfulness"] = {"major_rate": 1.0, "minor_rate": 0.0}
    sim["script"]["formalize"]["fixed_at_attempt"] = [1.0]  # every statement Lean refuses is repaired once
    with SimServer(sim) as server:
        overrides = ["preset=demo", f"run_dir={run_dir}", "llm.backend=openai",
                     f"llm.endpoints.sim.base_url={server.base_url}", "faithfulness.enabled=true",
                     "dedup.enabled=false", "lean.sim.import_s=0.05", "lean.sim.check_s=0.01",
                     "lean.sim.burn_cpu=false"]
        assert mine.main(overrides) == 0
    candidates = read_table(run_dir, "candidates")
    compiled = candidates.filter(pl.col("statement").is_not_null())
    assert compiled.height and compiled["faithfulness_score"].null_count() == 0
    repaired = compiled.filter(pl.col("formalize_repairs") > 0)
    untouched = compiled.filter(pl.col("formalize_repairs") == 0)
    assert repaired.height and untouched.height
    assert set(repaired["status"]) == {"unfaithful"} and repaired["proofs"].list.len().sum() == 0
    assert set(untouched["faithfulness_score"]) == {1.0}, "a statement compiled as judged cannot have drifted"
    stages = untouched.select(pl.col("llm_calls").explode().struct.field("stage"))["stage"].to_list()
    assert "decompose" not in stages


# --- mode=got and mode=agent ------------------------------------------------------------------------------------


def _run_mode(world: dict, shared_dir: Path, tmp_path: Path, mode: str) -> tuple[pl.DataFrame, list[dict], Path]:
    proofnet_file = shared_dir / "fixtures" / "proofnet-lean4-sample" / "proofnet.jsonl"
    proofnet = _proofnet(shared_dir)[:MODE_ROWS]
    source = tmp_path / "problems.jsonl"
    lines = [json.dumps(row, ensure_ascii=False) for row in proofnet]
    lines += [json.dumps({"name": name, "informal": text}) for name, (text, _) in MODE_TRIGGERED[mode].items()]
    source.write_text("\n".join(lines) + "\n")
    run_dir = tmp_path / mode
    overrides = ["preset=demo", f"mode={mode}", f"input={source}", f"run_dir={run_dir}", f"index.dir={world['index']}",
                 "llm.backend=openai", f"llm.endpoints.sim.base_url={world['base_url']}", "formalize.max_repairs=2",
                 f"autoformalize.agent.max_tool_calls={BUDGET}", f"autoformalize.agent.examples={proofnet_file}",
                 "lean.sim.import_s=0.05", "lean.sim.check_s=0.01", "lean.sim.burn_cpu=false"]
    assert autoformalize.main(overrides) == 0
    return read_table(run_dir, "formalizations"), proofnet, run_dir


def test_got_grounds_leaves_in_the_index_and_defines_the_new_notion_before_the_theorem(world, shared_dir, tmp_path):
    table, proofnet, _ = _run_mode(world, shared_dir, tmp_path, "got")
    assert table.height == MODE_ROWS + len(MODE_TRIGGERED["got"]) and set(table["mode"]) == {"got"}
    rows = {row["id"]: row for row in table.iter_rows(named=True)}
    for name, (_, status) in MODE_TRIGGERED["got"].items():
        assert rows[name]["status"] == status, name
    assert rows["cyclic_notion"]["reason"].startswith("concept graph refused: a dependency cycle")
    compiled = [rows[item["name"]] for item in proofnet if rows[item["name"]]["statement"] is not None]
    assert compiled, "some ProofNet rows compiled"
    for row in compiled:
        graph = row["concept_graph"]
        assert graph, f"{row['id']}: a got row that compiled has its concept graph"
        leaves = [node for node in graph if not node["depends_on"]]
        assert leaves and all(node["status"] == "grounded" for node in leaves), "the index's names ground exactly"
        assert all(node["declaration"] in row["retrieved"] for node in leaves)
        [notion] = [node for node in graph if node["depends_on"]]
        assert notion["status"] == "synthesized" and notion["candidates"], "shown the nearest, confirmed none"
        [definition] = row["definitions"]
        assert row["statement"].index(definition["code"]) < row["statement"].index(f"theorem {row['id']} ")
        assert row["status"] in ("faithful", "unfaithful")
    stages = {call["stage"] for row in compiled for call in row["llm_calls"]}
    assert {"concept_graph", "ground", "define", "draft", "decompose", "faithfulness"} <= stages
    assert "think" not in stages, "the concept graph is got's plan"


def test_agent_rows_stay_within_the_budget_and_the_report_shows_sr_at_k(world, shared_dir, tmp_path):
    table, proofnet, run_dir = _run_mode(world, shared_dir, tmp_path, "agent")
    assert table.height == MODE_ROWS + len(MODE_TRIGGERED["agent"]) and set(table["mode"]) == {"agent"}
    assert table["tool_calls"].max() <= BUDGET
    assert (table["tool_trace"].list.len() == table["tool_calls"]).all()
    rows = {row["id"]: row for row in table.iter_rows(named=True)}
    for name, (_, status) in MODE_TRIGGERED["agent"].items():
        assert rows[name]["status"] == status and rows[name]["tool_calls"] == BUDGET, name
    for item in proofnet:
        row = rows[item["name"]]
        trace = {entry["tool"]: entry["outcome"] for entry in row["tool_trace"]}
        assert item["informal_stmt"].split("\\begin{proof}")[0].strip() not in trace["examples"], \
            "the problem is never its own example"
        found = trace["search_declarations"].splitlines()
        assert found and not found[0].startswith("No declaration"), "search answers with the index's declarations"
        if row["statement"] is not None:
            assert row["status"] == "faithful" and row["statement"].startswith(item["header"].split("\n")[0])

    assert report.main([f"run_dir={run_dir}", "formalizations.sr_at_k=[4,5,9]"]) == 0
    page = (run_dir / "report" / "report.md").read_text()
    assert "## SR@K of the agent" in page and (run_dir / "report" / "sr_at_k.png").exists()
    curve = pl.read_csv(run_dir / "report" / "tables" / "sr_at_k.csv")
    solved = table.filter(pl.col("status") == "faithful")["tool_calls"]
    assert curve["k"].to_list() == [4, 5, 9]
    assert curve["solved"].to_list() == [int((solved <= k).sum()) for k in (4, 5, 9)]
    assert curve["solved"][0] == 0, "the sim's agent compiles at its fifth call at the earliest"
