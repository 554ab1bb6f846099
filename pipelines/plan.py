"""`python -m pipelines.plan [mine overrides] [plan.key=value ...]`: a capacity plan before an overnight mining run.

It reads the mining config with the overrides `pipelines.mine` takes and the seed files that run would mine, and
prints what the run will cost at the per-call costs of an earlier run (`plan.from_run=DIR`) or the assumed costs
(conf/plan.yaml): candidates, LLM calls and tokens per stage, Lean checks, GPU- and CPU-hours, RAM per node and
wall time on the cluster of `plan.cluster`. It starts nothing (no Ray, no LLM, no Lean), so it answers in seconds.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from omegaconf import DictConfig, OmegaConf

from lean_pool.kimina import KIMINA
from operators.rows.seeds import estimated_tokens, read_seed
from pipelines.reporting.capacity import (
    Cluster,
    Costs,
    MiningShape,
    Resources,
    Workload,
    lean_speeds,
    measured_costs,
    mining_shape,
    resources,
    stated_costs,
    workload,
)
from pipelines.reporting.run_data import RunNotFound, load_run
from pipelines.runtime.cli import SetupError, compose_config, run_job
from pipelines.runtime.job import list_seed_files, load_config

PLAN_KEY = "plan"
MINUTE_S = 60.0
HOUR_S = 3600.0


@dataclass(frozen=True)
class Plan:
    """A planned run: its seed files (how many, and the estimated tokens of those that fit the discover model),
    the config's shape, the costs used, the work they add up to and what it needs of the cluster."""

    seeds_root: str
    seed_files: int
    seed_tokens: list[int]
    shape: MiningShape
    costs: Costs
    cluster: Cluster
    work: Workload
    needs: Resources


def split_overrides(argv: Sequence[str]) -> tuple[list[str], list[str]]:
    """The mining overrides and the plan's own (those whose key starts with `plan.`, after any `+`/`~`)."""
    mine, plan = [], []
    for override in argv:
        key = override.lstrip("+~").partition("=")[0]
        (plan if key.split(".", 1)[0] == PLAN_KEY else mine).append(override)
    return mine, plan


def seed_token_counts(cfg: DictConfig) -> tuple[str, int, list[int]]:
    """The seed root, how many seed files `pipelines.mine` would mine there, and the estimated tokens of each
    one it would send to the discover model (unreadable, empty and too long ones are never sent)."""
    filesystem, root, files = list_seed_files(cfg)
    if not files:
        raise SetupError(f"no seed file under {cfg.seeds.root} matches include={list(cfg.seeds.include)}")
    chars_per_token = float(cfg.seeds.chars_per_token)
    seeds = [read_seed(filesystem, f"{root}/{relative}", int(cfg.seeds.max_tokens), chars_per_token)
             for relative in files]
    return root, len(files), [estimated_tokens(seed.text, chars_per_token) for seed in seeds if seed.text is not None]


def plan_costs(cfg: DictConfig, settings: DictConfig, shape: MiningShape) -> Costs:
    """Costs measured from `plan.from_run`, else the assumed costs (`plan.assumed`)."""
    if settings.from_run is None:
        return stated_costs(OmegaConf.to_container(settings.assumed, resolve=True), shape)
    run = load_run(str(settings.from_run))
    if run.discoveries is None:
        raise SetupError(f"plan.from_run={settings.from_run} has no discoveries/ table to measure discover calls from")
    started = run.manifest.get("created_at")
    try:
        return measured_costs(run.candidates, run.discoveries, float(cfg.seeds.chars_per_token),
                              f"measured from {run.uri}", shape, started and datetime.fromisoformat(started),
                              float(settings.assumed.startup_s), float(settings.assumed.subgoals_per_failed_proof))
    except ValueError as error:
        raise SetupError(str(error)) from None


def cluster_of(settings: DictConfig) -> Cluster:
    """The cluster and the rates `plan.cluster`, `plan.gpu` and the Lean figures of conf/plan.yaml state."""
    shape = settings.cluster
    return Cluster(nodes=int(shape.nodes), cpus_per_node=int(shape.cpus_per_node),
                   gpus_per_node=int(shape.gpus_per_node), memory_gb_per_node=float(shape.memory_gb_per_node),
                   gpu_nodes=int(shape.gpu_nodes), gpus_per_gpu_node=int(shape.gpus_per_gpu_node),
                   prompt_tokens_per_s=float(settings.gpu.prompt_tokens_per_s),
                   completion_tokens_per_s=float(settings.gpu.completion_tokens_per_s),
                   lean_import_s=float(settings.lean_import_s), node_overhead_gb=float(settings.node_overhead_gb))


