"""`python -m pipelines.report run_dir=DIR`: a run's Markdown report, PNG plots and CSV tables, under DIR/report/.

What a researcher needs in the morning, laid out like the MathlibLemma paper: the funnel per domain
(Table 1), Success@t per prover and domain with the union over provers (Table 3) and their overlap,
the token and Lean cost per stage and per proved lemma, time per stage, and why candidates failed.
Every number comes from the candidates table through `pipelines.reporting.stats`; a simulated run says so at the
top and bottom of the page, in every section title and on every plot.

An autoformalize run (a formalizations table, no candidates) gets its own page, laid out the same way:
outcomes, compile rate and final accuracy per source, LLM calls per problem, agreement with the reference
statements and the faithfulness scores, from `pipelines.reporting.formalization_stats`.
"""

from __future__ import annotations

from lean_pool.command_line import hold_stops

if __name__ == "__main__":
    hold_stops()  # the imports below take seconds: a Ctrl-C or SIGTERM meanwhile stops the job in one line

import io
import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import polars as pl
from matplotlib.figure import Figure
from omegaconf import DictConfig

from operators.rows.candidates import CANDIDATE, MATHLIB
from operators.rows.contributions import STATUSES as CONTRIBUTION_STATUSES
from operators.storage import join
from pipelines.reporting import formalization_stats as fstats
from pipelines.reporting import plots, stats
from pipelines.reporting.markdown import NONE, count_pct, markdown_table, number, success_markdown
from pipelines.reporting.run_data import FormalizationRun, RunData, RunNotFound, load_any
from pipelines.reporting.summary import Closing, closing_lines, rows_by_status
from pipelines.runtime.cli import compose_config, run_job
from pipelines.runtime.outputs import Output, run_output
from pipelines.runtime.run_dir import RunDir

# The job's name, as its output folder's marker says it.
JOB = "report"
REPORT_FILE = "report.md"
MIN_PROVERS_FOR_OVERLAP = 2


@dataclass(frozen=True)
class Report:
    """A rendered report: the Markdown page, the figures by file stem, the tables by file stem."""

    markdown: str
    figures: dict[str, Figure]
    tables: dict[str, pl.DataFrame]


def funnel_markdown(funnel: pl.DataFrame) -> str:
    """The paper's Table 1: seeds, proposed, judged correct, compilable, trivial, proved per domain, with the
    candidates dedup and decontaminate dropped before the judge."""
    rows = [
        [r["domain"], r["seeds"], r["proposed"], count_pct(r["duplicate"], r["duplicate_pct"]),
         count_pct(r["contaminated"], r["contaminated_pct"]),
         count_pct(r["judged_correct"], r["judged_correct_pct"]),
         count_pct(r["compilable"], r["compilable_pct"]), count_pct(r["unfaithful"], r["unfaithful_pct"]),
         count_pct(r["trivial"], r["trivial_pct"]),
         count_pct(r["proved"], r["proved_pct"]), r["error_infra"]]
        for r in funnel.iter_rows(named=True)
    ]
    headers = ["Domain", "Seeds", "Proposed", "Duplicate (dedup)", "Contaminated (decontaminate)", "Judged correct",
               "Compilable", "Unfaithful (of compilable)", "Trivial", "Proved", "Unfinished (error_infra)"]
    return markdown_table(headers, rows) + "\n\nPercentages are of the proposed candidates of the domain."


def origin_markdown(origins: pl.DataFrame) -> str:
    """Per round and origin: candidates, dropped by dedup, compilable, trivial, proved, LLM calls, proved per 100."""
    headers = ["round", "origin", "candidates", "duplicate", "compilable", "trivial", "proved", "LLM calls",
               "proved / 100 calls"]
    rows = [[r["round"], r["origin"], r["candidates"], r["duplicate"], r["compilable"], r["trivial"], r["proved"],
             r["llm_calls"], number(r["proved_per_100_calls"])] for r in origins.iter_rows(named=True)]
    return markdown_table(headers, rows)


def dedup_markdown(matches: pl.DataFrame, settings: str | None) -> str:
    """How many candidates dedup dropped and what they restate, or that dedup was off for this run."""
    if settings is None:
        return "Dedup was off: every candidate went to the judge (the paper's protocol)."
    config = json.loads(settings)
    where = f"index of Mathlib `{config['index_rev']}`" if "index_rev" in config else "no index: siblings only"
    kinds = {MATHLIB: "a Mathlib declaration", CANDIDATE: "an earlier candidate of the seed"}
    rows = [[kinds.get(r["dedup_kind"], r["dedup_kind"]), r["dropped"], r["distinct_matches"], f"{r['min_score']:.3f}"]
            for r in matches.iter_rows(named=True)]
    headers = ["Restates", "Dropped", "Distinct matches", "Lowest score"]
    table = markdown_table(headers, rows) if rows else "Nothing dropped."
    return f"Threshold {config['threshold']} on the cosine of the statements ({where}).\n\n{table}"


