"""The numbers of a run, computed from its candidates table with polars: funnel, Success@t, overlap, cost, rejections.

The report, the notebook and the evaluate pipeline's summary all call these functions, so a figure in
a paper, a plot in the notebook and the line printed at the end of a run are the same number. Every
function is pure (data frames in, data frames out) so a small hand-built table can check each figure.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import cast

import polars as pl
import pyarrow as pa

from operators.llm.calls import CUT_FINISH_REASON
from operators.rows.candidates import (
    COMPILED,
    CONTAMINATED,
    DUPLICATE,
    ERROR_INFRA,
    NOT_COMPILABLE,
    ORIGINS,
    PROVED,
    REJECTED_BY_JUDGE,
    SEED,
    TRIVIAL,
    UNFAITHFUL,
)
from operators.stage import Stage

ALL = "all"
UNION = "union"
COMPILABLE_STATUSES = (COMPILED, UNFAITHFUL, TRIVIAL, PROVED)
# Rows of the cost table after the stages: the replays of accepted proofs, and the checks of rows that ended
# `error_infra` before their stage wrote its history (shown only when there are any).
REPLAY = "replay"
UNRECORDED = "unfinished (error_infra)"
_QUOTED = re.compile(r"`[^`]*`|'[^'\n]*'|\"[^\"\n]*\"|«[^»]*»")
_NUMBER = re.compile(r"\b\d+(\.\d+)?\b")
_ATTEMPT_PREFIX = re.compile(r"^attempt \d+: ")


def frame_of(table: pa.Table) -> pl.DataFrame:
    """A table's rows as a Polars frame (`pl.from_arrow` gives a Series for an array, never for a table)."""
    return cast(pl.DataFrame, pl.from_arrow(table))


def is_simulated(rows: pl.DataFrame) -> bool:
    """True when any row (a candidate or a formalization: both carry `provenance`) came from the simulated LLM or
    the simulated Lean: such numbers are not mathematics."""
    if rows.is_empty():
        return False
    provenance = rows.select(
        pl.col("provenance").struct.field("llm_simulated").fill_null(False).any().alias("llm"),
        pl.col("provenance").struct.field("lean_simulated").fill_null(False).any().alias("lean"),
    ).row(0)
    return any(provenance)


def domain_order(domains: Sequence[str], preferred: Sequence[str]) -> list[str]:
    """Domains in the preferred order (the paper's), the others after them alphabetically."""
    present = set(domains)
    return [d for d in preferred if d in present] + sorted(present - set(preferred))


def with_all(frame: pl.DataFrame, key: str) -> pl.DataFrame:
    """The rows twice: once as they are, once with `key` set to `all`, so one group-by gives the total row too."""
    return pl.concat([frame, frame.with_columns(pl.lit(ALL).alias(key))])


def ordered(frame: pl.DataFrame, key: str, order: Sequence[str]) -> pl.DataFrame:
    """The rows sorted by `key` in the given order, then `all`, then anything unlisted: tables read top to bottom."""
    rank = {name: index for index, name in enumerate([*order, ALL])}
    return frame.with_columns(pl.col(key).replace_strict(rank, default=len(rank)).alias("_rank")).sort(
        "_rank", maintain_order=True
    ).drop("_rank")


def percent(numerator: str, denominator: str) -> pl.Expr:
    """`numerator` as a percentage of `denominator`, null (shown as a dash) where the denominator is zero."""
    return pl.when(pl.col(denominator) > 0).then(100.0 * pl.col(numerator) / pl.col(denominator)).otherwise(None)


