"""Costs measured from an earlier run's tables, for a capacity plan that scales what that run did
(`plan.costs_from`): per LLM call label its calls per row, tokens and latency, the rows each stage took in, Lean
checks per row, replays, start-up and the longest candidate path. Pure polars over the tables (no Ray, no I/O).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

import polars as pl

from operators import discover, formalize, judge, prove, trivial
from operators.autoformalize import faithfulness
from operators.decontaminate import STAGE as DECONTAMINATE
from operators.rows import seeds
from operators.rows.candidates import CONTAMINATED
from operators.rows.candidates import PROVED as PROVED_STATUS
from operators.rows.candidates import SEED as SEED_ORIGIN
from operators.rows.candidates import SUBGOAL as SUBGOAL_ORIGIN
from pipelines.planning.capacity import CallCost, Costs, MiningShape, stated_subgoals
from pipelines.reporting import stats


def rows_entering(candidates: pl.DataFrame) -> dict[str, int]:
    """How many of a run's candidates each stage after split worked on, read off the columns it fills
    (decontaminate passes on what the judge saw and keeps what it marked)."""
    counts = candidates.select(
        (pl.col("judge_verdict").is_not_null() | (pl.col("status") == CONTAMINATED)).sum().alias(DECONTAMINATE),
        pl.col("judge_verdict").is_not_null().sum().alias(judge.STAGE),
        (pl.col("formalize_attempts").list.len() > 0).sum().alias(formalize.STAGE),
        pl.col("faithful").is_not_null().sum().alias(faithfulness.STAGE),
        pl.col("trivial").is_not_null().sum().alias(trivial.STAGE),
        (pl.col("proofs").list.len() > 0).sum().alias(prove.STAGE),
    ).row(0, named=True)
    return {stage: int(count) for stage, count in counts.items()}


def first_request_s(discoveries: pl.DataFrame, started_at: datetime) -> float:
    """Seconds from a run's start to its first LLM request: the earliest discover call's return less its latency."""
    sent = discoveries.select(
        pl.col("finished_at"),
        pl.col("llm_calls").list.eval(pl.element().struct.field("latency_s")).list.sum().alias("latency_s"))
    first = sent.select(pl.col("finished_at").dt.epoch("us") / 1e6 - pl.col("latency_s").fill_null(0.0)).min().item()
    return max(0.0, first - started_at.timestamp())


def longest_path_s(candidates: pl.DataFrame, service_s: Mapping[str, float], check_s: float) -> float:
    """The longest time one candidate needs from its discovery on, its calls and checks one after another: each
    call at its stage's service seconds where they are known (the LLM sim's), else at its measured latency."""
    services = pl.col("llm_calls").list.eval(
        pl.element().struct.field("stage").replace_strict(dict(service_s), default=None, return_dtype=pl.Float64)
        .fill_null(pl.element().struct.field("latency_s"))).list.sum()
    paths = candidates.select(services.fill_null(0.0) + pl.col("lean_checks").fill_null(0) * check_s)
    return float(paths.max().item() or 0.0)


def measured_subgoals(candidates: pl.DataFrame, shape: MiningShape, rows: Mapping[str, int],
                      stated_per_failed_proof: float) -> float:
    """Sub-goal candidates per candidate: as the run made them when it mined sub-goals, else as its failed proofs
    would at the stated goals per failed proof; 0 when the plan mines none."""
    if not shape.subgoal_levels:
        return 0.0
    origin = candidates["origin"].fill_null(SEED_ORIGIN) if "origin" in candidates.columns else None
    subgoals = int((origin == SUBGOAL_ORIGIN).sum()) if origin is not None else 0
    if subgoals:
        return subgoals / (candidates.height - subgoals)
    proved = int((candidates["status"] == PROVED_STATUS).sum())
    proving = rows[prove.STAGE]
    return stated_subgoals(shape, proving / candidates.height, proved / proving if proving else 0.0,
                           stated_per_failed_proof)


def measured_costs(candidates: pl.DataFrame, discoveries: pl.DataFrame, chars_per_token: float, source: str,
                   shape: MiningShape, started_at: datetime | None, stated_startup_s: float,
                   stated_subgoals_per_failed_proof: float = 0.0) -> Costs:
    """Costs measured from an earlier run (started at `started_at`) and its tables: per LLM call stage its calls per
    row and mean tokens and latency (discover's prompt less the seed's estimated tokens), checks per row of each
    Lean stage (from the histories), replays and their seconds, the seconds of the other checks, the run's start-up
    (`stated_startup_s` when its start is not recorded), its longest candidate path (at the simulators' stated
    speeds where `shape` has them) and its sub-goal candidates per candidate (`measured_subgoals`)."""
    sent = discoveries.filter(pl.col("seed_status") == seeds.OK)
    units = sent.height
    if units == 0 or candidates.is_empty():
        raise ValueError(f"{source} has no discover call or no candidate to measure costs from")
    rows = {discover.STAGE: units, **rows_entering(candidates)}
    calls = stats.llm_calls(candidates, discoveries)
    unknown = set(calls["stage"].unique().to_list()) - set(shape.row_stage_of_call)
    if unknown:
        raise ValueError(f"{source} has LLM calls of stages a mining plan does not know: {sorted(unknown)}")
    seed_tokens = float(sent["seed_chars"].sum()) / chars_per_token  # as `seeds.chars_per_token` estimates them
    per_stage = calls.group_by("stage").agg(
        pl.len().alias("calls"), pl.col("prompt_tokens").fill_null(0).sum(),
        pl.col("completion_tokens").fill_null(0).sum(), pl.col("latency_s").fill_null(0.0).sum())
    totals = {stage: values for stage, *values in per_stage.iter_rows()}
    costs = {}
    for stage in (stage for stage in shape.row_stage_of_call if stage in totals):  # in plan order
        count, prompt_tokens, completion_tokens, latency = totals[stage]
        if stage == discover.STAGE:
            prompt_tokens -= seed_tokens
        costs[stage] = CallCost(count / max(rows.get(shape.row_stage_of_call[stage], 0), 1), prompt_tokens / count,
                                completion_tokens / count, latency / count)
    replays = candidates.select(pl.col("proofs").explode().struct.field("replay_seconds")).drop_nulls()
    replay_seconds = float(replays.to_series().sum())
    checks = stats.lean_checks_by_stage(candidates)
    stage_checks = sum(checks.values())
    lean_seconds = float(candidates["lean_seconds"].fill_null(0.0).sum()) - replay_seconds
    check_s = lean_seconds / stage_checks if stage_checks else 0.0
    subgoals = measured_subgoals(candidates, shape, rows, stated_subgoals_per_failed_proof)
    discovered = candidates.height / (1.0 + subgoals) if shape.subgoal_levels else candidates.height
    return Costs(
        source=source,
        candidates_per_unit=discovered / units,
        row_shares={stage: rows.get(stage, 0) / candidates.height
                    if stage != DECONTAMINATE or shape.decontaminate else 0.0 for stage in shape.candidate_stages},
        calls=costs,
        checks_per_row={stage: checks.get(stage, 0) / rows[stage] if rows.get(stage) else 0.0
                        for stage in shape.lean_stages},
        replays_per_candidate=replays.height / candidates.height,
        lean_check_s=check_s,
        replay_s=replay_seconds / replays.height if replays.height else 0.0,
        startup_s=stated_startup_s if started_at is None else first_request_s(sent, started_at),
        path_s=longest_path_s(candidates, shape.service_s,
                              shape.lean_sim_costs[0] if shape.lean_sim_costs else check_s),
        subgoals_per_candidate=subgoals,
        imports_per_check=(float(candidates["lean_imports"].fill_null(0).sum()) / stage_checks
                           if "lean_imports" in candidates.columns and stage_checks else None),
    )