def has_overlap(overlap: pl.DataFrame) -> bool:
    """Overlap needs two provers: with fewer there is nothing one proved that another missed, so no plot."""
    return overlap.height >= MIN_PROVERS_FOR_OVERLAP


def overlap_markdown(overlap: pl.DataFrame) -> str:
    """Which prover solves what the others miss, or why there is nothing to compare."""
    provers = overlap["prover"].to_list()
    if not has_overlap(overlap):
        ran = f"one prover ran (`{provers[0]}`)" if provers else "no prover ran"
        return f"Only {ran}: no overlap to show."
    rows = [[r["prover"], r["proved"], r["only_this"], *[r[f"not_by_{p}"] for p in provers]]
            for r in overlap.iter_rows(named=True)]
    return (markdown_table(["Prover", "Proved", "Proved by no other", *[f"Not proved by {p}" for p in provers]], rows)
            + "\n\nA cell counts the statements the row's prover proved and the column's did not; a prover's own "
              "column is empty (its total is under Proved).")


def cost_markdown(cost: pl.DataFrame, total: Mapping[str, Any]) -> str:
    """Token and Lean cost per stage (with the answers cut at their `max_tokens`), then totals and cost per proved
    lemma."""
    rows = [[r["stage"], r["llm_calls"], r["failed_calls"], r["cut_calls"], r["prompt_tokens"], r["completion_tokens"],
             r["lean_checks"]] for r in cost.iter_rows(named=True)]
    table = markdown_table(["Stage", "LLM calls", "Failed calls", "Cut at max tokens", "Prompt tokens",
                            "Completion tokens", "Lean checks"], rows)
    summary = markdown_table(
        ["", "Whole run", "Per proved lemma"],
        [
            ["Tokens", total["tokens"], number(total["tokens_per_proved"])],
            ["LLM calls", total["llm_calls"], number(total["llm_calls_per_proved"])],
            ["Lean checks", total["lean_checks"], number(total["lean_checks_per_proved"])],
            ["Lean seconds", number(total["lean_seconds"]), number(total["lean_seconds_per_proved"])],
        ],
    )
    unrecorded = (f" `{stats.UNRECORDED}`: checks of rows that ended `error_infra` before their stage wrote "
                  "its history." if stats.UNRECORDED in cost["stage"].to_list() else "")
    return (f"{table}\n\n{summary}\n\nProved lemmas: {total['proved']} of {total['candidates']} candidates. "
            f"`{stats.REPLAY}`: each proof the pool accepted, checked again in a Lean process started for it alone "
            f"(`verify.replay`).{unrecorded} The Lean checks per row add up to the whole run's. "
            "Lean seconds are the checks' durations as the pool measured them; the table records them per "
            "candidate, not per stage.")


def time_markdown(cost: pl.DataFrame, total: Mapping[str, Any]) -> str:
    """LLM seconds per stage and the run's Lean seconds (replays included)."""
    rows = [[r["stage"], number(r["llm_seconds"])] for r in stats.stage_rows(cost).iter_rows(named=True)]
    rows.append([plots.LEAN_SECONDS_LABEL, number(total["lean_seconds"])])
    return (markdown_table(["Stage", "Seconds"], rows) + "\n\nLLM seconds are summed call latencies: calls run "
            "concurrently, so they add up to more than the wall time.")


def reasons_markdown(reasons: pl.DataFrame) -> str:
    """The rejection reason classes, grouped by where they occur."""
    if reasons.is_empty():
        return "Nothing failed."
    parts = []
    for (where,), group in reasons.group_by("where", maintain_order=True):
        parts.append(f"**{where}**\n\n" + markdown_table(["Class", "Count"], group.select("class", "count").rows()))
    return "\n\n".join(parts)


def _provenance(rows: pl.DataFrame) -> dict[str, Any]:
    """The provenance of the run's first row (the same on every row of one run); empty for no rows."""
    return rows["provenance"][0] if rows.height else {}


