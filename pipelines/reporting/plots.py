"""The report's figures, drawn with matplotlib from the data frames of `pipelines.reporting.stats` (and of
`pipelines.reporting.formalization_stats` for an autoformalize run).

Each function returns a `Figure` (no pyplot state, safe anywhere) so the report saves it as PNG, the
notebook shows it, and a test reads back its bars. A figure of a simulated run carries the label
given, in its title and across the plot, so it cannot be mistaken for a result once copied elsewhere.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import cast

import polars as pl
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from pipelines.reporting.stats import ALL, stage_rows

FUNNEL_SERIES = (("proposed", "proposed"), ("duplicate", "duplicate (dedup)"), ("contaminated", "contaminated"),
                 ("judged_correct", "judged correct"),
                 ("compilable", "compilable"), ("trivial", "trivial"), ("proved", "proved"))
WATERMARK_ALPHA = 0.25
BAR_GROUP_WIDTH = 0.8
LEAN_SECONDS_LABEL = "Lean checks and replays (all stages)"


def _figure(size: Sequence[float], title: str, label: str | None) -> Figure:
    width, height = size
    figure = Figure(figsize=(width, height), layout="constrained")
    figure.suptitle(f"{title}\n{label}" if label else title)
    if label:
        figure.text(0.5, 0.5, label, ha="center", va="center", rotation=20, alpha=WATERMARK_ALPHA, color="red",
                    fontsize="x-large", wrap=True)
    return figure


def _grouped_bars(axes: Axes, groups: Sequence[str], series: Mapping[str, Sequence[float]]) -> None:
    """One bar per (group, series), series side by side inside each group; each series is one container."""
    width = BAR_GROUP_WIDTH / max(len(series), 1)
    for index, (name, values) in enumerate(series.items()):
        offset = (index - (len(series) - 1) / 2) * width
        axes.bar([g + offset for g in range(len(groups))], values, width, label=name)
    axes.set_xticks(range(len(groups)), list(groups))
    axes.legend(fontsize="small")


def funnel_figure(funnel: pl.DataFrame, size: Sequence[float], label: str | None) -> Figure:
    """Candidates at each step of the funnel, per domain (and all): the paper's Table 1 as bars."""
    figure = _figure(size, "Funnel per domain", label)
    axes = figure.add_subplot()
    series = {name: [v or 0 for v in funnel[column].to_list()] for column, name in FUNNEL_SERIES
              if funnel[column].null_count() < funnel.height}
    _grouped_bars(axes, funnel["domain"].to_list(), series)
    axes.set_ylabel("candidates")
    return figure


def success_figure(success: pl.DataFrame, max_repairs: int, size: Sequence[float], label: str | None) -> Figure:
    """Success@t (% of the statements sent to the provers), one panel per domain, bars per prover and union."""
    figure = _figure(size, "Success@t per prover (union = any prover)", label)
    domains = list(dict.fromkeys(success["domain"].to_list()))
    for index, domain in enumerate(domains, start=1):
        axes = figure.add_subplot(1, len(domains), index)
        rows = success.filter(pl.col("domain") == domain)
        series = {row["prover"]: [row[f"success_at_{t}"] or 0.0 for t in range(max_repairs + 1)]
                  for row in rows.iter_rows(named=True)}
        _grouped_bars(axes, [f"@{t}" for t in range(max_repairs + 1)], series)
        attempted = cast(int | None, rows["attempted"].max()) if rows.height else 0  # an integer column
        axes.set_title(f"{domain} (n={attempted})" if domain != ALL else f"all domains (n={attempted})")
        axes.set_ylim(0, 100)
        axes.set_ylabel("% proved")
    return figure


def overlap_figure(overlap: pl.DataFrame, size: Sequence[float], label: str | None) -> Figure:
    """Cell (a, b): statements prover a proved that prover b did not. The diagonal is left blank (NaN, which
    matplotlib masks): a prover cannot miss what it proved, so a number there would not be what the title says."""
    figure = _figure(size, "Proved by row prover, not by column prover", label)
    axes = figure.add_subplot()
    provers = overlap["prover"].to_list()
    matrix = [[row[f"not_by_{other}"] for other in provers] for row in overlap.iter_rows(named=True)]
    shaded = [[math.nan if value is None else value for value in values] for values in matrix]
    axes.imshow(shaded or [[math.nan]], cmap="Blues", vmin=0)
    for i, values in enumerate(matrix):
        for j, value in enumerate(values):
            if value is not None:
                axes.text(j, i, str(value), ha="center", va="center", bbox={"facecolor": "white"})
    axes.set_xticks(range(len(provers)), provers)
    axes.set_yticks(range(len(provers)), provers)
    return figure


