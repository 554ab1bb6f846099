"""Evaluate on the fixtures' benchmark files with the simulated LLM and Lean: a start on a full disk that is one line
and resumes, exact Success@t, trivial statements excluded, resume without new calls; and the benchmark readers
(layout and Parquet) on their own."""

from __future__ import annotations

import contextlib
import io
import shutil
from pathlib import Path
from typing import NamedTuple

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import ray
import yaml

from operators.llm.sim.scripts import success_attempt, unit
from operators.llm.sim.server import SimServer
from operators.rows.benchmark_items import BenchmarkLayoutError, layout_item, prover_models
from pipelines import evaluate
from pipelines.jobs import evaluation
from pipelines.reporting import stats
from tests.full_disk import (
    DISK_FULL_EXIT,
    left_half_written,
    refused_write_line,
    tiny_disk_at,
    without_a_tiny_disk,
)
from tests.mine_support import SIM_CONF, sim_server_config

SEED_DIR = "abstract/RepresentationTheory/FiniteIndex"
TRIVIAL_FILE = f"{SEED_DIR}/31.lean"  # scripted below: `aesop` closes it
TRIVIAL_NAME = "ind_res_contains_subrepresentation"
PROVERS = ["prover", "other"]  # `other` is no role of conf/llm/sim.yaml: it becomes a model on the same endpoint
MAX_REPAIRS = 2
SIM_SEED = 0


def overrides(benchmark_dir, run_dir, base_url) -> list[str]:
    return [
        f"benchmark_dir={benchmark_dir}",
        "provers=[" + ",".join(PROVERS) + "]",
        "llm=sim",
        "lean=sim",
        f"run_dir={run_dir}",
        "llm.backend=openai",
        f"llm.endpoints.sim.base_url={base_url}",
        "lean.sim.import_s=0.05",
        "lean.sim.check_s=0.01",
        "lean.sim.burn_cpu=false",
        f'lean.sim.error_rules=[{{pattern:"(?s)^(?!.*{TRIVIAL_NAME}).*aesop",message:"aesop failed (simulated)"}}]',
    ]


@pytest.fixture(scope="module")
def benchmark_dir(mathliblemma_dir, tmp_path_factory):
    """The fixtures' five statements of one seed, in the benchmark layout."""
    root = tmp_path_factory.mktemp("benchmark")
    shutil.copytree(mathliblemma_dir / "benchmark" / SEED_DIR, root / SEED_DIR)
    return root


class FullDisk(NamedTuple):
    """An evaluation on a disk that filled mid-run: where, its exit status, what it printed on stderr, and what it
    left behind that it must not (`left_half_written`)."""

    run_dir: Path
    status: int
    stderr: str
    left: list[Path]


class Evaluated(NamedTuple):
    """The run dir, its table after the first clean end, the sim's request counts after it and after the same command
    again, and the full-disk start that came first (None where no tmpfs can be mounted)."""

    run_dir: Path
    table: pl.DataFrame
    first: dict
    second: dict
    full_disk: FullDisk | None


def on_a_full_disk(args: list[str], tiny: Path, run_dir: Path) -> FullDisk:
    """Evaluate with run_dir on the tiny disk `tiny`, then copy what it left to `run_dir` (a bigger disk)."""
    stderr = io.StringIO()
    with contextlib.redirect_stderr(stderr):
        status = evaluate.main([*args, f"run_dir={tiny / 'run'}"])
    full = FullDisk(tiny / "run", status, stderr.getvalue(), left_half_written(tiny / "run"))
    shutil.copytree(tiny / "run", run_dir)
    return full


@pytest.fixture(scope="module")
def evaluated(benchmark_dir, tmp_path_factory) -> Evaluated:
    """One evaluation started on a disk too small for it (where a tmpfs can be mounted), resumed to its end on a
    bigger one, then the same command again on the same run_dir: so every test below reads a resumed run, which must
    be the clean run the sim's script makes."""
    folder = tmp_path_factory.mktemp("evaluate")
    run_dir = folder / "run"
    ray.init(num_cpus=4, include_dashboard=False, log_to_driver=False)
    try:
        with SimServer(sim_server_config(median_s=0.01)) as server, tiny_disk_at(folder / "tiny") as tiny:
            args = overrides(benchmark_dir, run_dir, server.base_url)
            full_disk = on_a_full_disk(args, tiny, run_dir) if tiny is not None else None
            assert evaluate.main(args) == 0
            first = server.stats.snapshot()["received_by_call"]
            first_table = pl.read_parquet(run_dir / "candidates" / "*.parquet")
            assert evaluate.main(args) == 0
            second = server.stats.snapshot()["received_by_call"]
    finally:
        ray.shutdown()
    return Evaluated(run_dir, first_table, first, second, full_disk)


def scripted_attempt(model: str, candidate_id: str) -> int | None:
    """The attempt (1-based) at which conf/llm/sim.yaml's script makes `model` prove `candidate_id`."""
    weights = yaml.safe_load(SIM_CONF.read_text())["sim"]["script"]["prove"]["proved_at_attempt"]
    return success_attempt(weights, unit(SIM_SEED, model, "prove", candidate_id))