def provenance_lines(uri: str, manifest: Mapping[str, Any], rows: pl.DataFrame) -> list[str]:
    """Where the numbers come from: run id, backends, models, Lean toolchain and Mathlib revision, read off the
    manifest and the first row of the run's table (candidates or formalizations: both carry `provenance`)."""
    first = _provenance(rows)
    models = json.loads(first.get("models") or "{}") if first else {}
    return [
        f"- run directory: `{uri}`",
        f"- run id: `{manifest.get('run_id', first.get('run_id') if first else None)}`, "
        f"created {manifest.get('created_at', 'unknown')}",
        f"- LLM backend: {first.get('llm_backend')}; models: "
        + (", ".join(f"{role}=`{model}`" for role, model in sorted(models.items())) or NONE),
        f"- Lean backend: {first.get('lean_backend')}; toolchain `{first.get('toolchain')}`; "
        f"Mathlib `{first.get('mathlib_rev')}`",
        f"- project version: {first.get('project_version')}",
    ]


def _sim_marks(simulated: bool, cfg: Mapping[str, Any]) -> tuple[str | None, str, list[str]]:
    """For a simulated run: the label for the plots, the tag for every heading and the banner lines for the top
    and bottom of the page; nothing for a real run."""
    if not simulated:
        return None, "", []
    label = cfg["sim_label"]
    return label, " (simulated run)", [f"> **{label}**", ""]


def contributions_section(contributions: pl.DataFrame | None, tag: str) -> list[str]:
    """What `contribute` would offer to Mathlib from this run (nothing before it ran): lemmas by final status, then
    per file."""
    if contributions is None:
        return []
    statuses = rows_by_status(contributions["status"].to_list(), CONTRIBUTION_STATUSES)
    per_file = stats.contributions_by_file(contributions)
    return [f"## What a contribution would offer{tag}", "", "From `folklore contribute`: each lemma's final status "
            "(`contributions/`), then per Mathlib file.", "",
            markdown_table(["status", "lemmas"], list(statuses.items())), "",
            markdown_table(per_file.columns, per_file.rows()), ""]


def render(run: RunData, cfg: Mapping[str, Any]) -> Report:
    """The whole report of a run, without writing anything."""
    label, tag, banner = _sim_marks(run.simulated, cfg)
    size, domains, top = cfg["plots"]["size"], cfg["domains"], int(cfg["top_reasons"])
    max_repairs = run.max_repairs()
    c = run.candidates
    funnel = stats.funnel_by_domain(c, domains)
    matches = stats.dedup_matches(c)
    origins = stats.funnel_by_origin(c, run.discoveries)
    success = stats.success_at(c, max_repairs, domains)
    overlap = stats.overlap(c)
    cost = stats.cost_by_stage(c, run.discoveries, run.stages)
    total = stats.totals(c, cost)
    reasons = stats.rejection_reasons(c, top)
    sections = [
        f"# Folklore run report{tag}", "", *banner, *provenance_lines(run.uri, run.manifest, c), "",
        f"## Funnel per domain{tag}", "", funnel_markdown(funnel), "", "![funnel](funnel.png)", "",
        f"### Per round and origin{tag}", "", origin_markdown(origins), "",
        f"### Dedup{tag}", "", dedup_markdown(matches, _provenance(c).get("dedup")), "",
        f"## Success@t per prover and domain{tag}", "", success_markdown(success, max_repairs), "",
        "![Success@t](success_at.png)", "",
        f"### Overlap between provers{tag}", "", overlap_markdown(overlap), "",
        *(["![overlap](overlap.png)", ""] if has_overlap(overlap) else []),
        f"## Cost per stage and per proved lemma{tag}", "", cost_markdown(cost, total), "", "![cost](cost.png)", "",
        f"## Time per stage{tag}", "", time_markdown(cost, total), "", "![time](time.png)", "",
        f"## Rejection reasons{tag}", "", reasons_markdown(reasons), "", "![rejections](rejections.png)", "",
        *contributions_section(run.contributions, tag),
        *banner,
    ]
    overall = reasons.sort("count", descending=True).head(top)
    figures = {
        "funnel": plots.funnel_figure(funnel, size, label),
        "success_at": plots.success_figure(success, max_repairs, size, label),
        "cost": plots.cost_figure(cost, size, label),
        "time": plots.time_figure(cost, float(total["lean_seconds"] or 0.0), size, label),
        "rejections": plots.rejections_figure(overall, size, label),
    }
    if has_overlap(overlap):
        figures["overlap"] = plots.overlap_figure(overlap, size, label)
    tables = {"funnel": funnel, "origins": origins, "dedup": matches, "success_at": success, "overlap": overlap,
              "cost": cost, "reasons": reasons}
    if run.contributions is not None:
        tables["contributions"] = stats.contributions_by_file(run.contributions)
    return Report("\n".join(sections), figures, tables)


