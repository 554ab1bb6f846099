"""How a job's declared stages (`operators.stage.Stage`) become a streaming Ray Data plan and a written table.

Each stage the run executes is built here into a `PlanStep`: its operator and the `map_batches` options its
declaration and its resources give (how it executes, its actors, CPUs, GPUs and custom resources, its batch
size, its settings, the Lean pool when it checks Lean, the LLM settings, usage ledger and answer cache when it calls
an LLM). `streamed` chains the plan steps with no barrier and reports each step's rows to the status board; `write`
executes the plan off the driver into one of the run's tables. Every job wires its plan with these.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import ray
from ray.data import Dataset

from operators.discover import STAGE as DISCOVER
from operators.rows.candidates import COMPILED, DISCOVERED
from operators.stage import Execution, Stage
from pipelines.runtime import arrow_wire
from pipelines.runtime.discoveries import TABLE as DISCOVERIES
from pipelines.runtime.discoveries import DiscoverAndRecord
from pipelines.runtime.job import Job
from pipelines.runtime.progress import counted, report_batch
from pipelines.runtime.waves import execute_writing

# Statuses of a row a stage hands on that the next stage works on (a candidate still to judge or formalize, a
# statement still to check for triviality, faithfulness or a proof; the same words in formalizations/).
WORKED_ON = frozenset({DISCOVERED, COMPILED})
# Rows per call of a stage that runs as Ray tasks: a seed item at a time.
TASK_BATCH_ROWS = 1


@dataclass(frozen=True)
class PlanStep:
    """One plan step, the Ray Data map a stage becomes: its name, what `map_batches` runs (an operator class or a
    function) and how."""

    name: str
    operator: Callable[..., Any]
    options: dict[str, Any]


def stage_options(job: Job, stage: Stage, arguments: dict[str, Any], priority: int = 0) -> dict[str, Any]:
    """`map_batches` keyword arguments of `stage` in `job`'s plan, its operator given `arguments`: Ray tasks take
    them as function arguments; an actor's constructor takes them with the Lean pool (its checks served after those
    of waves with a lower `priority` number) when the stage checks Lean, and the LLM settings, its actor count, the
    usage ledger and the run's answer cache when it calls an LLM."""
    resources = stage.resources_of(job.cfg)
    if stage.execution is Execution.TASKS or resources is None:
        return {"batch_format": "pyarrow", "batch_size": TASK_BATCH_ROWS, "fn_kwargs": arguments}
    constructor = dict(arguments)
    if stage.checks_lean:
        constructor["pool"] = job.pool.with_priority(priority)
    if stage.calls_llm:
        constructor.update(settings=job.settings, actors=resources.actors, ledger=job.ledger,
                           cache_dir=job.llm_cache_dir)
    whole_blocks = stage.execution is Execution.WHOLE_BLOCKS
    options: dict[str, Any] = {
        "batch_size": None if whole_blocks else resources.batch_size,
        "batch_format": "pyarrow",
        "num_cpus": resources.num_cpus,
        "compute": ray.data.ActorPoolStrategy(size=resources.actors) if whole_blocks else ray.data.ActorPoolStrategy(
            size=resources.actors, max_concurrent_calls_per_actor=resources.max_concurrent_calls_per_actor),
        "fn_constructor_kwargs": constructor,
    }
    if resources.num_gpus:
        options["num_gpus"] = resources.num_gpus
    if resources.custom:
        options["resources"] = dict(resources.custom)
    return options


def plan_steps(job: Job, stages: Sequence[Stage], priority: int = 0) -> list[PlanStep]:
    """`stages` as plan steps of `job`, each with the arguments the job built for it."""
    return [PlanStep(stage.name, stage.operator_of(job.cfg),
                     stage_options(job, stage, job.pipeline.of(stage.name), priority)) for stage in stages]


def discover_step(job: Job) -> PlanStep:
    """Discover at the head of the mining plan: each seed's samples drawn, its discoveries written, the seed handed
    on (it reports its own counts: what it hands on are seeds, not rows with a status)."""
    stage = next(stage for stage in job.pipeline.stages if stage.name == DISCOVER)
    arguments = {**job.pipeline.of(DISCOVER), "provenance": job.provenance,
                 "table_uri": job.run.table_uri(DISCOVERIES), "board": job.board}
    return PlanStep(stage.name, DiscoverAndRecord, stage_options(job, stage, arguments))


def after_discover(job: Job, priority: int) -> list[PlanStep]:
    """Every stage of the mining pipeline after discover, its Lean checks at `priority`."""
    return plan_steps(job, [stage for stage in job.pipeline.stages if stage.name != DISCOVER], priority)


def streamed(ds: Dataset, stages: Sequence[PlanStep], board: Any) -> Dataset:
    """`ds` through every stage with no barrier between them: rows flow on as soon as a stage is done with them.
    Each stage reports the rows it hands on to the status `board`: by status, and those the next stage works on as
    going on to it."""
    for index, stage in enumerate(stages):
        next_stage = stages[index + 1].name if index + 1 < len(stages) else None
        operator = counted(stage.operator, board, stage.name, next_stage, WORKED_ON)
        ds = ds.map_batches(arrow_wire.wired(operator), **stage.options)
    return ds


def write(job: Job, ds: Dataset, table: str, rows_per_file: int | None = None) -> None:
    """Count the rows on the status board as they are written to the run's `table`, a file per `rows_per_file`
    rows (a file per block when None), executing the plan in a process of its own that ends with it. The writers
    reserve `output.writer_num_cpus`, so they are never starved by the stages' actors and files land while the run
    goes."""
    num_cpus = float(job.cfg.output.writer_num_cpus)
    # Ray's hint for map_batches' function has no room for the arguments `fn_kwargs` gives it.
    ds = ds.map_batches(report_batch, batch_format="pyarrow", num_cpus=num_cpus,  # type: ignore[arg-type]
                        fn_kwargs={"board": job.board, "table": table})
    job.off_the_driver(execute_writing, ds, job.run.table_path(table), job.run.filesystem, rows_per_file, num_cpus,
                       job.ray_log)
    job.ticker.flush()
