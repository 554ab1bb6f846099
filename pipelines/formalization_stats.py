"""The numbers of an autoformalization run, computed from its formalizations table with polars.

Compile rate and final accuracy (compiled and faithful, Aria's metric) count every row with valid input,
so a statement the model refused or never got to compile counts against the run. Like `pipelines.reporting.stats`,
every function is pure, so a small hand-built table checks each figure.
"""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl

from operators.rows.formalizations import AGENT, BAD_INPUT, DIRECT, MODES, STATUSES
from pipelines.reporting.stats import ALL, domain_order, ordered, percent, with_all


def valid_rows(formalizations: pl.DataFrame) -> pl.DataFrame:
    """The rows whose input could be formalized at all: everything but `bad_input`, the denominator of every rate."""
    return formalizations.filter(pl.col("status") != BAD_INPUT)


def status_counts(formalizations: pl.DataFrame) -> pl.DataFrame:
    """Rows per status and their share of all rows: every final status, zeros included, then any other status
    found (a half-finished run's `pending`), so a missing outcome shows as a zero rather than as nothing."""
    found = formalizations.group_by("status").len("count")
    others = sorted(set(found["status"].drop_nulls().to_list()) - set(STATUSES))
    base = pl.DataFrame({"status": [*STATUSES, *others]}, schema={"status": pl.String})
    counts = base.join(found, on="status", how="left", maintain_order="left").with_columns(
        pl.col("count").fill_null(0), pl.lit(formalizations.height).alias("rows")
    )
    return counts.with_columns(percent("count", "rows").alias("pct")).select("status", "count", "pct")


def accuracy_by_source(formalizations: pl.DataFrame) -> pl.DataFrame:
    """Per source (and `all`): rows, bad input, valid rows, compiled statements and compiled-and-faithful ones,
    with the compile rate and the final accuracy as percentages of the valid rows."""
    compiled = pl.col("statement").is_not_null() & (pl.col("status") != BAD_INPUT)
    grouped = (
        with_all(formalizations.select("source", "status", "statement", "faithful"), "source")
        .group_by("source")
        .agg(
            pl.len().alias("rows"),
            (pl.col("status") == BAD_INPUT).sum().alias("bad_input"),
            (pl.col("status") != BAD_INPUT).sum().alias("valid"),
            compiled.sum().alias("compiled"),
            (compiled & pl.col("faithful").fill_null(False)).sum().alias("faithful"),
        )
        .with_columns(percent("compiled", "valid").alias("compile_rate"),
                      percent("faithful", "valid").alias("final_accuracy"))
    )
    return ordered(grouped, "source", domain_order(formalizations["source"].drop_nulls().unique().to_list(), []))


def calls_per_problem(formalizations: pl.DataFrame) -> pl.DataFrame:
    """LLM calls per valid row, per stage (and over all stages): mean, median and max, where a row that made no
    call of a stage counts as zero, so the stage means add up to the overall mean."""
    rows = valid_rows(formalizations).select("llm_calls").with_row_index("row")
    calls = rows.explode("llm_calls").drop_nulls("llm_calls").select(
        "row", pl.col("llm_calls").struct.field("stage").alias("stage")
    )
    stages = pl.DataFrame({"stage": calls["stage"].unique(maintain_order=True)}, schema={"stage": pl.String})
    per_row = (
        rows.select("row").join(stages, how="cross")
        .join(calls.group_by("row", "stage").len("calls"), on=["row", "stage"], how="left")
        .with_columns(pl.col("calls").fill_null(0))
    )
    overall = rows.select("row", pl.lit(ALL).alias("stage"), pl.col("llm_calls").list.len().alias("calls"))
    both = pl.concat([per_row.select("row", "stage", pl.col("calls").cast(pl.Int64)),
                      overall.with_columns(pl.col("calls").cast(pl.Int64))])
    summary = both.group_by("stage", maintain_order=True).agg(
        pl.col("calls").sum().alias("calls"),
        pl.col("calls").mean().alias("mean"),
        pl.col("calls").median().alias("median"),
        pl.col("calls").max().alias("max"),
    )
    return ordered(summary, "stage", stages["stage"].to_list())


