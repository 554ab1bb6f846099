"""The declared stages, and a job's pipeline read from its config's `pipeline:` list.

Each stage is declared once in its own module (`operators.stage.Stage`); this module only collects them by name and
turns a `pipeline:` list into the stages a run executes, in order. An entry `package.module:NAME` names a stage
declared outside Folklore. A list that cannot work (an unknown name, a stage whose input statuses no earlier stage
gives, a stage listed twice) is a `PipelineError` whose message is one line, before anything starts. Pure data over
a composed config (no Ray).
"""

from __future__ import annotations

import difflib
import importlib
from collections.abc import Iterable, Sequence

from operators import (
    decontaminate,
    dedup,
    discover,
    formalize,
    judge,
    prove,
    split,
    trivial,
)
from operators.autoformalize import faithfulness, modes
from operators.contribute import name, shorten
from operators.llm.answers import AnswerShape
from operators.stage import PROVERS, Config, Stage

# Every stage Folklore declares, by name.
DECLARED: dict[str, Stage] = {stage.name: stage for stage in (
    discover.DECLARATION, split.DECLARATION, dedup.DECLARATION, decontaminate.DECLARATION, judge.DECLARATION,
    formalize.DECLARATION, faithfulness.DECLARATION, trivial.DECLARATION, prove.DECLARATION, modes.DECLARATION,
    name.DECLARATION, shorten.DECLARATION)}
# How an entry names a stage declared in a module of its own: `package.module:NAME`.
MODULE_SEPARATOR = ":"


class PipelineError(ValueError):
    """A `pipeline:` list that cannot run; the message is one line naming the entry and why."""


def external(entry: str) -> Stage:
    """The stage `package.module:NAME` declares."""
    module_name, _, attribute = entry.partition(MODULE_SEPARATOR)
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise PipelineError(f"pipeline entry {entry}: cannot import {module_name} ({error}); the module must be "
                            "importable where the job runs (installed, or on PYTHONPATH)") from None
    declared = getattr(module, attribute, None)
    if not isinstance(declared, Stage):
        found = "nothing" if declared is None else f"a {type(declared).__name__}"
        raise PipelineError(f"pipeline entry {entry}: {module_name}.{attribute} is {found}, not an "
                            "operators.stage.Stage")
    return declared


def named(entry: str) -> Stage:
    """The stage an entry of `pipeline:` names."""
    if MODULE_SEPARATOR in entry:
        return external(entry)
    if entry in DECLARED:
        return DECLARED[entry]
    close = difflib.get_close_matches(entry, DECLARED, n=1)
    hint = f"did you mean {close[0]}? " if close else ""
    raise PipelineError(f"pipeline entry {entry} is not a stage: {hint}the stages are {', '.join(DECLARED)}, "
                        "or package.module:NAME for one declared outside Folklore")


def resolve(entry: str, cfg: Config) -> Stage:
    """The stage an entry of `pipeline:` names, or the one that takes its place under `cfg` (`Stage.instead`)."""
    stage = named(entry)
    replacement = stage.instead(cfg) if stage.instead else None
    return DECLARED[replacement] if replacement else stage


def listed(cfg: Config) -> tuple[Stage, ...]:
    """Every stage `pipeline:` lists, resolved under `cfg`, whether its switch is on or not."""
    entries = [str(entry) for entry in cfg["pipeline"]]
    twice = sorted({entry for entry in entries if entries.count(entry) > 1})
    if twice:
        raise PipelineError(f"pipeline lists {', '.join(twice)} twice: a stage runs once in a pipeline")
    return tuple(resolve(entry, cfg) for entry in entries)


def pipeline(cfg: Config, inputs: Iterable[str]) -> tuple[Stage, ...]:
    """The stages a run of `cfg` executes, in order: those `pipeline:` lists whose switch is on. Rows enter with
    the statuses `inputs`; each stage must take a status that the inputs or an earlier stage give, else no row would
    ever reach it."""
    running = tuple(stage for stage in listed(cfg) if stage.runs(cfg))
    check_order(running, frozenset(inputs))
    return running


def check_order(stages: Sequence[Stage], inputs: frozenset[str]) -> None:
    """A `PipelineError` naming the first stage that takes no status its predecessors (or the inputs) give."""
    available = set(inputs)
    for index, stage in enumerate(stages):
        if not stage.takes & available:
            before = ", ".join(previous.name for previous in stages[:index]) or "nothing (it is first)"
            givers = [later.name for later in stages[index + 1:] if later.gives & stage.takes]
            needs = f"; put it after {' or '.join(givers)}" if givers else "; no stage of the list gives them"
            raise PipelineError(f"pipeline: {stage.name} takes rows {' or '.join(sorted(stage.takes))}, which no "
                                f"stage before it gives (before it: {before}){needs}")
        available |= stage.gives


def call_roles(stages: Iterable[Stage], provers: Sequence[str]) -> dict[str, tuple[str, ...]]:
    """The roles each LLM call label of `stages` is asked with (`PROVERS` standing for `provers`); a label two
    stages use is asked with the roles of both."""
    roles: dict[str, tuple[str, ...]] = {}
    for stage in stages:
        for label, asked in stage.calls.items():
            expanded = [role for entry in asked for role in (provers if entry == PROVERS else (entry,))]
            roles[label] = tuple(dict.fromkeys([*roles.get(label, ()), *expanded]))
    return roles


def answer_shapes(stages: Iterable[Stage], cfg: Config) -> dict[str, AnswerShape | None]:
    """The shape each LLM call label of `stages` is read by under `cfg`, None for a call read as free prose; a label
    two stages use has the shape of the one that declares it."""
    shapes: dict[str, AnswerShape | None] = {}
    for stage in stages:
        for label in stage.calls:
            declared = stage.answer_shapes.get(label)
            shapes[label] = declared(cfg) if declared is not None else shapes.get(label)
    return shapes


def call_stage(stages: Iterable[Stage]) -> dict[str, str]:
    """The stage whose rows each LLM call label is made for."""
    return {label: stage.name for stage in stages for label in stage.calls}