def make_plan(argv: Sequence[str]) -> Plan:
    """The plan for a mining run started with the overrides in `argv` (the plan's own `plan.` ones included)."""
    mine_overrides, plan_overrides = split_overrides(argv)
    cfg = load_config(mine_overrides)
    if cfg.lean.backend == KIMINA:
        raise SetupError("the plan sizes Folklore's own Lean pool (lean=repl); with lean=kimina the checks run on "
                         "your Kimina server, whose capacity the plan cannot see: plan with lean=repl and its shape")
    settings = compose_config(PLAN_KEY, plan_overrides)[PLAN_KEY]
    root, files, tokens = seed_token_counts(cfg)
    shape = mining_shape(OmegaConf.to_container(cfg, resolve=True))
    costs = plan_costs(cfg, settings, shape)
    cluster = cluster_of(settings)
    work = workload(tokens, shape, costs)
    return Plan(root, files, tokens, shape, costs, cluster, work, resources(work, costs, shape, cluster))


def duration(seconds: float) -> str:
    """Seconds in the unit a person reads them in: s, min or h."""
    if seconds < MINUTE_S:
        return f"{seconds:.1f} s"
    if seconds < HOUR_S:
        return f"{seconds / MINUTE_S:.1f} min"
    return f"{seconds / HOUR_S:,.1f} h"


def plan_lines(plan: Plan) -> list[str]:
    """The plan as the lines `python -m pipelines.plan` prints."""
    work, needs, cluster, shape = plan.work, plan.needs, plan.cluster, plan.shape
    gpu_nodes = f" and {cluster.gpu_nodes} GPU nodes x {cluster.gpus_per_gpu_node} GPUs" if cluster.gpu_nodes else ""
    lines = [
        f"seeds: {plan.seed_files} files under {plan.seeds_root}, {len(plan.seed_tokens)} fit the discover model "
        f"(about {sum(plan.seed_tokens):,} tokens); discover calls: {work.units:,} ({shape.samples_per_seed} per seed"
        f"{f' in each of {shape.rounds} rounds' if shape.rounds > 1 else ''})",
        f"costs: {plan.costs.source}",
        f"candidates expected: {work.candidates:,.0f}" + (
            f" (sub-goals on, {shape.subgoal_levels} level(s): {plan.costs.subgoals_per_candidate:.2f} sub-goal "
            f"candidates per candidate)" if shape.subgoal_levels else ""),
        "rows per stage: " + ", ".join(f"{stage} {rows:,.0f}" for stage, rows in work.rows.items() if rows > 0),
        "LLM calls and tokens per stage:",
        f"  {'stage':<13}{'calls':>12}{'prompt_tokens':>16}{'completion_tokens':>19}{'llm_time':>12}",
    ]
    loads = {stage: load for stage, load in work.calls.items() if load.calls > 0}
    for stage, load in loads.items():
        lines.append(f"  {stage:<13}{load.calls:>12,.0f}{load.prompt_tokens:>16,.0f}{load.completion_tokens:>19,.0f}"
                     f"{duration(load.llm_seconds):>12}")
    lines.append(f"  {'all':<13}{sum(load.calls for load in loads.values()):>12,.0f}"
                 f"{sum(load.prompt_tokens for load in loads.values()):>16,.0f}"
                 f"{sum(load.completion_tokens for load in loads.values()):>19,.0f}")
    checks = ", ".join(f"{stage} {count:,.0f}" for stage, count in work.checks.items())
    check_s, import_s = lean_speeds(shape, plan.costs, cluster)
    lines += [
        f"Lean checks: {work.lean_checks:,.0f} ({checks}, replays {work.replays:,.0f}) at "
        f"{check_s:.2f} s per check, {plan.costs.replay_s:.1f} s per replay",
        f"GPU-hours: {needs.gpu_hours:,.2f} at {cluster.prompt_tokens_per_s:,.0f} prompt and "
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