def funnel_by_domain(candidates: pl.DataFrame, preferred_domains: Sequence[str]) -> pl.DataFrame:
    """The paper's Table 1: per domain (and `all`), seeds, proposed candidates, then how many dedup dropped,
    restated a benchmark problem (decontaminate), were judged correct, compiled, drifted from the judged statement
    (faithfulness), were trivial and were proved, each also as a percentage of the proposed.

    `judged_correct` is null for a domain nobody judged (an evaluate run has no judge stage).
    """
    grouped = (
        with_all(candidates.select("domain", "seed_id", "judge_verdict", "status", "trivial"), "domain")
        .group_by("domain")
        .agg(
            pl.col("seed_id").n_unique().alias("seeds"),
            pl.len().alias("proposed"),
            (pl.col("status") == DUPLICATE).sum().alias("duplicate"),
            (pl.col("status") == CONTAMINATED).sum().alias("contaminated"),
            pl.col("judge_verdict").is_not_null().sum().alias("judged"),
            pl.col("judge_verdict").fill_null(False).sum().alias("judged_correct"),
            pl.col("status").is_in(COMPILABLE_STATUSES).sum().alias("compilable"),
            (pl.col("status") == UNFAITHFUL).sum().alias("unfaithful"),
            pl.col("trivial").fill_null(False).sum().alias("trivial"),
            (pl.col("status") == PROVED).sum().alias("proved"),
            (pl.col("status") == ERROR_INFRA).sum().alias("error_infra"),
        )
        .with_columns(
            pl.when(pl.col("judged") > 0).then(pl.col("judged_correct")).otherwise(None).alias("judged_correct")
        )
        .with_columns(
            percent(name, "proposed").alias(f"{name}_pct")
            for name in ("duplicate", "contaminated", "judged_correct", "compilable", "unfaithful", "trivial", "proved")
        )
        .drop("judged")
    )
    return ordered(grouped, "domain", domain_order(candidates["domain"].unique().to_list(), preferred_domains))


def funnel_by_origin(candidates: pl.DataFrame, discoveries: pl.DataFrame | None) -> pl.DataFrame:
    """Per round and origin (the seed's own candidates, then the sub-goals of failed proofs): candidates, how many
    dedup dropped, compiled, were trivial and were proved, the LLM calls they took (a round's discover calls count with
    its seed candidates) and proved lemmas per 100 of those calls: what a second round or sub-goals add for the
    calls they cost."""
    keyed = candidates.with_columns(pl.col("round").fill_null(1), pl.col("origin").fill_null(SEED))
    counts = keyed.group_by("round", "origin").agg(
        pl.len().alias("candidates"),
        (pl.col("status") == DUPLICATE).sum().alias("duplicate"),
        pl.col("status").is_in(COMPILABLE_STATUSES).sum().alias("compilable"),
        pl.col("trivial").fill_null(False).sum().alias("trivial"),
        (pl.col("status") == PROVED).sum().alias("proved"),
        pl.col("llm_calls").list.len().fill_null(0).sum().alias("llm_calls"),
    )
    if discoveries is not None and discoveries.height:
        discover = discoveries.with_columns(pl.col("round").fill_null(1)).group_by("round").agg(
            pl.col("llm_calls").list.len().fill_null(0).sum().alias("discover_calls")).with_columns(
            pl.lit(SEED).alias("origin"))
        counts = counts.join(discover, on=["round", "origin"], how="left").with_columns(
            (pl.col("llm_calls") + pl.col("discover_calls").fill_null(0)).alias("llm_calls")).drop("discover_calls")
    return counts.with_columns(
        pl.when(pl.col("llm_calls") > 0).then(100.0 * pl.col("proved") / pl.col("llm_calls")).otherwise(None)
        .alias("proved_per_100_calls")
    ).sort("round", pl.col("origin").replace_strict({o: i for i, o in enumerate(ORIGINS)}, default=len(ORIGINS)))


def dedup_matches(candidates: pl.DataFrame) -> pl.DataFrame:
    """What the dropped duplicates restate: per kind (a Mathlib declaration, an earlier candidate of the same
    seed), how many candidates were dropped, how many distinct statements they restate, and their lowest score."""
    return (
        candidates.filter(pl.col("status") == DUPLICATE)
        .group_by("dedup_kind")
        .agg(
            pl.len().alias("dropped"),
            pl.col("dedup_match").n_unique().alias("distinct_matches"),
            pl.col("dedup_score").min().alias("min_score"),
        )
        .sort("dedup_kind")
    )


def proof_rows(candidates: pl.DataFrame) -> pl.DataFrame:
    """One row per (candidate, prover) that was sent to the provers: role, model, proved, success_at, reason."""
    return (
        candidates.select("candidate_id", "domain", "proofs")
        .explode("proofs")
        .drop_nulls("proofs")
        .unnest("proofs")
        .select("candidate_id", "domain", "role", "model", "proved", "success_at", "reason", "attempts")
    )