@pytest.mark.ray
def test_every_benchmark_file_is_one_candidate_with_its_path_as_id(evaluated, benchmark_dir):
    table = evaluated.table
    files = sorted(str(p.relative_to(benchmark_dir)) for p in benchmark_dir.rglob("*.lean"))
    assert sorted(table["candidate_id"].to_list()) == files and len(files) == 5
    assert set(table["seed_id"]) == {"Mathlib.RepresentationTheory.FiniteIndex"}
    assert set(table["domain"]) == {"abstract"}
    assert table["judge_verdict"].null_count() == table.height, "a benchmark is not judged"


@pytest.mark.ray
def test_trivial_statement_is_flagged_and_not_proved(evaluated):
    table = evaluated.table
    trivial = table.filter(pl.col("candidate_id") == TRIVIAL_FILE).row(0, named=True)
    assert (trivial["status"], trivial["trivial"], trivial["proofs"]) == ("trivial", True, [])
    others = table.filter(pl.col("candidate_id") != TRIVIAL_FILE)
    assert others["trivial"].to_list() == [False] * 4


@pytest.mark.ray
def test_success_at_t_per_prover_and_union_is_what_the_sim_was_scripted_to_do(evaluated):
    table = evaluated.table
    attempted = [cid for cid in table["candidate_id"].to_list() if cid != TRIVIAL_FILE]
    k = {(m, cid): scripted_attempt(m, cid) for m in PROVERS for cid in attempted}

    def solved(models: list[str], t: int) -> int:
        return sum(any(k[(m, cid)] is not None and k[(m, cid)] - 1 <= t for m in models) for cid in attempted)

    expected = {(p, t): solved([p], t) for p in PROVERS for t in range(MAX_REPAIRS + 1)}
    expected.update({("union", t): solved(PROVERS, t) for t in range(MAX_REPAIRS + 1)})
    assert expected[("union", 1)] > max(expected[(p, 1)] for p in PROVERS), "the script makes the union matter"

    success = stats.success_at(table, MAX_REPAIRS, ["abstract"]).filter(pl.col("domain") == "all")
    got = {(r["prover"], t): r[f"solved_at_{t}"] for r in success.iter_rows(named=True) for t in range(MAX_REPAIRS + 1)}
    assert got == expected
    assert set(success["attempted"]) == {4}
    for row in table.filter(pl.col("status") == "proved").iter_rows(named=True):
        assert row["success_at"] == min(p["success_at"] for p in row["proofs"] if p["proved"])
        assert "sorry" not in row["proof"]


@pytest.mark.ray
def test_resume_makes_no_new_calls_and_keeps_one_row_per_statement(evaluated):
    run_dir, first_table, first, second, _ = evaluated
    assert first["prove"] > 0 and second == first, "the second run found everything finished"
    again = pl.read_parquet(run_dir / "candidates" / "*.parquet")
    assert again["candidate_id"].is_unique().all()
    assert dict(zip(again["candidate_id"], again["status"])) == dict(zip(first_table["candidate_id"],
                                                                         first_table["status"]))


@pytest.mark.ray
def test_a_full_disk_is_one_line_exit_4_and_leaves_nothing_half_written(evaluated):
    full = evaluated.full_disk
    if full is None:
        without_a_tiny_disk()
    assert full.status == DISK_FULL_EXIT, full.stderr
    refused_write_line(full.stderr, full.run_dir)
    assert full.left == []


@pytest.mark.ray
def test_rows_are_marked_simulated(evaluated):
    table = evaluated.table
    assert all(p["llm_simulated"] and p["lean_simulated"] for p in table["provenance"].to_list())


def test_layout_paths_give_domain_seed_and_index():
    item = layout_item("abstract/RepresentationTheory/FiniteIndex/31.lean", "Mathlib")
    assert (item.candidate_id, item.seed_id, item.seed_path, item.domain, item.index) == (
        "abstract/RepresentationTheory/FiniteIndex/31.lean", "Mathlib.RepresentationTheory.FiniteIndex",
        "Mathlib/RepresentationTheory/FiniteIndex.lean", "abstract", 31)
    with pytest.raises(BenchmarkLayoutError):
        layout_item("abstract/31.lean", "Mathlib")


def test_unknown_prover_names_become_models_on_the_template_endpoint():
    models = {"prover": {"endpoint": "vllm", "model": "base"}, "judge": {"endpoint": "api", "model": "j"}}
    table = prover_models(models, ["prover", "goedel"], "prover")
    assert table["goedel"] == {"endpoint": "vllm", "model": "goedel"} and table["prover"] == models["prover"]


def test_parquet_statements_are_read_with_their_ids(tmp_path, benchmark_dir):
    statements = [p.read_text() for p in sorted(benchmark_dir.rglob("*.lean"))]
    table = pa.table({"candidate_id": ["a", "b", "c"], "statement": [statements[0], None, statements[1]],
                      "domain": ["applied", "applied", "abstract"]})
    pq.write_table(table, tmp_path / "statements.parquet")
    cfg = evaluation.load_config([f"benchmark_dir={tmp_path}", "llm=sim", "lean=sim"])
    items = evaluation.read_benchmark(cfg)
    assert [(item.candidate_id, item.domain, text) for item, text in items] == [
        ("a", "applied", statements[0]), ("c", "abstract", statements[1])]


def test_a_directory_without_statements_is_refused(tmp_path, capsys):
    assert evaluate.main([f"benchmark_dir={tmp_path}", "llm=sim", "lean=sim", f"run_dir={tmp_path / 'run'}"]) == 2
    assert "no .lean benchmark files" in capsys.readouterr().err
