"""The report on a hand-built run (tests/handmade_run.py): every table, every figure and the written files."""

from __future__ import annotations

import json

import polars as pl
import pytest
import yaml

from pipelines import report
from pipelines.reporting import stats
from pipelines.reporting.run_data import load_run
from tests.handmade_run import REPO, candidate, candidates, provenance, write_run

SETTINGS = yaml.safe_load((REPO / "conf" / "report.yaml").read_text())
DOMAINS = SETTINGS["domains"]
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture
def sim_run(tmp_path):
    return load_run(str(write_run(tmp_path / "run", simulated=True)))


@pytest.fixture
def real_run(tmp_path):
    return load_run(str(write_run(tmp_path / "run", simulated=False)))


def rows_by(frame: pl.DataFrame, *keys: str) -> dict:
    return {tuple(row[k] for k in keys) if len(keys) > 1 else row[keys[0]]: row for row in frame.iter_rows(named=True)}


def test_funnel_per_domain_counts_each_step(sim_run):
    funnel = stats.funnel_by_domain(sim_run.candidates, DOMAINS)
    assert funnel["domain"].to_list() == ["foundational", "abstract", "all"]
    got = {d: (r["seeds"], r["proposed"], r["judged_correct"], r["compilable"], r["trivial"], r["proved"],
               r["error_infra"])
           for d, r in rows_by(funnel, "domain").items()}
    assert got == {"foundational": (2, 5, 4, 3, 0, 2, 0), "abstract": (1, 4, 4, 2, 1, 1, 1),
                   "all": (3, 9, 8, 5, 1, 3, 1)}
    all_row = rows_by(funnel, "domain")["all"]
    assert all_row["judged_correct_pct"] == pytest.approx(800 / 9)
    assert all_row["proved_pct"] == pytest.approx(100 / 3)


def test_funnel_without_a_judge_leaves_judged_correct_empty(sim_run):
    unjudged = sim_run.candidates.with_columns(pl.lit(None, pl.Boolean).alias("judge_verdict"))
    funnel = stats.funnel_by_domain(unjudged, DOMAINS)
    assert funnel["judged_correct"].null_count() == funnel.height
    assert "| all | 3 | 9 | 0 (0.0%) | 0 (0.0%) | — | 5 (55.6%) |" in report.funnel_markdown(funnel)


def test_success_at_per_prover_and_domain_with_union(sim_run):
    success = rows_by(stats.success_at(sim_run.candidates, 2, DOMAINS), "prover", "domain")
    solved = {key: (r["attempted"], r["solved_at_0"], r["solved_at_1"], r["solved_at_2"]) for key, r in success.items()}
    assert solved == {
        ("p1", "foundational"): (3, 1, 1, 1), ("p1", "abstract"): (1, 0, 1, 1), ("p1", "all"): (4, 1, 2, 2),
        ("p2", "foundational"): (3, 0, 1, 2), ("p2", "abstract"): (1, 0, 0, 0), ("p2", "all"): (4, 0, 1, 2),
        ("union", "foundational"): (3, 1, 2, 2), ("union", "abstract"): (1, 0, 1, 1), ("union", "all"): (4, 1, 3, 3),
    }
    assert success[("union", "all")]["success_at_1"] == pytest.approx(75.0)


def test_overlap_says_what_each_prover_alone_solved(sim_run):
    overlap = rows_by(stats.overlap(sim_run.candidates), "prover")
    assert overlap["p1"] == {"prover": "p1", "proved": 2, "only_this": 1, "not_by_p1": None, "not_by_p2": 1}
    assert overlap["p2"] == {"prover": "p2", "proved": 2, "only_this": 1, "not_by_p1": 1, "not_by_p2": None}


def test_cost_per_stage_and_per_proved_lemma(sim_run):
    cost = stats.cost_by_stage(sim_run.candidates, sim_run.discoveries, sim_run.stages)
    assert cost.columns[:4] == ["stage", "llm_calls", "failed_calls", "cut_calls"]
    assert cost.rows() == [
        ("discover", 3, 0, 1, 3000, 1500, 30.0, 0),
        ("judge", 9, 0, 0, 90, 9, 4.5, 0),
        ("formalize", 3, 0, 0, 60, 15, 3.0, 11),
        ("trivial", 0, 0, 0, 0, 0, 0.0, 6),
        ("prove", 21, 1, 0, 630, 210, 42.0, 19),
        ("replay", 0, 0, 0, 0, 0, 0.0, 0),
    ]
    total = stats.totals(sim_run.candidates, cost)
    assert (total["tokens"], total["lean_checks"], total["lean_seconds"], total["proved"]) == (5514, 36, 18.0, 3)
    assert (total["tokens_per_proved"], total["lean_seconds_per_proved"]) == (1838.0, 6.0)


def test_rejection_reasons_are_classed_and_counted(sim_run):
    reasons = {(r["where"], r["class"]): r["count"]
               for r in stats.rejection_reasons(sim_run.candidates, 10).iter_rows(named=True)}
    assert reasons == {
        ("final: rejected_by_judge", "the judge did not answer … (N/N)"): 1,
        ("final: not_compilable", "Lean still reports errors after N repair rounds"): 1,
        ("final: not_compilable", "restates an existing declaration"): 1,
        ("final: error_infra", "prove"): 1,
        ("failed proof: last attempt", "error: line N, column N: unknown identifier …"): 3,
        ("failed proof: last attempt", "refused: … is declared differently than in the reference"): 1,
        ("Lean errors: formalize", "unknown constant …"): 4,
        ("Lean errors: formalize", "… has already been declared"): 1,
        ("Lean errors: prove", "unknown identifier …"): 15,
    }
    assert stats.rejection_reasons(sim_run.candidates, 1).filter(pl.col("where") == "final: not_compilable").height == 1


