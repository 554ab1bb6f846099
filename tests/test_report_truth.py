"""What the report, the input reader and the README say is so: the overlap plot shows what its title says (and a
one-prover report has none), the cost table's Lean checks add up with the replays, an unreadable JSONL line keeps
the decoder's position, and what README.md and docs/ claim about the demo matches its config."""

from __future__ import annotations

import re

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from operators.rows.candidates import CANDIDATE_SCHEMA, LLM_CALL
from operators.rows.formalizations import InputRules, jsonl_rows
from pipelines import report
from pipelines.reporting import stats
from pipelines.reporting.run_data import load_run
from pipelines.runtime.outputs import marker
from tests.handmade_run import REPO, candidate, candidates, provenance, prover_run, write_run

SETTINGS = yaml.safe_load((REPO / "conf" / "report.yaml").read_text())
README = (REPO / "README.md").read_text()


def doc_words(page: str) -> str:
    """docs/PAGE with its whitespace collapsed, so a claim reads the same however its lines wrap."""
    return " ".join((REPO / "docs" / page).read_text().split())

REPLAY_SECONDS = 1.5


def one_prover_rows() -> list[dict]:
    """Candidates proved, or not, by the single prover `p1`."""
    rows = [
        candidate("c1", "A", status="proved", trivial=False, proofs=[prover_run("p1", "lemma_c1", ["pass"])]),
        candidate("c2", "B", status="compiled", trivial=False, reason="no prover succeeded within 2 repairs",
                  proofs=[prover_run("p1", "lemma_c2", ["fail"] * 3)]),
    ]
    for row in rows:
        row["provenance"] = provenance(False)
    return rows


def with_replays(rows: list[dict]) -> list[dict]:
    """The rows as a run with `verify.replay` on leaves them: each proved entry replayed and accepted, and each
    replay one more of the row's Lean checks and its seconds."""
    for row in rows:
        proved = [proof for proof in row["proofs"] or [] if proof["proved"]]
        for proof in proved:
            proof.update(replay="accepted", replay_seconds=REPLAY_SECONDS)
        row["lean_checks"] += len(proved)
        row["lean_seconds"] += REPLAY_SECONDS * len(proved)
    return rows


@pytest.mark.slow
def test_a_one_prover_report_embeds_no_overlap_plot(tmp_path):
    run_dir = write_run(tmp_path / "run", rows=one_prover_rows())
    out = run_dir / "report"
    out.mkdir()
    (out / marker(report.JOB)).write_text("an earlier report's folder")
    (out / "overlap.png").write_bytes(b"a plot an earlier report drew")
    assert report.main([f"run_dir={run_dir}"]) == 0
    page = (out / "report.md").read_text()
    assert not (out / "overlap.png").exists()
    assert "overlap.png" not in page
    overlap_section = page.split("### Overlap between provers")[1].split("\n## ")[0]
    assert "Only one prover ran (`p1`): no overlap to show." in overlap_section
    assert "|" not in overlap_section, "no table that would claim an overlap"


def test_the_overlap_plot_shows_what_each_prover_proved_and_the_other_did_not(tmp_path):
    run = load_run(str(write_run(tmp_path / "run")))
    figure = report.render(run, SETTINGS).figures["overlap"]
    (axes,) = figure.axes
    assert "Proved by row prover, not by column prover" in figure.get_suptitle()
    provers = [label.get_text() for label in axes.get_yticklabels()]
    assert provers == [label.get_text() for label in axes.get_xticklabels()] == ["p1", "p2"]
    proved_by = {prover: {row["candidate_id"] for row in run.candidates.iter_rows(named=True)
                          if prover in row["proved_by"]} for prover in provers}
    expected = [[None if a == b else len(proved_by[a] - proved_by[b]) for b in provers] for a in provers]
    assert axes.images[0].get_array().tolist() == expected
    shown = sorted(text.get_text() for text in axes.texts)
    assert shown == sorted(str(value) for values in expected for value in values if value is not None)

    table = stats.overlap(run.candidates)
    assert table.filter(pl.col("prover") == "p1")["not_by_p1"].item() is None
    assert "| p1 | 2 | 1 | — | 1 |" in report.overlap_markdown(table)


@pytest.mark.slow
def test_the_cost_table_counts_the_replays_so_the_lean_checks_add_up(tmp_path):
    rows = with_replays(candidates())
    replays = sum(1 for row in rows for proof in row["proofs"] or [] if proof.get("replay"))
    run_dir = write_run(tmp_path / "run", rows=rows)
    assert report.main([f"run_dir={run_dir}"]) == 0
    cost = pl.read_csv(run_dir / "report" / "tables" / "cost.csv")
    by_stage = dict(zip(cost["stage"].to_list(), cost["lean_checks"].to_list()))
    assert by_stage[stats.REPLAY] == replays == 4
    total = sum(row["lean_checks"] for row in rows)
    assert sum(count for stage, count in by_stage.items() if stage != stats.REPLAY) + by_stage[stats.REPLAY] == total
    assert stats.UNRECORDED not in by_stage
    page = (run_dir / "report" / "report.md").read_text()
    assert f"| replay | 0 | 0 | 0 | 0 | 0 | {replays} |" in page
    assert f"| Lean checks | {total} |" in page