def status_markdown(statuses: pl.DataFrame) -> str:
    """Rows per final status, every status listed so a zero shows."""
    rows = [[r["status"], count_pct(r["count"], r["pct"])] for r in statuses.iter_rows(named=True)]
    return markdown_table(["Status", "Rows"], rows) + f"\n\nPercentages are of all {statuses['count'].sum()} rows."


def accuracy_markdown(accuracy: pl.DataFrame) -> str:
    """Compile rate and final accuracy per source and overall, with the bad input they leave out."""
    rows = [[r["source"], r["rows"], r["bad_input"], r["valid"], count_pct(r["compiled"], r["compile_rate"]),
             count_pct(r["faithful"], r["final_accuracy"])] for r in accuracy.iter_rows(named=True)]
    table = markdown_table(["Source", "Rows", "Bad input", "Valid", "Compiled (compile rate)",
                            "Compiled and faithful (final accuracy)"], rows)
    return (table + "\n\nRates are of the valid rows (bad input left out); final accuracy counts a statement that "
            "compiled and was judged faithful (Aria's metric).")


def calls_markdown(calls: pl.DataFrame) -> str:
    """LLM calls per problem over the valid rows, per stage and over all stages."""
    rows = [[r["stage"], r["calls"], number(r["mean"]), number(r["median"]), r["max"]]
            for r in calls.iter_rows(named=True)]
    return (markdown_table(["Stage", "Calls", "Mean per problem", "Median", "Max"], rows)
            + "\n\nOver the valid rows; a problem without a call of a stage counts as zero for it.")


def agreement_markdown(agreement: pl.DataFrame, matrix: pl.DataFrame) -> str:
    """How many compiled statements are the reference's, and the faithfulness verdict against that match."""
    a = agreement.row(0, named=True)
    if not a["compared"]:
        return f"{a['with_reference']} rows have a reference, none with a compiled statement: nothing to compare."
    table = markdown_table(
        ["", "Matches the reference", "Differs from the reference"],
        [["faithful" if r["faithful"] else "unfaithful", r["matches_reference"], r["differs_from_reference"]]
         for r in matrix.iter_rows(named=True)],
    )
    return (f"{count_pct(a['matching'], a['match_pct'])} of the {a['compared']} compiled statements with a reference "
            f"({a['with_reference']} rows have one) are the reference's.\n\n{table}\n\nThe faithfulness check "
            f"agrees with the reference on {count_pct(a['agree'], a['agree_pct'])} of the {a['judged']} it judged.")


def histogram_markdown(histogram: pl.DataFrame, alpha: float | None) -> str:
    """Rows per bin of the faithfulness score, and the threshold the run judged with."""
    last = histogram.height - 1
    rows = [[f"[{r['bin_start']:g}, {r['bin_end']:g}{']' if index == last else ')'}", r["count"]]
            for index, r in enumerate(histogram.iter_rows(named=True))]
    threshold = f"alpha = {alpha:g}" if alpha is not None else "not recorded in the manifest"
    return (markdown_table(["Score", "Rows"], rows) + f"\n\n{histogram['count'].sum()} rows have a score; "
            f"the run's threshold: {threshold}.")


def modes_markdown(modes: pl.DataFrame) -> str:
    """Compile rate, final accuracy and cost per autoformalization mode."""
    rows = [[r["mode"], r["valid"], count_pct(r["compiled"], r["compile_rate"]),
             count_pct(r["faithful"], r["final_accuracy"]), number(r["llm_calls_per_problem"]),
             number(r["tool_calls_per_problem"])] for r in modes.iter_rows(named=True)]
    return markdown_table(["Mode", "Valid", "Compiled", "Compiled and faithful", "LLM calls per problem",
                           "Tool calls per problem"], rows)


def sr_markdown(curve: pl.DataFrame) -> str:
    """SR@K per K over the agent's valid rows."""
    rows = [[r["k"], count_pct(r["solved"], r["sr"])] for r in curve.iter_rows(named=True)]
    problems = curve["problems"][0] if curve.height else 0
    return (markdown_table(["K", "Made faithful within K tool calls (SR@K)"], rows)
            + f"\n\nOver the {problems} valid rows of mode=agent; a row counts once a compile passed and its "
              "statement was judged faithful, at the tool call of that compile.")