def provers_of(candidates: pl.DataFrame) -> list[str]:
    """The prover roles that appear in the table, sorted."""
    return sorted(proof_rows(candidates)["role"].unique().to_list())


def success_at(candidates: pl.DataFrame, max_repairs: int, preferred_domains: Sequence[str]) -> pl.DataFrame:
    """The paper's Table 3: for each prover and for their union, per domain (and `all`), the number of statements
    sent to the provers (`attempted`) and, for t = 0..max_repairs, how many were proved within t repairs
    (`solved_at_t`) and that as a percentage of `attempted` (`success_at_t`)."""
    proofs = proof_rows(candidates).select("candidate_id", "domain", pl.col("role").alias("prover"), "success_at")
    union = (
        candidates.filter(pl.col("proofs").list.len() > 0)
        .select("candidate_id", "domain", pl.lit(UNION).alias("prover"), "success_at")
        .with_columns(pl.col("success_at").cast(proofs.schema["success_at"]))
    )
    rows = with_all(pl.concat([proofs, union]), "domain")
    grouped = rows.group_by("prover", "domain").agg(
        pl.len().alias("attempted"),
        *[(pl.col("success_at") <= t).fill_null(False).sum().alias(f"solved_at_{t}") for t in range(max_repairs + 1)],
    )
    grouped = grouped.with_columns(
        percent(f"solved_at_{t}", "attempted").alias(f"success_at_{t}") for t in range(max_repairs + 1)
    )
    order = domain_order(candidates["domain"].unique().to_list(), preferred_domains)
    grouped = ordered(grouped, "domain", order)
    provers = [*provers_of(candidates), UNION]
    return ordered(grouped, "prover", provers)


def overlap(candidates: pl.DataFrame) -> pl.DataFrame:
    """Which prover solves what the others miss: for each prover, how many it proved, how many only it proved,
    and one column per prover `b` with how many it proved that `b` did not. Its own column is null: a prover
    cannot miss what it proved, and its total is already in `proved`."""
    provers = provers_of(candidates)
    solved = {
        prover: set(
            candidates.filter(pl.col("proved_by").list.contains(prover))["candidate_id"].to_list()
        )
        for prover in provers
    }
    rows = []
    for prover in provers:
        others = set().union(*(solved[other] for other in provers if other != prover))
        row = {"prover": prover, "proved": len(solved[prover]), "only_this": len(solved[prover] - others)}
        row.update({f"not_by_{other}": len(solved[prover] - solved[other]) if other != prover else None
                    for other in provers})
        rows.append(row)
    schema = {"prover": pl.String, "proved": pl.Int64, "only_this": pl.Int64}
    schema.update({f"not_by_{other}": pl.Int64 for other in provers})
    return pl.DataFrame(rows, schema=schema)


def llm_calls(candidates: pl.DataFrame, discoveries: pl.DataFrame | None) -> pl.DataFrame:
    """Every LLM call of the run, one row each (stage, model, attempt, tokens, latency, error kind, finish reason):
    the discover calls from the discoveries table, the others from the candidates. Tables written before calls
    kept their finish reason give it as null."""
    frames = [candidates.select("llm_calls")]
    if discoveries is not None:
        frames.append(discoveries.select("llm_calls"))
    calls = pl.concat(frames, how="vertical_relaxed").explode("llm_calls").drop_nulls("llm_calls").unnest("llm_calls")
    if "finish_reason" not in calls.columns:
        calls = calls.with_columns(pl.lit(None, pl.String).alias("finish_reason"))
    return calls


def replays(candidates: pl.DataFrame) -> int:
    """How many accepted proofs were checked again in a fresh Lean (`verify.replay`): each is one of the row's
    `lean_checks` that no stage's history holds, recorded on its `proofs` entry (`replay` not null)."""
    count = candidates.select(pl.col("proofs").explode().struct.field("replay").is_not_null().sum()).item()
    return int(count or 0)


def lean_checks_by_stage(candidates: pl.DataFrame) -> dict[str, int]:
    """Lean checks per stage, read off the histories: one per formalize attempt with code, one per trivial
    verdict, one per proof attempt with code."""
    formalize = candidates.select(
        pl.col("formalize_attempts").explode().struct.field("code").is_not_null().sum()
    ).item()
    trivial = candidates.select(pl.col("trivial").is_not_null().sum()).item()
    prove = proof_rows(candidates).select(pl.col("attempts").explode().struct.field("code").is_not_null().sum()).item()
    return {"formalize": int(formalize or 0), "trivial": int(trivial or 0), "prove": int(prove or 0)}


