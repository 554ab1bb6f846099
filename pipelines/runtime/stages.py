"""How a job's declared stages (`operators/stages.py`) become a streaming Ray Data plan and a written table.

Each declared stage is built here into a `Stage`: its operator and the `map_batches` options its `stages:` entry
gives. `streamed` chains them with no barrier and reports each stage's rows to the status board; `write` executes
the plan off the driver into one of the run's tables. Every job (`mine`, `evaluate`, `autoformalize`) wires its
plan with these, so there is one step contract: operator classes on `operators.step`, stages declared once.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ray.data import Dataset

from operators import formalize, judge, prove, trivial
from operators.autoformalize import faithfulness
from operators.autoformalize.faithfulness import FaithfulnessOperator
from operators.decontaminate import DecontaminateOperator
from operators.dedup import SplitDedupOperator
from operators.formalize import FormalizeOperator
from operators.judge import JudgeOperator
from operators.prove import ProveOperator
from operators.rows.candidates import COMPILED, DISCOVERED
from operators.split import split_seeds
from operators.stages import DECONTAMINATE, MINING_STAGES, SPLIT, SPLIT_DEDUP, STATEMENT_STAGES, StageSpec, running
from operators.trivial import TrivialOperator
from pipelines.runtime import arrow_wire
from pipelines.runtime.discoveries import TABLE as DISCOVERIES
from pipelines.runtime.discoveries import DiscoverAndRecord
from pipelines.runtime.job import MiningJob
from pipelines.runtime.waves import execute_writing
from pipelines.runtime.progress import counted, report_batch

# Statuses of a row a stage hands on that the next stage works on (a candidate still to judge or formalize, a
# statement still to check for triviality, faithfulness or a proof; the same words in formalizations/).
WORKED_ON = frozenset({DISCOVERED, COMPILED})


@dataclass(frozen=True)
class Stage:
    """One step of a plan: its name, what `map_batches` runs (an operator class or a function) and how."""

    name: str
    operator: Callable[..., Any]
    options: dict[str, Any]


def discover_stage(job: MiningJob) -> Stage:
    """Discover at the head of the plan: each seed's samples drawn, its discoveries written, the seed handed on (it
    reports its own counts: what it hands on are seeds, not rows with a status)."""
    return Stage(MINING_STAGES[0].name, DiscoverAndRecord, job.llm_options(
        "discover", discover=job.steps.discover, provenance=job.provenance,
        table_uri=job.run.table_uri(DISCOVERIES), board=job.board))


def candidate_stage(job: MiningJob, spec: StageSpec, priority: int) -> Stage:
    """The `Stage` of a declared stage that takes candidates; the Lean stages' checks wait behind those of waves
    with a lower `priority` number."""
    steps, name = job.steps, spec.name
    pool = job.pool.with_priority(priority) if spec.checks_lean else None
    builders: dict[str, Callable[[], Stage]] = {
        SPLIT: lambda: Stage(name, split_seeds, {"batch_format": "pyarrow", "batch_size": 1,
                                                 "fn_kwargs": {"subgoals": steps.subgoals}}),
        SPLIT_DEDUP: lambda: Stage(name, SplitDedupOperator,
                                   job.dedup_options(dedup=steps.dedup, subgoals=steps.subgoals)),
        DECONTAMINATE: lambda: Stage(name, DecontaminateOperator,
                                     job.operator_options(name, check=steps.decontaminate)),
        judge.STAGE: lambda: Stage(name, JudgeOperator, job.llm_options(name, judge=steps.judge)),
        formalize.STAGE: lambda: Stage(name, FormalizeOperator,
                                   job.llm_options(name, formalize=steps.formalize, pool=pool)),
        faithfulness.STAGE: lambda: Stage(name, FaithfulnessOperator,
                                      job.llm_options(name, faithfulness=steps.faithfulness, rows="candidates")),
        trivial.STAGE: lambda: Stage(name, TrivialOperator, job.operator_options(name, trivial=steps.trivial, pool=pool)),
        prove.STAGE: lambda: Stage(name, ProveOperator, job.llm_options(name, prove=steps.prove, pool=pool)),
    }
    return builders[name]()


def statement_stages(job: MiningJob, priority: int = 0) -> list[Stage]:
    """From a statement to a proof (`STATEMENT_STAGES`: what `evaluate` runs on a benchmark, too). A statement that
    drifted in formalize's repairs is marked unfaithful and not proved by default."""
    return [candidate_stage(job, spec, priority) for spec in running(STATEMENT_STAGES, job.cfg)]


def verify_stages(job: MiningJob, priority: int) -> list[Stage]:
    """Every mining stage after discover that the config runs, in plan order (split or split+dedup, decontaminate,
    judge, then the statement stages), the Lean checks at `priority`."""
    return [candidate_stage(job, spec, priority) for spec in running(MINING_STAGES[1:], job.cfg)]


def streamed(ds: Dataset, stages: Sequence[Stage], board: Any) -> Dataset:
    """`ds` through every stage with no barrier between them: rows flow on as soon as a stage is done with them.
    Each stage reports the rows it hands on to the status `board`: by status, and those the next stage works on as
    going on to it."""
    for index, stage in enumerate(stages):
        next_stage = stages[index + 1].name if index + 1 < len(stages) else None
        operator = counted(stage.operator, board, stage.name, next_stage, WORKED_ON)
        ds = ds.map_batches(arrow_wire.wired(operator), **stage.options)
    return ds


def write(job: MiningJob, ds: Dataset, table: str, rows_per_file: int | None = None) -> None:
    """Count the rows on the status board as they are written to the run's `table`, a file per `rows_per_file`
    rows (a file per block when None), executing the plan in a process of its own that ends with it. The writers
    reserve `output.writer_num_cpus`, so they are never starved by the stages' actors and files land while the run
    goes."""
    num_cpus = float(job.cfg.output.writer_num_cpus)
    ds = ds.map_batches(report_batch, batch_format="pyarrow", num_cpus=num_cpus,
                        fn_kwargs={"board": job.board, "table": table})
    job.off_the_driver(execute_writing, ds, job.run.table_path(table), job.run.filesystem, rows_per_file, num_cpus,
                       job.ray_log)
    job.ticker.flush()
