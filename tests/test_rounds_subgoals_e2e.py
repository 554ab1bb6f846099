"""`mine subgoals.enabled=true rounds=2` on a local Ray with the simulated LLM and Lean: sub-goal candidates with their
parents, round-2 prompts that list round 1's lemmas, counts per round and origin, and a killed run that resumes to the
same rows."""

from __future__ import annotations

import json
import re

import polars as pl
import pytest

from lean_pool.lean_source import without_imports
from operators.llm.sim.server import SimServer
from operators.rows.candidates import PROVED, SEED, SUBGOAL
from tests.mine_support import make_seeds, mine_demo_run, overrides, read_table, sim_server_config
from tests.test_mine_e2e import KILLED_RUN_LATENCY_S, kill_when_written, readable_rows, run_to_end

pytestmark = pytest.mark.ray
SAMPLES = 1
BOTH = ("subgoals.enabled=true", "rounds=2")


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    """One complete run with both options, its prompts logged by the sim; the run dir, the prompts and its stdout."""
    root = tmp_path_factory.mktemp("rounds")
    log = root / "prompts.jsonl"
    mine_demo_run(root, SAMPLES, *BOTH, f"llm.sim.prompt_log={log}")
    prompts = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]
    return root / "run", prompts


def test_sub_goal_candidates_name_a_parent_that_exists(finished_run):
    run, _ = finished_run
    candidates = read_table(run, "candidates")
    assert candidates["candidate_id"].is_unique().all()
    subgoals = candidates.filter(pl.col("origin") == SUBGOAL)
    assert subgoals.height > 0
    parents = candidates.filter(pl.col("candidate_id").is_in(subgoals["parent_id"].to_list()))
    assert set(parents["candidate_id"]) == set(subgoals["parent_id"])
    assert set(parents["origin"]) == {SEED} and set(subgoals["depth"]) == {1}
    for row in subgoals.iter_rows(named=True):
        assert row["candidate_id"] == f"{row['parent_id']}/g{row['goal_index']}"
    assert set(candidates["origin"]) == {SEED, SUBGOAL} and set(candidates["round"]) == {1, 2}


def test_round_two_prompts_list_what_round_one_proved_for_the_seed(finished_run):
    run, prompts = finished_run
    candidates = read_table(run, "candidates")
    discover = {p["candidate_id"]: p["prompt"] for p in prompts if p["call"] == "discover"}
    round_one = candidates.filter((pl.col("round") == 1) & (pl.col("status") == PROVED))
    assert round_one.height > 0
    for seed, statements in round_one.group_by("seed_id").agg(pl.col("statement")).iter_rows():
        first, second = discover[f"{seed}/s0"], discover[f"{seed}/r2/s0"]
        for statement in statements:
            declaration = without_imports(statement)[1].strip()
            assert declaration in second and declaration not in first


def test_funnel_and_report_count_each_round_and_origin(finished_run, capsys):
    from pipelines import report

    run, _ = finished_run
    assert report.main([f"run_dir={run}"]) == 0
    capsys.readouterr()
    origins = pl.read_csv(run / "report" / "tables" / "origins.csv")
    candidates = read_table(run, "candidates")
    expected = candidates.group_by("round", "origin").len().sort("round", "origin")
    assert origins.select("round", "origin", "candidates").sort("round", "origin").rows() == expected.rows()
    assert origins["llm_calls"].sum() == candidates["llm_calls"].list.len().sum() + read_table(
        run, "discoveries")["llm_calls"].list.len().sum()


def test_a_killed_run_with_both_options_resumes_to_the_same_rows(finished_run, tmp_path):
    """Killed once round 1's seed candidates are written (so during its sub-goals or round 2), then run to its end:
    the same candidates with the same statuses as the uninterrupted run, none twice."""
    whole = read_table(finished_run[0], "candidates")
    first_pass = whole.filter((pl.col("round") == 1) & (pl.col("origin") == SEED)).height
    seed_list = make_seeds(tmp_path / "seeds")
    with SimServer(sim_server_config(KILLED_RUN_LATENCY_S, "preset=demo", *BOTH)) as server:
        args = [*overrides(tmp_path / "killed", tmp_path / "seeds", seed_list, server.base_url, SAMPLES), *BOTH]
        kill_when_written(args, tmp_path / "killed" / "candidates", tmp_path / "killed.log", files=first_pass + 1)
        written = readable_rows(tmp_path / "killed" / "candidates")
        assert 0 < len(written) < whole.height, "the kill landed inside the run"
        run_to_end(args, tmp_path / "resumed.log")
    resumed = read_table(tmp_path / "killed", "candidates")
    assert resumed["candidate_id"].is_unique().all(), "no candidate written twice"
    assert dict(zip(resumed["candidate_id"], resumed["status"])) == dict(zip(whole["candidate_id"], whole["status"]))
    log = (tmp_path / "resumed.log").read_text()
    assert re.search(r"^\[wave\] round 2: ", log, re.MULTILINE), log[-2000:]
    assert re.search(r"^  round 1 subgoal +\d+$", log, re.MULTILINE), log[-2000:]
