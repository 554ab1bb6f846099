"""A capacity plan made from a mining config, its seed files and per-call costs: what `folklore plan` prints and what
measurement scripts compare a run with. Composes configs and reads seed files and earlier runs; starts nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, cast

from omegaconf import DictConfig, OmegaConf

from lean_pool.kimina import KIMINA
from operators.rows.seeds import estimated_tokens, read_seed
from pipelines.jobs.mining import load_config
from pipelines.planning.capacity import (
    Cluster,
    Costs,
    MiningShape,
    Resources,
    Workload,
    mining_shape,
    resources,
    stated_costs,
    workload,
)
from pipelines.planning.measured_costs import measured_costs
from pipelines.reporting.run_data import load_run
from pipelines.runtime.cli import SetupError, compose_config
from pipelines.runtime.seed_files import SeedListing, list_seed_files

PLAN_KEY = "plan"


@dataclass(frozen=True)
class Plan:
    """A planned run: its seed files (how many, and the estimated tokens of those that fit the discover model),
    the config's shape, the costs used, the work they add up to and what it needs of the cluster."""

    seeds_root: str
    seed_files: int
    seed_tokens: list[int]
    seeds_skipped: str | None
    shape: MiningShape
    costs: Costs
    cluster: Cluster
    work: Workload
    needs: Resources


def split_overrides(argv: Sequence[str]) -> tuple[list[str], list[str]]:
    """The mining overrides and the plan's own (those whose key starts with `plan.`, after any `+`/`~`)."""
    mine, plan = list[str](), list[str]()
    for override in argv:
        key = override.lstrip("+~").partition("=")[0]
        (plan if key.split(".", 1)[0] == PLAN_KEY else mine).append(override)
    return mine, plan


def seed_token_counts(cfg: DictConfig) -> tuple[SeedListing, list[int]]:
    """The seed files `pipelines.mine` would mine, and the estimated tokens of each one it would send to the
    discover model (unreadable, empty and too long ones are never sent)."""
    listing = list_seed_files(cfg)
    filesystem, root, files = listing.filesystem, listing.root, listing.files
    chars_per_token = float(cfg.seeds.chars_per_token)
    seeds = [read_seed(filesystem, f"{root}/{relative}", int(cfg.seeds.max_tokens), chars_per_token)
             for relative in files]
    return listing, [estimated_tokens(seed.text, chars_per_token) for seed in seeds if seed.text is not None]


def plan_costs(cfg: DictConfig, settings: DictConfig, shape: MiningShape) -> Costs:
    """Costs measured from `plan.from_run`, else the assumed costs (`plan.assumed`)."""
    if settings.from_run is None:
        return stated_costs(cast(dict[str, Any], OmegaConf.to_container(settings.assumed, resolve=True)), shape)
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
    cfg = load_config(mine_overrides, complete=False)
    if cfg.lean.backend == KIMINA:
        raise SetupError("the plan sizes Folklore's own Lean pool (lean=repl); with lean=kimina the checks run on "
                         "your Kimina server, whose capacity the plan cannot see: plan with lean=repl and its shape")
    settings = compose_config(PLAN_KEY, plan_overrides)[PLAN_KEY]
    listing, tokens = seed_token_counts(cfg)
    shape = mining_shape(cast(dict[str, Any], OmegaConf.to_container(cfg, resolve=True)))
    costs = plan_costs(cfg, settings, shape)
    cluster = cluster_of(settings)
    work = workload(tokens, shape, costs)
    return Plan(listing.root, len(listing.files), tokens, listing.skipped_line(), shape, costs, cluster, work,
                resources(work, costs, shape, cluster))