def cost_by_stage(candidates: pl.DataFrame, discoveries: pl.DataFrame | None, stages: Sequence[Stage]
                  ) -> pl.DataFrame:
    """Per stage of `stages` (the run's pipeline) that calls an LLM or checks Lean: LLM calls, failed calls, answers cut
    at their `max_tokens` (`cut_calls`), prompt and completion tokens, LLM seconds (sum of latencies) and Lean checks;
    then the replays as a row of their own, and, when some rows ended `error_infra` with checks no history kept, those
    checks too: so the rows' Lean checks add up to the run's total. The Lean seconds of a run are only known per
    candidate, so they are in `totals`, not here."""
    calls = llm_calls(candidates, discoveries)
    per_stage = calls.group_by("stage").agg(
        pl.len().alias("llm_calls"),
        pl.col("error_kind").is_not_null().sum().alias("failed_calls"),
        (pl.col("finish_reason") == CUT_FINISH_REASON).sum().alias("cut_calls"),
        pl.col("prompt_tokens").fill_null(0).sum().alias("prompt_tokens"),
        pl.col("completion_tokens").fill_null(0).sum().alias("completion_tokens"),
        pl.col("latency_s").fill_null(0.0).sum().alias("llm_seconds"),
    )
    checks = {**lean_checks_by_stage(candidates), REPLAY: replays(candidates)}
    unrecorded = int(candidates["lean_checks"].fill_null(0).sum()) - sum(checks.values())
    if unrecorded:
        checks[UNRECORDED] = unrecorded
    called = per_stage["stage"].to_list()
    costly = [stage.name for stage in stages if (stage.calls_llm or stage.checks_lean)
              and (not stage.optional or stage.name in checks or stage.name in called)]
    names = [*costly, *(name for name in checks if name not in costly)]
    base = pl.DataFrame({"stage": names, "lean_checks": [checks.get(stage, 0) for stage in names]})
    joined = base.join(per_stage, on="stage", how="left", maintain_order="left")
    filled = joined.with_columns(
        pl.col(name).fill_null(0)
        for name in ("llm_calls", "failed_calls", "cut_calls", "prompt_tokens", "completion_tokens")
    ).with_columns(pl.col("llm_seconds").fill_null(0.0))
    return filled.select("stage", "llm_calls", "failed_calls", "cut_calls", "prompt_tokens", "completion_tokens",
                         "llm_seconds", "lean_checks")


def stage_rows(cost: pl.DataFrame) -> pl.DataFrame:
    """The rows of the cost table that are pipeline stages: what has LLM seconds to show (a replay calls no LLM)."""
    return cost.filter(~pl.col("stage").is_in([REPLAY, UNRECORDED]))


def totals(candidates: pl.DataFrame, cost: pl.DataFrame) -> dict[str, float | int | None]:
    """Whole-run totals and their cost per proved lemma (None when nothing was proved)."""
    proved = candidates.filter(pl.col("status") == PROVED).height
    tokens = int(cost["prompt_tokens"].sum()) + int(cost["completion_tokens"].sum())
    lean_seconds = float(candidates["lean_seconds"].fill_null(0.0).sum())
    lean_checks = int(candidates["lean_checks"].fill_null(0).sum())
    llm_seconds = float(cost["llm_seconds"].sum())
    calls = int(cost["llm_calls"].sum())

    def per(value: float) -> float | None:
        return value / proved if proved else None

    return {
        "candidates": candidates.height,
        "proved": proved,
        "tokens": tokens,
        "llm_calls": calls,
        "llm_seconds": llm_seconds,
        "lean_checks": lean_checks,
        "lean_seconds": lean_seconds,
        "tokens_per_proved": per(tokens),
        "llm_calls_per_proved": per(calls),
        "lean_seconds_per_proved": per(lean_seconds),
        "lean_checks_per_proved": per(lean_checks),
    }