def render_formalizations(run: FormalizationRun, cfg: Mapping[str, Any]) -> Report:
    """The whole report of an autoformalize run, without writing anything."""
    label, tag, banner = _sim_marks(run.simulated, cfg)
    size, f = cfg["plots"]["size"], run.formalizations
    statuses = fstats.status_counts(f)
    accuracy = fstats.accuracy_by_source(f)
    calls = fstats.calls_per_problem(f)
    agreement = fstats.reference_agreement(f)
    matrix = fstats.faithful_vs_reference(f)
    histogram = fstats.score_histogram(f, int(cfg["formalizations"]["score_bins"]))
    modes = fstats.by_mode(f)
    curve = fstats.sr_at_k(f, [int(k) for k in cfg["formalizations"]["sr_at_k"]])
    agent = [f"## SR@K of the agent{tag}", "", sr_markdown(curve), "", "![SR@K](sr_at_k.png)", ""] \
        if curve["problems"].sum() else []
    sections = [
        f"# Folklore autoformalization report{tag}", "", *banner, *provenance_lines(run.uri, run.manifest, f), "",
        f"## Outcomes{tag}", "", status_markdown(statuses), "",
        f"## Compile rate and final accuracy per source{tag}", "", accuracy_markdown(accuracy), "",
        "![accuracy](accuracy.png)", "",
        f"## Modes{tag}", "", modes_markdown(modes), "",
        *agent,
        f"## LLM calls per problem{tag}", "", calls_markdown(calls), "",
        f"## Agreement with the reference{tag}", "", agreement_markdown(agreement, matrix), "",
        f"## Faithfulness scores{tag}", "", histogram_markdown(histogram, run.alpha), "",
        "![faithfulness scores](faithfulness_scores.png)", "",
        *banner,
    ]
    figures = {
        "accuracy": plots.accuracy_figure(accuracy, size, label),
        "faithfulness_scores": plots.score_histogram_figure(histogram, run.alpha, size, label),
    }
    tables = {"statuses": statuses, "accuracy": accuracy, "llm_calls": calls, "reference_agreement": agreement,
              "faithful_vs_reference": matrix, "faithfulness_scores": histogram, "modes": modes}
    if agent:
        figures["sr_at_k"] = plots.sr_at_k_figure(curve, size, label)
        tables["sr_at_k"] = curve
    return Report("\n".join(sections), figures, tables)


def write(output: Output, report: Report, dpi: int) -> str:
    """Write report.md, the PNGs and tables/*.csv into the report's own folder (`output`, checked as its own), in place
    of an earlier report (a plot this report does not draw must not stay beside it); returns the report's location."""
    output.empty()
    output.filesystem.create_dir(f"{output.path}/tables", recursive=True)

    def put(relative: str, data: bytes) -> None:
        with output.filesystem.open_output_stream(f"{output.path}/{relative}") as stream:
            stream.write(data)

    put(REPORT_FILE, report.markdown.encode())
    for name, figure in report.figures.items():
        buffer = io.BytesIO()
        figure.savefig(buffer, format="png", dpi=dpi)
        put(f"{name}.png", buffer.getvalue())
    for name, table in report.tables.items():
        put(f"tables/{name}.csv", table.write_csv().encode())
    return join(output.location, REPORT_FILE)


def main(argv: Sequence[str] | None = None) -> int:
    """Write the report of a run (mining, evaluate or autoformalize); exit 2 when there is no run to report on."""

    def run_report() -> None:
        cfg: DictConfig = compose_config("report", sys.argv[1:] if argv is None else argv)
        run = load_any(str(cfg.run_dir))
        output = run_output(RunDir(run.uri), "out_subdir", str(cfg.out_subdir), JOB)
        output.check_own()
        settings = {key: cfg[key] for key in ("sim_label", "domains", "top_reasons", "plots", "formalizations")}
        rendered = render(run, settings) if isinstance(run, RunData) else render_formalizations(run, settings)
        location = write(output, rendered, int(cfg.plots.dpi))
        what = f"{len(rendered.figures)} plots, {len(rendered.tables)} CSV tables beside it"
        print("\n".join(closing_lines(Closing(run.uri, {REPORT_FILE: (location, what)}, simulated=run.simulated))),
              flush=True)

    return run_job(run_report, (RunNotFound,),
                   interrupted="the report may be incomplete; run the same command again")


if __name__ == "__main__":
    sys.exit(main())
