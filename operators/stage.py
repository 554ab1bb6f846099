"""What a pipeline stage is: one declaration from which the plan, the checks, the capacity model and the report
derive everything they know about it.

A stage module (`operators/judge.py`, or a module of a user's own named `package.module:NAME` in `pipeline:`)
declares one `Stage` beside its operator: the operator, how its typed settings are built from its config section,
the resources it reserves, the LLM calls it makes and the roles they go to, the prompts and answer parser it
uses, whether it checks Lean, and the row statuses it takes and gives. Nothing else names a stage, so adding or
dropping one is a change to `pipeline:` alone. Pure data over a composed config: no Ray, no I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from operators.llm.answers import AnswerShape

Config = Mapping[str, Any]
# A role in a stage's `calls` that stands for every role of the config's `llm.provers`.
PROVERS = "provers"


class Execution(Enum):
    """How Ray Data runs a stage's operator: an actor pool of (async) callable classes, an actor pool fed whole
    blocks (a seed's rows never split between calls), or stateless tasks running a function of a batch."""

    ACTORS = "actors"
    WHOLE_BLOCKS = "whole_blocks"
    TASKS = "tasks"


# The keys of a stage's `resources` section.
RESOURCE_KEYS = frozenset({"actors", "max_concurrent_calls_per_actor", "batch_size", "num_cpus", "num_gpus",
                           "resources"})


@dataclass(frozen=True)
class Resources:
    """What a stage reserves and keeps in flight, read from its `resources` section: actors, calls in flight per
    actor, rows per batch, CPUs, GPUs and custom Ray resources per actor."""

    actors: int
    max_concurrent_calls_per_actor: int
    batch_size: int | None
    num_cpus: float
    num_gpus: float = 0.0
    custom: Mapping[str, float] = field(default_factory=dict)

    @classmethod
    def from_config(cls, entry: Config) -> Resources:
        """A stage's `resources` section (`{actors: 1, max_concurrent_calls_per_actor: 16, batch_size: 8,
        num_cpus: 0.25}`; `num_gpus` and `resources` are optional); a key it does not know, or a negative amount,
        is a `ValueError` (the composed config's ranges check the keys the defaults have)."""
        unknown = sorted(set(entry) - RESOURCE_KEYS)
        if unknown:
            raise ValueError(f"{', '.join(unknown)} is not a resource of a stage: a stage's resources take "
                             f"{', '.join(sorted(RESOURCE_KEYS))}")
        if float(entry.get("num_gpus", 0.0)) < 0 or any(float(amount) < 0 for amount in
                                                      (entry.get("resources") or {}).values()):
            raise ValueError("num_gpus and custom resources are amounts Ray reserves: none may be negative")
        return cls(actors=int(entry["actors"]),
                   max_concurrent_calls_per_actor=int(entry.get("max_concurrent_calls_per_actor", 1)),
                   batch_size=None if entry.get("batch_size") is None else int(entry["batch_size"]),
                   num_cpus=float(entry["num_cpus"]), num_gpus=float(entry.get("num_gpus", 0.0)),
                   custom={str(name): float(amount) for name, amount in (entry.get("resources") or {}).items()})

    @property
    def rows_in_flight(self) -> int:
        """Rows the stage works on at once when its endpoint does not bound it."""
        return self.actors * self.max_concurrent_calls_per_actor * (self.batch_size or 1)


@dataclass(frozen=True)
class Shared:
    """What several stages' settings are built from besides their own section: the prompt templates, the
    declaration index they read, grounding and sub-goal settings (None when off), the table the plan writes
    (`candidates`, `formalizations`...), and what only the driver can read: the benchmarks' problems (read when a
    stage asks) and the agent's examples."""

    prompts: Mapping[str, str]
    index: Any
    grounding: Any
    subgoals: Any
    table: str
    benchmark_problems: Callable[[], Sequence[Any]]
    examples: Any = None


def always(cfg: Config) -> bool:
    """A stage that runs whenever the pipeline lists it."""
    return True


@dataclass(frozen=True)
class Stage:
    """One stage of a job's pipeline, declared once.

    `arguments(cfg, shared)` gives the operator's keyword arguments (its typed settings under their names);
    `resources` names the config section that sizes it (`judge.resources`), or gives them for a stage declared
    outside Folklore (None: Ray tasks holding no CPU between batches); `calls`
    maps each LLM call label it makes (what `llm.sampling` and the rows' `llm_calls` name) to the roles asked with
    it; `takes` and `gives` are the row statuses it works on and may leave; `runs(cfg)` is its config switch;
    `instead(cfg)` names another declared stage that takes this one's place under that config (split becomes
    split+dedup when dedup is on); `pick(cfg)` chooses the operator when a mode of the config decides it;
    `answer_shapes` gives, for each call whose answer a parser reads by its shape, that shape under a config (what a
    `structured` call's answer is held to)."""

    name: str
    operator: Callable[..., Any]
    arguments: Callable[[Config, Shared], dict[str, Any]]
    takes: frozenset[str]
    gives: frozenset[str]
    execution: Execution = Execution.ACTORS
    resources: str | Resources | None = None
    calls: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    prompts: tuple[str, ...] = ()
    parser: Callable[..., Any] | None = None
    answer_shapes: Mapping[str, Callable[[Config], AnswerShape]] = field(default_factory=dict)
    checks_lean: bool = False
    runs: Callable[[Config], bool] = always
    instead: Callable[[Config], str | None] | None = None
    pick: Callable[[Config], Callable[..., Any]] | None = None

    @property
    def calls_llm(self) -> bool:
        """Whether the stage asks an LLM (its operator is an `operators.base.LLMOperator`)."""
        return bool(self.calls)

    @property
    def optional(self) -> bool:
        """Whether a config switch turns this stage off even when the pipeline lists it."""
        return self.runs is not always

    def operator_of(self, cfg: Config) -> Callable[..., Any]:
        """The operator that runs under `cfg`."""
        return self.operator if self.pick is None else self.pick(cfg)

    def resources_of(self, cfg: Config) -> Resources | None:
        """The stage's resources under `cfg` (None for Ray tasks): those its declaration gives, or those of the
        config section its declaration names (a dotted path, `judge.resources`)."""
        if self.resources is None or isinstance(self.resources, Resources):
            return self.resources
        entry: Any = cfg
        for key in self.resources.split("."):
            entry = entry[key]
        return Resources.from_config(entry)
