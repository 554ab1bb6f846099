"""`python -m pipelines.plan [mine overrides] [plan.key=value ...]`: a capacity plan before an overnight mining run.

It reads the mining config with the overrides `pipelines.mine` takes and the seed files that run would mine, and
prints what the run will cost at the per-call costs of an earlier run (`plan.from_run=DIR`) or the assumed costs
(conf/plan.yaml): candidates, LLM calls and tokens per stage (the prompt tokens sent, and those the engines
compute under the endpoints' routing), Lean checks, GPU- and CPU-hours, RAM per node and wall time on the cluster of
`plan.cluster`. It starts nothing (no Ray, no LLM, no Lean), so it answers in seconds.
"""

from __future__ import annotations

from lean_pool.command_line import hold_stops

if __name__ == "__main__":
    hold_stops()  # the imports below take seconds: a Ctrl-C or SIGTERM meanwhile stops the job in one line

import sys
from collections.abc import Sequence

from pipelines.planning.capacity import lean_speeds
from pipelines.planning.capacity_plan import Plan, make_plan
from pipelines.reporting.durations import duration
from pipelines.reporting.run_data import RunNotFound
from pipelines.runtime.cli import run_job


def plan_lines(plan: Plan) -> list[str]:
    """The plan as the lines `python -m pipelines.plan` prints."""
    work, needs, cluster, shape = plan.work, plan.needs, plan.cluster, plan.shape
    gpu_nodes = f" and {cluster.gpu_nodes} GPU nodes x {cluster.gpus_per_gpu_node} GPUs" if cluster.gpu_nodes else ""
    lines = [
        f"seeds: {plan.seed_files} files under {plan.seeds_root}, {len(plan.seed_tokens)} fit the discover model "
        f"(about {sum(plan.seed_tokens):,} tokens); discover calls: {work.units:,} ({shape.samples_per_seed} per seed"
        f"{f' in each of {shape.rounds} rounds' if shape.rounds > 1 else ''})",
        *([plan.seeds_skipped] if plan.seeds_skipped else []),
        f"costs: {plan.costs.source}",
        f"candidates expected: {work.candidates:,.0f}" + (
            f" (sub-goals on, {shape.subgoal_levels} level(s): {plan.costs.subgoals_per_candidate:.2f} sub-goal "
            f"candidates per candidate)" if shape.subgoal_levels else ""),
        "rows per stage: " + ", ".join(f"{stage} {rows:,.0f}" for stage, rows in work.rows.items() if rows > 0),
        "LLM calls and tokens per call (prefill: the prompt tokens the engines compute, the others read from a "
        "replica's prefix cache under the endpoints' routing):",
        f"  {'call':<13}{'calls':>12}{'prompt_tokens':>16}{'prefill_tokens':>16}{'completion_tokens':>19}"
        f"{'llm_time':>12}",
    ]
    loads = {call: load for call, load in work.calls.items() if load.calls > 0}
    for call, load in loads.items():
        lines.append(f"  {call:<13}{load.calls:>12,.0f}{load.prompt_tokens:>16,.0f}{load.prefill_tokens:>16,.0f}"
                     f"{load.completion_tokens:>19,.0f}{duration(load.llm_seconds):>12}")
    lines.append(f"  {'all':<13}{sum(load.calls for load in loads.values()):>12,.0f}"
                 f"{sum(load.prompt_tokens for load in loads.values()):>16,.0f}"
                 f"{sum(load.prefill_tokens for load in loads.values()):>16,.0f}"
                 f"{sum(load.completion_tokens for load in loads.values()):>19,.0f}")
    checks = ", ".join(f"{stage} {count:,.0f}" for stage, count in work.checks.items())
    check_s, import_s = lean_speeds(shape, plan.costs, cluster)
    lines += [
        f"Lean checks: {work.lean_checks:,.0f} ({checks}, replays {work.replays:,.0f}) at "
        f"{check_s:.2f} s per check, {plan.costs.replay_s:.1f} s per replay",
        f"GPU-hours: {needs.gpu_hours:,.2f} at {cluster.prompt_tokens_per_s:,.0f} prefill and "
        f"{cluster.completion_tokens_per_s:,.0f} completion tokens/s per GPU",
        f"CPU-hours: {needs.cpu_hours:,.2f} (Lean checks, replays and header imports of {duration(import_s)})",
        f"RAM per node: {needs.ram_gb_per_node:,.1f} GB of {cluster.memory_gb_per_node:,.0f} (Lean REPLs and replay "
        f"slots x {shape.repl_memory_gb} GB + {cluster.node_overhead_gb} GB for Ray and the stages); "
        f"{needs.cpus_reserved_per_node:,.1f} of {cluster.cpus_per_node} CPUs reserved; a node holds up to "
        f"{needs.repls_that_fit_per_node} REPLs",
        f"wall time: {duration(needs.wall_s)} on {cluster.nodes} Lean nodes x {cluster.cpus_per_node} CPUs, "
        f"{cluster.gpus_per_node} GPUs, {cluster.memory_gb_per_node:,.0f} GB{gpu_nodes}: start-up "
        f"{duration(needs.startup_s)}, then bound by {needs.bottleneck} (stages stream, so the slowest bound sets "
        f"it), then the last candidate's path of {duration(needs.path_s)}"
        f"{f' (once per pass: {shape.passes} passes of rounds and sub-goal levels)' if shape.passes > 1 else ''}:",
    ]
    lines += [f"  {name:<20}{duration(seconds):>12}" for name, seconds in needs.bounds_s.items()]
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    """Print the plan; exit 2 when the config, the seeds or the earlier run cannot be read."""

    def run() -> None:
        print("\n".join(plan_lines(make_plan(sys.argv[1:] if argv is None else argv))), flush=True)

    return run_job(run, (RunNotFound,), interrupted="nothing was written")


if __name__ == "__main__":
    sys.exit(main())