def reference_agreement(formalizations: pl.DataFrame) -> pl.DataFrame:
    """Where a reference statement was given and a statement compiled: how many are the reference's
    (`matching`, `match_pct`), and, among those the faithfulness check also judged, how often its verdict
    agrees with the reference (`agree`, `agree_pct`)."""
    compared = formalizations.filter(pl.col("reference_match").is_not_null())
    judged = compared.filter(pl.col("faithful").is_not_null())
    counts = pl.DataFrame({
        "with_reference": [formalizations["reference"].is_not_null().sum()],
        "compared": [compared.height],
        "matching": [compared["reference_match"].sum()],
        "judged": [judged.height],
        "agree": [(judged["faithful"] == judged["reference_match"]).sum()],
    }, schema={name: pl.Int64 for name in ("with_reference", "compared", "matching", "judged", "agree")})
    return counts.with_columns(percent("matching", "compared").alias("match_pct"),
                               percent("agree", "judged").alias("agree_pct"))


def faithful_vs_reference(formalizations: pl.DataFrame) -> pl.DataFrame:
    """The 2x2 of the faithfulness verdict against the reference match, over the rows that have both: where the
    judge and the reference disagree is where one of them is wrong."""
    both = formalizations.filter(pl.col("faithful").is_not_null() & pl.col("reference_match").is_not_null())
    return pl.DataFrame({"faithful": [True, False]}).join(
        both.group_by("faithful").agg(
            pl.col("reference_match").sum().alias("matches_reference"),
            (~pl.col("reference_match")).sum().alias("differs_from_reference"),
        ),
        on="faithful", how="left", maintain_order="left",
    ).with_columns(pl.col("matches_reference", "differs_from_reference").fill_null(0).cast(pl.Int64))


def score_histogram(formalizations: pl.DataFrame, bins: int) -> pl.DataFrame:
    """Rows per bin of `faithfulness_score`: `bins` equal bins on [0, 1], the last one closed so a perfect score
    counts; rows without a score (never compiled, or not checked) are left out."""
    scores = formalizations.select(pl.col("faithfulness_score").drop_nulls().clip(0.0, 1.0))
    index = (pl.col("faithfulness_score") * bins).floor().cast(pl.Int64).clip(0, bins - 1)
    counts = scores.group_by(index.alias("bin")).len("count")
    return (
        pl.DataFrame({"bin": range(bins)}, schema={"bin": pl.Int64})
        .join(counts, on="bin", how="left", maintain_order="left")
        .select((pl.col("bin") / bins).alias("bin_start"), ((pl.col("bin") + 1) / bins).alias("bin_end"),
                pl.col("count").fill_null(0).cast(pl.Int64))
    )


def by_mode(formalizations: pl.DataFrame) -> pl.DataFrame:
    """Per mode that has rows (direct, got, agent): valid rows, compiled, compiled and faithful (with their rates),
    and the mean LLM calls and tool calls per valid row (tool calls: agent rows only, else null). Rows written
    before there were modes were direct."""
    valid = valid_rows(formalizations).with_columns(pl.col("mode").fill_null(DIRECT))
    grouped = valid.group_by("mode").agg(
        pl.len().alias("valid"),
        pl.col("statement").is_not_null().sum().alias("compiled"),
        (pl.col("statement").is_not_null() & pl.col("faithful").fill_null(False)).sum().alias("faithful"),
        pl.col("llm_calls").list.len().mean().alias("llm_calls_per_problem"),
        pl.col("tool_calls").cast(pl.Float64).mean().alias("tool_calls_per_problem"),
    ).with_columns(percent("compiled", "valid").alias("compile_rate"),
                   percent("faithful", "valid").alias("final_accuracy"))
    return ordered(grouped, "mode", list(MODES))


def sr_at_k(formalizations: pl.DataFrame, ks: Sequence[int]) -> pl.DataFrame:
    """ALA's SR@K: of the valid rows the agent worked on, how many were made faithful within K tool calls, and
    their share, for each K. A row still `error_infra` counts as not solved (resume the run first)."""
    agent = valid_rows(formalizations).filter(pl.col("mode") == AGENT)
    solved = agent.filter(pl.col("statement").is_not_null() & pl.col("faithful").fill_null(False))["tool_calls"]
    frame = pl.DataFrame({"k": list(ks), "problems": [agent.height] * len(ks),
                          "solved": [int((solved <= k).sum()) for k in ks]},
                         schema={"k": pl.Int64, "problems": pl.Int64, "solved": pl.Int64})
    return frame.with_columns(percent("solved", "problems").alias("sr"))