def cost_figure(cost: pl.DataFrame, size: Sequence[float], label: str | None) -> Figure:
    """Tokens per stage (prompt and completion stacked) and Lean checks per row of the cost table: the stages,
    then the replays (and unfinished rows' checks), so the bars add up to the run's checks."""
    figure = _figure(size, "Cost per stage", label)
    tokens, checks = figure.subplots(1, 2)
    llm = stage_rows(cost)
    stages = llm["stage"].to_list()
    tokens.bar(stages, llm["prompt_tokens"].to_list(), label="prompt")
    tokens.bar(stages, llm["completion_tokens"].to_list(), bottom=llm["prompt_tokens"].to_list(), label="completion")
    tokens.set_ylabel("tokens")
    tokens.legend(fontsize="small")
    checks.bar(cost["stage"].to_list(), cost["lean_checks"].to_list(), color="tab:green")
    checks.set_ylabel("Lean checks")
    return figure


def time_figure(cost: pl.DataFrame, lean_seconds: float, size: Sequence[float], label: str | None) -> Figure:
    """LLM seconds per stage (sum of call latencies) and Lean seconds of the whole run (all checks and replays)."""
    figure = _figure(size, "Time per stage", label)
    axes = figure.add_subplot()
    llm = stage_rows(cost)
    names = [*llm["stage"].to_list(), LEAN_SECONDS_LABEL]
    axes.bar(names, [*llm["llm_seconds"].to_list(), lean_seconds],
             color=["tab:blue"] * llm.height + ["tab:green"])
    axes.set_ylabel("seconds (summed over concurrent work)")
    return figure


def rejections_figure(reasons: pl.DataFrame, size: Sequence[float], label: str | None) -> Figure:
    """The most frequent rejection reasons, one horizontal bar each, labelled with where they occur."""
    figure = _figure(size, "Why candidates and proofs failed", label)
    axes = figure.add_subplot()
    ordered = reasons.sort("count")
    axes.barh([f"{row['where']} | {row['class']}" for row in ordered.iter_rows(named=True)], ordered["count"].to_list())
    axes.tick_params(axis="y", labelsize="x-small")
    axes.set_xlabel("count")
    return figure


def accuracy_figure(accuracy: pl.DataFrame, size: Sequence[float], label: str | None) -> Figure:
    """Compile rate and final accuracy (compiled and faithful) per source and overall, % of the valid rows."""
    figure = _figure(size, "Compile rate and final accuracy per source", label)
    axes = figure.add_subplot()
    series = {name: [v or 0.0 for v in accuracy[column].to_list()]
              for column, name in (("compile_rate", "compiled"), ("final_accuracy", "compiled and faithful"))}
    _grouped_bars(axes, accuracy["source"].to_list(), series)
    axes.set_ylim(0, 100)
    axes.set_ylabel("% of valid rows")
    return figure


def score_histogram_figure(histogram: pl.DataFrame, alpha: float | None, size: Sequence[float], label: str | None
                           ) -> Figure:
    """The faithfulness scores as counted per bin, with the run's threshold (alpha) marked when known."""
    figure = _figure(size, "Faithfulness scores", label)
    axes = figure.add_subplot()
    starts, ends = histogram["bin_start"].to_list(), histogram["bin_end"].to_list()
    axes.bar(starts, histogram["count"].to_list(), [end - start for start, end in zip(starts, ends)], align="edge",
             edgecolor="white")
    if alpha is not None:
        axes.axvline(alpha, color="tab:red", linestyle="--", label=f"alpha = {alpha:g}")
        axes.legend(fontsize="small")
    axes.set_xlim(0, 1)
    axes.yaxis.set_major_locator(MaxNLocator(integer=True))
    axes.set_xlabel("faithfulness score")
    axes.set_ylabel("rows")
    return figure


def sr_at_k_figure(curve: pl.DataFrame, size: Sequence[float], label: str | None) -> Figure:
    """SR@K against K: the share of the agent's problems made faithful within K tool calls."""
    figure = _figure(size, "SR@K: problems made faithful within K tool calls", label)
    axes = figure.add_subplot()
    axes.plot(curve["k"].to_list(), [value or 0.0 for value in curve["sr"].to_list()], marker="o")
    axes.set_xticks(curve["k"].to_list())
    axes.set_ylim(0, 100)
    axes.set_xlabel("K (tool calls)")
    axes.set_ylabel("% of the agent's valid rows")
    return figure