def bars(axes) -> list[list[float]]:
    return [[float(v) for v in container.datavalues] for container in axes.containers]


def figure_texts(figure) -> str:
    return " ".join([figure.get_suptitle(), *(text.get_text() for text in figure.texts)])


def test_each_figure_draws_the_table_numbers_and_the_sim_label(sim_run):
    rendered = report.render(sim_run, SETTINGS)
    figures = rendered.figures
    assert set(figures) == {"funnel", "success_at", "overlap", "cost", "time", "rejections"}
    for name, figure in figures.items():
        assert SETTINGS["sim_label"] in figure_texts(figure), name

    (funnel_axes,) = figures["funnel"].axes
    assert bars(funnel_axes) == [[5, 4, 9], [0, 0, 0], [0, 0, 0], [4, 4, 8], [3, 2, 5], [0, 1, 1], [2, 1, 3]]

    all_panel = figures["success_at"].axes[-1]
    assert all_panel.get_title() == "all domains (n=4)"
    assert bars(all_panel) == [[25.0, 50.0, 50.0], [0.0, 25.0, 50.0], [25.0, 75.0, 75.0]]

    (overlap_axes,) = figures["overlap"].axes
    assert overlap_axes.images[0].get_array().tolist() == [[None, 1], [1, None]]

    tokens_axes, checks_axes = figures["cost"].axes
    assert bars(tokens_axes) == [[3000, 90, 60, 0, 630], [1500, 9, 15, 0, 210]]
    assert bars(checks_axes) == [[0, 0, 11, 6, 19, 0]]

    (time_axes,) = figures["time"].axes
    assert bars(time_axes) == [[30.0, 4.5, 3.0, 0.0, 42.0, 18.0]]

    (reasons_axes,) = figures["rejections"].axes
    assert max(bars(reasons_axes)[0]) == 15
    assert reasons_axes.get_yticklabels()[-1].get_text() == "Lean errors: prove | unknown identifier …"


def test_real_run_figures_and_page_carry_no_sim_label(real_run):
    rendered = report.render(real_run, SETTINGS)
    assert SETTINGS["sim_label"] not in rendered.markdown and "simulated" not in rendered.markdown
    assert all(SETTINGS["sim_label"] not in figure_texts(figure) for figure in rendered.figures.values())


@pytest.mark.slow
def test_cli_writes_the_page_the_plots_and_the_tables(tmp_path):
    run_dir = write_run(tmp_path / "run", simulated=True)
    assert report.main([f"run_dir={run_dir}"]) == 0
    out = run_dir / "report"
    page = (out / "report.md").read_text()
    for name in ("funnel", "success_at", "overlap", "cost", "time", "rejections"):
        assert (out / f"{name}.png").read_bytes().startswith(PNG_MAGIC)
        assert f"({name}.png)" in page
    assert page.count(SETTINGS["sim_label"]) == 2, "banner at the top and the bottom of the page"
    assert page.count("(simulated run)") == 9, "the title and every section heading"
    assert "Dedup was off" in page
    assert ("| all | 3 | 9 | 0 (0.0%) | 0 (0.0%) | 8 (88.9%) | 5 (55.6%) | 0 (0.0%) | 1 (11.1%) | 3 (33.3%) | 1 |"
            in page)
    assert "| union | all | 4 | 1 (25.0%) | 3 (75.0%) | 3 (75.0%) |" in page
    assert "| Tokens | 5514 | 1838.0 |" in page
    assert pl.read_csv(out / "tables" / "funnel.csv").filter(pl.col("domain") == "all")["proved"].item() == 3


def test_dedup_section_counts_what_was_dropped_and_what_it_restates(tmp_path):
    settings = json.dumps({"threshold": 0.98, "k": 10, "index_rev": "abc", "model_id": "m"})
    rows = candidates(simulated=False)
    duplicates = [
        candidate("c10", "A", status="duplicate", dedup_kind="mathlib", dedup_match="Nat.add_zero", dedup_score=1.0),
        candidate("c11", "A", status="duplicate", dedup_kind="mathlib", dedup_match="Nat.add_zero", dedup_score=0.99),
        candidate("c12", "C", status="duplicate", dedup_kind="candidate", dedup_match="Mathlib.Algebra.Gamma/s0/c6",
                  dedup_score=1.0),
    ]
    for row in [*rows, *duplicates]:
        row["provenance"] = {**provenance(False), "dedup": settings}
    run = load_run(str(write_run(tmp_path / "run", rows=[*rows, *duplicates])))
    funnel = rows_by(stats.funnel_by_domain(run.candidates, DOMAINS), "domain")
    assert (funnel["all"]["proposed"], funnel["all"]["duplicate"]) == (12, 3)
    assert funnel["foundational"]["duplicate"] == 2 and funnel["all"]["duplicate_pct"] == pytest.approx(25.0)
    page = report.render(run, SETTINGS).markdown
    assert "Threshold 0.98 on the cosine of the statements (index of Mathlib `abc`)." in page
    assert "| an earlier candidate of the seed | 1 | 1 | 1.000 |" in page
    assert "| a Mathlib declaration | 2 | 1 | 0.990 |" in page


def test_cli_refuses_a_directory_without_a_run(tmp_path, capsys):
    assert report.main([f"run_dir={tmp_path / 'nothing'}"]) == 2
    assert "no run" in capsys.readouterr().err
    assert not (tmp_path / "nothing").exists()