@pytest.mark.slow
def test_answers_cut_at_max_tokens_are_counted_per_stage_in_the_table_and_its_csv(tmp_path):
    run_dir = write_run(tmp_path / "run")
    assert report.main([f"run_dir={run_dir}"]) == 0
    cost = pl.read_csv(run_dir / "report" / "tables" / "cost.csv")
    cut = dict(zip(cost["stage"].to_list(), cost["cut_calls"].to_list()))
    assert cut == {"discover": 1, "judge": 0, "formalize": 0, "trivial": 0, "prove": 0, "replay": 0}
    page = (run_dir / "report" / "report.md").read_text()
    assert "| Stage | LLM calls | Failed calls | Cut at max tokens |" in page
    assert "| discover | 3 | 0 | 1 | 3000 | 1500 | 0 |" in page


def test_a_run_with_files_written_before_calls_kept_their_finish_reason_still_reports(tmp_path):
    run_dir = write_run(tmp_path / "run")
    rows = candidates()
    for row in rows:
        row["llm_calls"] = [{key: value for key, value in entry.items() if key != "finish_reason"}
                            for entry in row["llm_calls"]]
    before = pa.list_(pa.struct([field for field in LLM_CALL if field.name != "finish_reason"]))
    schema = CANDIDATE_SCHEMA.set(CANDIDATE_SCHEMA.get_field_index("llm_calls"), pa.field("llm_calls", before))
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), run_dir / "candidates" / "part-1.parquet")
    run = load_run(str(run_dir))
    cost = stats.cost_by_stage(run.candidates, run.discoveries, run.stages)
    calls = {row["stage"]: (row["llm_calls"], row["cut_calls"]) for row in cost.iter_rows(named=True)}
    assert calls["judge"] == (2 * 9, 0) and calls["discover"] == (3, 1)


def test_checks_no_history_kept_are_their_own_row(tmp_path):
    rows = with_replays(candidates())
    lost = next(row for row in rows if row["status"] == "error_infra")
    lost["lean_checks"] += 2  # two proof attempts checked before the pool failed; the row keeps no proofs
    run = load_run(str(write_run(tmp_path / "run", rows=rows)))
    cost = stats.cost_by_stage(run.candidates, run.discoveries, run.stages)
    by_stage = dict(zip(cost["stage"].to_list(), cost["lean_checks"].to_list()))
    assert by_stage[stats.UNRECORDED] == 2
    assert sum(by_stage.values()) == stats.totals(run.candidates, cost)["lean_checks"]
    markdown = report.render(run, SETTINGS).markdown
    assert "`unfinished (error_infra)`: checks of rows that ended `error_infra`" in markdown


def test_an_unreadable_jsonl_line_keeps_the_decoders_whole_message_and_position():
    rules = InputRules(max_tokens=1000, chars_per_token=4.0, default_header="import Mathlib")
    data = b'{"informal": "fine"}\n\n{"informal": "cut\n{"informal": "\xff"}\n'
    rows = jsonl_rows(data, "in.jsonl", rules, {})
    reasons = [row["reason"] for row in rows if row["status"] == "bad_input"]
    assert reasons == [
        "line 3 is not JSON: Unterminated string starting at: line 1 column 14 (char 13)",
        "line 4 is not UTF-8: 'utf-8' codec can't decode byte 0xff in position 14: invalid start byte",
    ]


def test_the_docs_say_what_the_demo_preset_sets_and_have_the_sections_they_point_to():
    preset = yaml.safe_load((REPO / "conf" / "preset" / "demo.yaml").read_text())
    mine = yaml.safe_load((REPO / "conf" / "mine.yaml").read_text())
    per_file = (preset.get("output") or {}).get("rows_per_file", mine["output"]["rows_per_file"])
    assert "The demo keeps the default, so its 18 candidates are one file" in doc_words("mining.md")
    assert per_file >= 18, "docs/mining.md says the demo's 18 candidates are one file"
    assert not re.search(r"rows_per_file=\d+` on the demo", doc_words("mining.md"))
    export_row = next(line for line in README.splitlines() if line.startswith("| `folklore export"))
    assert "Hugging Face dataset card" in export_row and "(docs/export.md)" in export_row
    export_page = doc_words("export.md")
    assert "Hugging Face dataset card" in export_page and "named nowhere in the card" in export_page
    line_3 = "line 3 is not JSON: Unterminated string starting at: line 1 column 10 (char 9)"
    assert line_3 in doc_words("autoformalization.md")
