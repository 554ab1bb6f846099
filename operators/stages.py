"""The stages each job runs, in plan order, declared once.

`mine`, `evaluate` and `autoformalize` build their Ray Data plans from these lists; the capacity model, the pre-start
CPU check and the report read the same lists, so a stage a job runs is counted wherever its rows, actors or calls
are. Pure data over a composed config (no Ray): what each stage is, which `stages.<shape>` sizes its actors, which
config switch turns it on, and whether it checks Lean.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from operators import discover, formalize, judge, prove, trivial
from operators.autoformalize import direct, faithfulness
from operators.contribute import name, shorten

Config = Mapping[str, Any]

SPLIT = "split"
SPLIT_DEDUP = "split+dedup"
DECONTAMINATE = "decontaminate"


def always(cfg: Config) -> bool:
    """A stage every run of its job has."""
    return True


def dedup_on(cfg: Config) -> bool:
    """`dedup.enabled`: split compares each candidate with the index and its siblings."""
    return bool(cfg["dedup"]["enabled"])


def dedup_off(cfg: Config) -> bool:
    """Split alone, as Ray tasks, when dedup is off."""
    return not dedup_on(cfg)


def benchmarks_named(cfg: Config) -> bool:
    """`decontaminate.benchmarks` lists a benchmark: candidates are checked against its problems."""
    return bool(cfg["decontaminate"]["benchmarks"])


def faithfulness_on(cfg: Config) -> bool:
    """`faithfulness.enabled`: compiled statements are checked against what was asked."""
    return bool(cfg["faithfulness"]["enabled"])


@dataclass(frozen=True)
class StageSpec:
    """One stage: its name (what the status board and the report call it), the `stages:` entry that sizes its actors
    (None: it runs as Ray tasks that hold no CPU between batches), when it runs, and whether it calls an LLM and
    checks Lean (what the report's cost table and the capacity model count for it)."""

    name: str
    shape: str | None
    runs: Callable[[Config], bool] = always
    calls_llm: bool = False
    checks_lean: bool = False

    @property
    def optional(self) -> bool:
        """Whether a config switch turns this stage on or off."""
        return self.runs is not always


# Candidates from a statement to a proof: what `mine` runs after judge and what `evaluate` runs on a benchmark.
STATEMENT_STAGES = (
    StageSpec(formalize.STAGE, formalize.STAGE, calls_llm=True, checks_lean=True),
    StageSpec(faithfulness.STAGE, faithfulness.STAGE, faithfulness_on, calls_llm=True),
    StageSpec(trivial.STAGE, trivial.STAGE, checks_lean=True),
    StageSpec(prove.STAGE, prove.STAGE, calls_llm=True, checks_lean=True),
)
# The mining method: seed files to proofs.
MINING_STAGES = (
    StageSpec(discover.STAGE, discover.STAGE, calls_llm=True),
    StageSpec(SPLIT, None, dedup_off),
    StageSpec(SPLIT_DEDUP, "dedup", dedup_on),
    StageSpec(DECONTAMINATE, DECONTAMINATE, benchmarks_named),
    StageSpec(judge.STAGE, judge.STAGE, calls_llm=True),
    *STATEMENT_STAGES,
)
# Informal statements to Lean, then the faithfulness check (always on in `autoformalize`).
AUTOFORMALIZE_STAGES = (
    StageSpec(direct.STAGE, direct.STAGE, calls_llm=True, checks_lean=True),
    StageSpec(faithfulness.STAGE, faithfulness.STAGE, calls_llm=True),
)
# A run's proved lemmas to Mathlib: a name by the conventions, then the shortest proof that passes (`contribute`).
CONTRIBUTE_STAGES = (
    StageSpec(name.STAGE, name.STAGE, calls_llm=True),
    StageSpec(shorten.STAGE, shorten.STAGE, checks_lean=True),
)
# The stages that take candidates after discover, in plan order (the capacity model's rows and slots).
CANDIDATE_STAGES = tuple(spec.name for spec in MINING_STAGES[1:] if spec.name not in (SPLIT, SPLIT_DEDUP))
LEAN_STAGES = tuple(spec.name for spec in MINING_STAGES if spec.checks_lean)
# The mining stages that cost LLM calls or Lean checks: the rows of the report's cost table.
COST_STAGES = tuple(spec for spec in MINING_STAGES if spec.calls_llm or spec.checks_lean)


def running(stages: tuple[StageSpec, ...], cfg: Config) -> tuple[StageSpec, ...]:
    """The stages of `stages` that a run of `cfg` runs, in plan order."""
    return tuple(spec for spec in stages if spec.runs(cfg))
