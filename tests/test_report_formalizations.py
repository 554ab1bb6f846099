"""The report of an autoformalize run, on a hand-built formalizations table whose every figure is known.

Six rows over two sources (stages: d = draft, r = repair, f = faithfulness; alpha = 0.8):

| id | source | status         | statement | faithful | score | reference | reference_match | calls   |
|----|--------|----------------|-----------|----------|-------|-----------|-----------------|---------|
| a1 | Axler  | faithful       | yes       | true     | 0.95  | yes       | true            | d f     |
| a2 | Axler  | not_compilable |           |          |       | yes       |                 | d r r   |
| a3 | Axler  | bad_input      |           |          |       |           |                 |         |
| r1 | Rudin  | faithful       | yes       | true     | 1.0   | yes       | false           | d r f   |
| r2 | Rudin  | unfaithful     | yes       | false    | 0.4   |           |                 | d f     |
| r3 | Rudin  | refused        |           |          |       |           |                 | d       |
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow.parquet as pq
import pytest
import yaml

from operators.rows.formalizations import empty_formalization, formalizations_table
from pipelines import report
from pipelines.reporting import formalization_stats as fstats
from pipelines.reporting.run_data import FormalizationRun, RunNotFound, load_any, load_formalizations
from tests.handmade_run import REPO, STAMP, provenance, write_run

SETTINGS = yaml.safe_load((REPO / "conf" / "report.yaml").read_text())
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
ALPHA = 0.8
STAGE = {"d": "draft", "r": "repair", "f": "faithfulness"}
FIGURES = ("accuracy", "faithfulness_scores")
TABLES = ("statuses", "accuracy", "llm_calls", "reference_agreement", "faithful_vs_reference", "faithfulness_scores",
          "modes")


def calls(stages: str) -> list[dict[str, Any]]:
    return [{"stage": STAGE[s], "model": "m", "attempt": n, "prompt_tokens": 10, "completion_tokens": 5,
             "latency_s": 1.0, "error_kind": None} for n, s in enumerate(stages.split(), start=1)]


def formalization(row_id: str, source: str, status: str, stages: str, simulated: bool, **fields: Any
                  ) -> dict[str, Any]:
    row = empty_formalization(id=row_id, source=source, informal=f"Statement {row_id}.", status=status,
                              llm_calls=calls(stages), provenance=provenance(simulated), finished_at=STAMP)
    if fields.pop("compiled", False):
        row["statement"] = f"import Mathlib\n\ntheorem {row_id} : True := by\n  sorry\n"
    row.update(fields)
    return row


def rows(simulated: bool) -> list[dict[str, Any]]:
    ref = "theorem ref : True := sorry"
    return [
        formalization("a1", "Axler", "faithful", "d f", simulated, compiled=True, faithful=True,
                      faithfulness_score=0.95, reference=ref, reference_match=True),
        formalization("a2", "Axler", "not_compilable", "d r r", simulated, reference=ref, repairs=2),
        formalization("a3", "Axler", "bad_input", "", simulated, reason="empty statement"),
        formalization("r1", "Rudin", "faithful", "d r f", simulated, compiled=True, faithful=True,
                      faithfulness_score=1.0, reference=ref, reference_match=False, repairs=1),
        formalization("r2", "Rudin", "unfaithful", "d f", simulated, compiled=True, faithful=False,
                      faithfulness_score=0.4),
        formalization("r3", "Rudin", "refused", "d", simulated),
    ]


def write_formalization_run(run_dir: Path, simulated: bool = False, table_rows: list[dict[str, Any]] | None = None
                            ) -> Path:
    (run_dir / "formalizations").mkdir(parents=True)
    table = formalizations_table(rows(simulated) if table_rows is None else table_rows)
    pq.write_table(table, run_dir / "formalizations" / "part-0.parquet")
    manifest = {"run_id": "handmade-af", "created_at": STAMP.isoformat(), "config": {"faithfulness": {"alpha": ALPHA}}}
    (run_dir / "run.json").write_text(json.dumps(manifest))
    return run_dir


@pytest.fixture
def frame(tmp_path) -> pl.DataFrame:
    return load_formalizations(str(write_formalization_run(tmp_path / "run"))).formalizations


def by(table: pl.DataFrame, key: str) -> dict[str, dict[str, Any]]:
    return {row[key]: row for row in table.iter_rows(named=True)}


def test_every_status_is_counted_zeros_included(frame):
    assert fstats.status_counts(frame).rows() == [
        ("faithful", 2, pytest.approx(100 / 3)), ("unfaithful", 1, pytest.approx(100 / 6)),
        ("not_compilable", 1, pytest.approx(100 / 6)), ("refused", 1, pytest.approx(100 / 6)),
        ("bad_input", 1, pytest.approx(100 / 6)), ("error_infra", 0, 0.0),
    ]


def test_compile_rate_and_final_accuracy_leave_bad_input_out(frame):
    accuracy = fstats.accuracy_by_source(frame)
    assert accuracy["source"].to_list() == ["Axler", "Rudin", "all"]
    sources = by(accuracy, "source")
    got = {s: (r["rows"], r["bad_input"], r["valid"], r["compiled"], r["faithful"]) for s, r in sources.items()}
    assert got == {"Axler": (3, 1, 2, 1, 1), "Rudin": (3, 0, 3, 2, 1), "all": (6, 1, 5, 3, 2)}
    rates = {s: (r["compile_rate"], r["final_accuracy"]) for s, r in sources.items()}
    assert rates == {"Axler": (50.0, 50.0), "Rudin": (pytest.approx(200 / 3), pytest.approx(100 / 3)),
                     "all": (60.0, 40.0)}


def test_llm_calls_per_problem_and_per_stage(frame):
    assert fstats.calls_per_problem(frame).rows() == [
        ("draft", 5, 1.0, 1.0, 1), ("faithfulness", 3, 0.6, 1.0, 1), ("repair", 3, 0.6, 0.0, 2),
        ("all", 11, 2.2, 2.0, 3),
    ]


def test_agreement_with_the_reference(frame):
    assert fstats.reference_agreement(frame).row(0, named=True) == {
        "with_reference": 3, "compared": 2, "matching": 1, "judged": 2, "agree": 1,
        "match_pct": 50.0, "agree_pct": 50.0,
    }
    assert fstats.faithful_vs_reference(frame).rows() == [(True, 1, 1), (False, 0, 0)]


def test_score_histogram_counts_per_bin_with_the_last_bin_closed(frame):
    histogram = fstats.score_histogram(frame, SETTINGS["formalizations"]["score_bins"])
    assert histogram.height == 10
    assert histogram["count"].to_list() == [0, 0, 0, 0, 1, 0, 0, 0, 0, 2]
    assert (histogram["bin_start"][4], histogram["bin_end"][9]) == (0.4, 1.0)
    assert fstats.score_histogram(frame, 2)["count"].to_list() == [1, 2]


def test_cli_writes_page_plots_and_tables_of_a_simulated_run(tmp_path, capsys):
    run_dir = write_formalization_run(tmp_path / "run", simulated=True)
    assert report.main([f"run_dir={run_dir}"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"run_dir: {run_dir.resolve()}" and lines[-1].startswith("SIMULATED run")
    assert lines[1].split()[:2] == ["report.md", f"{run_dir.resolve()}/report/report.md"]
    out = run_dir / "report"
    page = (out / "report.md").read_text()
    for name in FIGURES:
        assert (out / f"{name}.png").read_bytes().startswith(PNG_MAGIC)
        assert f"({name}.png)" in page
    assert page.count(SETTINGS["sim_label"]) == 2, "banner at the top and the bottom of the page"
    assert page.count("(simulated run)") == 7, "the title and every section heading"
    assert "- run id: `handmade-af`" in page
    assert "| error_infra | 0 (0.0%) |" in page and "| faithful | 2 (33.3%) |" in page
    assert "| Axler | 3 | 1 | 2 | 1 (50.0%) | 1 (50.0%) |" in page
    assert "| Rudin | 3 | 0 | 3 | 2 (66.7%) | 1 (33.3%) |" in page
    assert "| all | 6 | 1 | 5 | 3 (60.0%) | 2 (40.0%) |" in page
    assert "| all | 11 | 2.2 | 2.0 | 3 |" in page and "| repair | 3 | 0.6 | 0.0 | 2 |" in page
    assert "1 (50.0%) of the 2 compiled statements with a reference (3 rows have one) are the reference's." in page
    assert "| faithful | 1 | 1 |" in page and "| unfaithful | 0 | 0 |" in page
    assert "agrees with the reference on 1 (50.0%) of the 2 it judged" in page
    assert "| [0.9, 1] | 2 |" in page and "| [0.4, 0.5) | 1 |" in page and "alpha = 0.8" in page
    assert {path.stem for path in (out / "tables").iterdir()} == set(TABLES)
    accuracy = by(pl.read_csv(out / "tables" / "accuracy.csv"), "source")
    assert (accuracy["Rudin"]["final_accuracy"], accuracy["all"]["compile_rate"]) == (pytest.approx(100 / 3), 60.0)
    calls_table = by(pl.read_csv(out / "tables" / "llm_calls.csv"), "stage")
    assert (calls_table["all"]["mean"], calls_table["draft"]["mean"]) == (2.2, 1.0)
    assert pl.read_csv(out / "tables" / "reference_agreement.csv")["match_pct"].item() == 50.0
    assert pl.read_csv(out / "tables" / "faithfulness_scores.csv")["count"].sum() == 3


def test_real_run_carries_no_sim_label(tmp_path, capsys):
    run_dir = write_formalization_run(tmp_path / "run", simulated=False)
    assert report.main([f"run_dir={run_dir}"]) == 0
    assert "simulated" not in capsys.readouterr().out
    page = (run_dir / "report" / "report.md").read_text()
    assert SETTINGS["sim_label"] not in page and "simulated" not in page
    rendered = report.render_formalizations(load_formalizations(str(run_dir)), SETTINGS)
    assert all(SETTINGS["sim_label"] not in figure.get_suptitle() for figure in rendered.figures.values())


def test_an_empty_table_still_reports(tmp_path):
    run_dir = write_formalization_run(tmp_path / "run", table_rows=[])
    run = load_formalizations(str(run_dir))
    assert run.alpha == ALPHA and not run.simulated
    page = report.render_formalizations(run, SETTINGS).markdown
    assert "| error_infra | 0 |" in page and "nothing to compare" in page


def test_the_report_picks_the_table_the_run_has(tmp_path):
    assert isinstance(load_any(str(write_formalization_run(tmp_path / "af"))), FormalizationRun)
    mining = write_run(tmp_path / "mining")
    assert not isinstance(load_any(str(mining)), FormalizationRun)
    with pytest.raises(RunNotFound, match="no formalizations/ table"):
        load_formalizations(str(mining))


@pytest.mark.parametrize("make", [True, False], ids=["empty directory", "no directory"])
def test_a_directory_without_a_table_exits_2_with_one_error_line(tmp_path, capsys, make):
    target = tmp_path / "nothing"
    if make:
        target.mkdir()
    assert report.main([f"run_dir={target}"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ")
    assert list(target.iterdir()) == [] if make else not target.exists()
