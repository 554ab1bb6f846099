"""The report's figures per autoformalization mode and ALA's SR@K, on a hand-built formalizations table whose every
figure is known:

| id | mode   | status         | statement | faithful | tool_calls | llm calls |
|----|--------|----------------|-----------|----------|------------|-----------|
| d1 | direct | faithful       | yes       | true     |            | 3         |
| g1 | got    | unfaithful     | yes       | false    |            | 5         |
| g2 | got    | refused        |           |          |            | 1         |
| k1 | agent  | faithful       | yes       | true     | 5          | 6         |
| k2 | agent  | faithful       | yes       | true     | 12         | 13        |
| k3 | agent  | unfaithful     | yes       | false    | 4          | 5         |
| k4 | agent  | not_compilable |           |          | 24         | 24        |
| k5 | agent  | bad_input      |           |          |            | 0         |
"""

from __future__ import annotations

from typing import Any

import polars as pl
import pytest

from operators.rows.formalizations import empty_formalization, formalizations_table
from pipelines import report
from pipelines.reporting import formalization_stats as fstats
from tests.handmade_run import STAMP, provenance
from tests.test_report_formalizations import write_formalization_run

ROWS = [("d1", "direct", "faithful", True, None, 3), ("g1", "got", "unfaithful", False, None, 5),
        ("g2", "got", "refused", None, None, 1), ("k1", "agent", "faithful", True, 5, 6),
        ("k2", "agent", "faithful", True, 12, 13), ("k3", "agent", "unfaithful", False, 4, 5),
        ("k4", "agent", "not_compilable", None, 24, 24), ("k5", "agent", "bad_input", None, None, 0)]


def table_rows() -> list[dict[str, Any]]:
    built = []
    for row_id, mode, status, faithful, tool_calls, llm_calls in ROWS:
        row = empty_formalization(id=row_id, source="s", informal=f"Statement {row_id}.", mode=mode, status=status,
                                  faithful=faithful, tool_calls=tool_calls, provenance=provenance(True),
                                  finished_at=STAMP,
                                  llm_calls=[{"stage": "agent", "model": "m", "attempt": n, "prompt_tokens": 1,
                                              "completion_tokens": 1, "latency_s": 0.1, "error_kind": None}
                                             for n in range(llm_calls)])
        if faithful is not None:
            row["statement"] = f"theorem {row_id} : True := sorry"
        built.append(row)
    return built


def frame() -> pl.DataFrame:
    return pl.from_arrow(formalizations_table(table_rows()))


def test_sr_at_k_counts_the_agents_faithful_rows_within_k_tool_calls_over_its_valid_rows():
    curve = fstats.sr_at_k(frame(), [4, 5, 10, 24])
    assert curve.select("k", "problems", "solved").rows() == [(4, 4, 0), (5, 4, 1), (10, 4, 1), (24, 4, 2)]
    assert curve["sr"].to_list() == [0.0, 25.0, 25.0, 50.0]


def test_each_mode_gets_its_rates_and_its_calls_per_problem():
    modes = {row["mode"]: row for row in fstats.by_mode(frame()).iter_rows(named=True)}
    assert list(modes) == ["direct", "got", "agent"]
    assert (modes["got"]["valid"], modes["got"]["compiled"], modes["got"]["faithful"]) == (2, 1, 0)
    assert (modes["agent"]["valid"], modes["agent"]["compile_rate"], modes["agent"]["final_accuracy"]) == \
        (4, 75.0, 50.0)
    assert (modes["agent"]["llm_calls_per_problem"], modes["agent"]["tool_calls_per_problem"]) == (12.0, 11.25)
    assert modes["direct"]["tool_calls_per_problem"] is None


@pytest.mark.slow
def test_the_page_shows_sr_at_k_with_its_curve_only_when_the_agent_ran(tmp_path):
    run_dir = write_formalization_run(tmp_path / "agent", simulated=True, table_rows=table_rows())
    assert report.main([f"run_dir={run_dir}", "formalizations.sr_at_k=[5,24]"]) == 0
    page = (run_dir / "report" / "report.md").read_text()
    assert "## SR@K of the agent (simulated run)" in page and "| 24 | 2 (50.0%) |" in page
    assert "| agent | 4 | 3 (75.0%) | 2 (50.0%) | 12.0 | 11.2 |" in page
    assert (run_dir / "report" / "sr_at_k.png").exists()
    direct_only = [row for row in table_rows() if row["mode"] == "direct"]
    run_dir = write_formalization_run(tmp_path / "direct", simulated=True, table_rows=direct_only)
    assert report.main([f"run_dir={run_dir}"]) == 0
    assert "SR@K" not in (run_dir / "report" / "report.md").read_text()
    assert not (run_dir / "report" / "sr_at_k.png").exists()
