"""Every job ends the same way: the closing block (what was written, rows by status, what it cost, SIMULATED, the
next command), status lines in the statuses' own words, nothing to do said plainly, and a Ctrl-C after the work is
written ending well."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import ray

from operators.llm.usage import CallUsage
from pipelines import autoformalize, evaluate, export, mine, report
from pipelines.reporting.summary import SIMULATED_NOTE, Closing, closing_lines, llm_cost_line, rows_by_status
from pipelines.runtime.cli import INTERRUPTED, WorkWritten, run_job
from pipelines.runtime.progress import handed_on_counts
from tests.mine_support import FAST_LEAN


def test_closing_block_shows_what_happened_and_nothing_else() -> None:
    lines = closing_lines(Closing(
        "runs/x", {"candidates/": ("runs/x/candidates", "3 rows")},
        {"candidates": rows_by_status(["proved", "proved", "duplicate"], ("discovered", "duplicate", "proved",
                                                                         "error_infra"))},
        cost=["llm calls: 4"], simulated=True, next_step="full report: python -m pipelines.report run_dir=runs/x"))
    assert lines == [
        "run_dir: runs/x",
        "  candidates/  runs/x/candidates  (3 rows)",
        "candidates: 3",
        "  duplicate         1",
        "  proved            2",
        "  error_infra       0",
        "llm calls: 4",
        SIMULATED_NOTE,
        "full report: python -m pipelines.report run_dir=runs/x",
    ]


def test_status_lines_say_what_goes_on_to_the_next_stage() -> None:
    batch = pa.table({"status": ["discovered", "discovered", "rejected_by_judge", "duplicate"]})
    assert handed_on_counts(batch, "formalize", frozenset({"discovered"})) == {
        "→formalize": 2, "rejected_by_judge": 1, "duplicate": 1}
    # The last stage hands nothing on: its statuses are what is written.
    assert handed_on_counts(batch, None, frozenset({"discovered"})) == {
        "discovered": 2, "rejected_by_judge": 1, "duplicate": 1}


def interrupted_job(work: WorkWritten | None, written: bool):
    def job() -> None:
        if written and work is not None:
            work.mark()
        raise KeyboardInterrupt
    return job


def test_ctrl_c_after_the_work_is_written_ends_well(capsys: pytest.CaptureFixture) -> None:
    work = WorkWritten()
    assert run_job(interrupted_job(work, written=True), work=work) == 0
    assert capsys.readouterr().err == "interrupted after the work was written: nothing is lost\n"
    work = WorkWritten()
    assert run_job(interrupted_job(work, written=False), work=work) == INTERRUPTED
    assert capsys.readouterr().err.startswith("interrupted: rows already written are kept")


@pytest.mark.parametrize("content", [b"", b"\n  \n"])
@pytest.mark.slow
def test_an_empty_input_is_nothing_to_do(tmp_path: Path, content: bytes, capsys: pytest.CaptureFixture) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(content)
    assert autoformalize.main(["preset=demo", f"input={empty}", f"run_dir={tmp_path / 'run'}"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err == f"error: input={empty} holds no rows: nothing to formalize\n"
    assert not (tmp_path / "run").exists() and not ray.is_initialized()


@pytest.mark.parametrize("listed", [[], ["seeds.list=[Mathlib/README.md/x.lean,Mathlib]"]])
@pytest.mark.slow
def test_a_seeds_root_without_lean_files_is_nothing_to_do(tmp_path: Path, capsys: pytest.CaptureFixture,
                                                          listed: list[str]) -> None:
    (tmp_path / "seeds" / "Mathlib").mkdir(parents=True)
    (tmp_path / "seeds" / "Mathlib" / "README.md").write_text("no Lean here\n")
    assert mine.main(["preset=demo", f"seeds.root={tmp_path / 'seeds'}", f"run_dir={tmp_path / 'run'}",
                      *listed]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.startswith("error: ") and err.endswith(": nothing to mine\n") and err.count("\n") == 1
    assert not (tmp_path / "run").exists() and not ray.is_initialized()


@pytest.fixture(scope="module")
def mined(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, str]:
    """A demo mining run: its directory and what it printed (stdout, stderr)."""
    run_dir = tmp_path_factory.mktemp("voice") / "run"
    capture = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(capture[0]), contextlib.redirect_stderr(capture[1]):
        assert mine.main(["preset=demo", f"run_dir={run_dir}", *FAST_LEAN, "llm.sim.latency.median_s=0.01"]) == 0
    return run_dir, capture[0].getvalue(), capture[1].getvalue()


@pytest.fixture
def mined_run(mined: tuple[Path, str, str]) -> Path:
    return mined[0]


@pytest.mark.ray
def test_mine_speaks_like_every_job(mined: tuple[Path, str, str]) -> None:
    run_dir, out, err = mined
    lines = out.splitlines()
    status = [line for line in lines if line.startswith("[status]")]
    judged = [line for line in status if line.split()[1] == "judge"]
    assert judged and all("discovered=" not in line and "→formalize=" in line for line in judged), status
    closing = lines[lines.index(f"run_dir: {run_dir}"):]
    [wave] = [line for line in lines if line.startswith("[wave]")]
    assert re.fullmatch(r"\[wave\] 1/1 done: 3 seeds in \d+ s; driver RSS [1-9]\d+ MiB", wave), wave
    assert lines.index(wave) < lines.index(f"run_dir: {run_dir}")
    candidates = pq.read_table(run_dir / "candidates", columns=["lean_checks", "proofs"]).to_pylist()
    checks = sum(row["lean_checks"] for row in candidates)
    replays = sum(1 for row in candidates for proof in row["proofs"] or [] if proof["replay"] is not None)
    assert replays and f"lean checks: {checks} (of which {replays} replays of accepted proofs)" in closing
    [calls] = [line for line in closing if line.startswith("llm calls: ")]
    assert re.match(r"llm calls: \d+ \(discover \d+, judge \d+, formalize \d+, prove \d+\); this start: \d+ "
                    r"\(0 failed, 0 answered from the run's cache\)$", calls), calls
    assert closing[-2:] == [SIMULATED_NOTE, f"full report: folklore report run_dir={run_dir}"]
    assert not any(re.search(r"\b(INFO|WARNING)\b|UserWarning", line) for line in err.splitlines()), err


def test_a_benchmark_without_statements_is_nothing_to_do(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    (tmp_path / "benchmark").mkdir()
    pq.write_table(pa.table({"statement": pa.array([], pa.string())}), tmp_path / "benchmark" / "empty.parquet")
    assert evaluate.main(["preset=demo", f"benchmark_dir={tmp_path / 'benchmark'}",
                          f"run_dir={tmp_path / 'run'}"]) == 2
    out, err = capsys.readouterr()
    expected = f"error: benchmark_dir={tmp_path / 'benchmark'} holds no statement: nothing to evaluate\n"
    assert out == "" and err == expected
    assert not (tmp_path / "run").exists() and not ray.is_initialized()


@pytest.mark.ray
def test_report_and_export_close_the_same_way(mined_run: Path, capsys: pytest.CaptureFixture) -> None:
    capsys.readouterr()
    assert report.main([f"run_dir={mined_run}"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"run_dir: {mined_run}" and lines[-1] == SIMULATED_NOTE
    assert lines[1].split()[:2] == ["report.md", f"{mined_run}/report/report.md"]
    assert export.main([f"run_dir={mined_run}", "allow_sim=true"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"run_dir: {mined_run}" and lines[-1] == SIMULATED_NOTE
    written = {line.split()[0]: line for line in lines[1:-1]}
    assert set(written) == {"pairs/", "trajectories/", "judge/", "lean/", "README.md"}
    assert written["pairs/"].endswith("(rows: 3 train)")  # the demo's seeds all fall on the train side


def test_the_calls_line_follows_the_pipeline_whatever_order_the_rows_met_them() -> None:
    """Rows list their calls in the order answers came back, which varies from run to run; the line does not."""
    counts = {"prove": 11, "judge": 13, "discover": 3, "formalize": 20}
    usage = {"prove": CallUsage(calls=2, ok=2)}
    assert llm_cost_line(counts, usage, ["discover", "judge", "formalize", "prove"]) == (
        "llm calls: 47 (discover 3, judge 13, formalize 20, prove 11); this start: 2 (0 failed, 0 answered from the "
        "run's cache)")