def reason_class(text: str | None) -> str:
    """A reason or diagnostic reduced to its kind: first line, quoted names and numbers blanked, so that
    `unknown identifier 'foo'` and `unknown identifier 'bar'` count as one class."""
    lines = (text or "").strip().splitlines()
    blanked = _NUMBER.sub("N", _QUOTED.sub("…", lines[0])) if lines else ""
    return " ".join(blanked.split()) or "(none)"


def final_reason_class(text: str | None) -> str:
    """The kind of a candidate's final reason: the part before its first `: ` (`restates an existing
    declaration: Foo.bar has ...` -> `restates an existing declaration`), whose details vary per candidate."""
    return reason_class((text or "").split(": ", 1)[0])


def prover_failure_classes(text: str | None) -> list[str]:
    """The classes in a failed prover's reason (`attempt N: STATUS: reason; reason`): `STATUS: reason class` each,
    so refusals, statement drift and Lean errors of the last attempt are counted apart."""
    body = _ATTEMPT_PREFIX.sub("", (text or "").strip())
    status, _, reasons = body.partition(": ")
    parts = [part for part in reasons.split("; ") if part.strip()]
    return [f"{status}: {reason_class(part)}" for part in parts] or [reason_class(status)]


def _count_classes(classes: list[str], label: str) -> pl.DataFrame:
    frame = pl.DataFrame({"class": classes}, schema={"class": pl.String})
    return frame.group_by("class").len("count").with_columns(pl.lit(label).alias("where"))


def rejection_reasons(candidates: pl.DataFrame, top: int) -> pl.DataFrame:
    """Why candidates stopped, most frequent first (at most `top` classes per place): the final reason of every
    rejected or unfinished candidate, what each failed prover's last attempt was refused or failed for (refusals,
    statement drift, Lean errors), and the Lean error classes in the formalize and prove histories."""
    frames = [
        _count_classes([final_reason_class(reason) for reason in
                        candidates.filter(pl.col("status") == status)["reason"].to_list()], f"final: {status}")
        for status in (REJECTED_BY_JUDGE, NOT_COMPILABLE, ERROR_INFRA)
    ]
    failed = proof_rows(candidates).filter(~pl.col("proved"))
    failure_classes = [cls for reason in failed["reason"].to_list() for cls in prover_failure_classes(reason)]
    frames.append(_count_classes(failure_classes, "failed proof: last attempt"))
    formalize_errors = _error_messages(candidates.select(pl.col("formalize_attempts").alias("attempts")))
    frames.append(_count_classes([reason_class(m) for m in formalize_errors], "Lean errors: formalize"))
    prove_errors = _error_messages(proof_rows(candidates).select("attempts"))
    frames.append(_count_classes([reason_class(m) for m in prove_errors], "Lean errors: prove"))
    table = pl.concat([frame.select("where", "class", "count").with_columns(pl.lit(place).alias("place"))
                       for place, frame in enumerate(frames)])
    return (
        table.sort(["place", "count", "class"], descending=[False, True, False])
        .group_by("place", maintain_order=True)
        .head(top)
        .select("where", "class", "count")
    )


def _error_messages(attempts: pl.DataFrame) -> list[str]:
    """Messages of severity `error` in a column of attempt histories."""
    diagnostics = (
        attempts.explode("attempts")
        .drop_nulls("attempts")
        .select(pl.col("attempts").struct.field("diagnostics"))
        .explode("diagnostics")
        .drop_nulls("diagnostics")
        .unnest("diagnostics")
    )
    if diagnostics.is_empty():
        return []
    return diagnostics.filter(pl.col("severity") == "error")["message"].to_list()


def contributions_by_file(contributions: pl.DataFrame) -> pl.DataFrame:
    """Per Mathlib file, what `contribute` would offer: lemmas looked at, offered, renamed (by the LLM or the
    checker) and given a closing tactic for proof, then a total row."""
    per_file = (
        contributions.group_by("file", maintain_order=True)
        .agg(
            pl.len().alias("lemmas"),
            (pl.col("status") == "offered").sum().alias("offered"),
            (pl.col("name_source").is_in(["llm", "checker"])).sum().alias("renamed"),
            pl.col("proof_tactic").is_not_null().sum().alias("shortened"),
        )
        .sort("file")
    )
    total = per_file.select(pl.lit("all").alias("file"), pl.all().exclude("file").sum())
    return pl.concat([per_file, total.cast(per_file.schema)])
