"""A job's pipeline and each of its stages' settings, built once from the composed config before Ray starts.

The stages come from `pipeline:` (`operators.pipeline.pipeline`); each stage builds its own typed settings from its
config section (`Stage.arguments`), given what several of them share, built here: the prompts, the index, grounding
and sub-goals, and what the driver reads for them (a benchmark's problems). An operator receives its own settings
and nothing else; a pipeline that cannot work is a `SetupError` of one line.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, cast

from omegaconf import DictConfig, OmegaConf

from operators.pipeline import PipelineError, pipeline
from operators.retrieval.settings import GroundingSettings, IndexSettings
from operators.split import SubgoalSettings
from operators.stage import Shared, Stage
from pipelines.runtime.benchmarks import read_benchmarks
from pipelines.runtime.cli import SetupError


@dataclass(frozen=True)
class StageSettings:
    """The stages a run executes, in order, each stage's operator arguments by name, and what they share."""

    stages: tuple[Stage, ...]
    arguments: dict[str, dict[str, Any]]
    shared: Shared

    def of(self, stage: str) -> dict[str, Any]:
        """The operator arguments of the stage named `stage` (empty when the run does not execute it)."""
        return self.arguments.get(stage, {})


def subgoal_settings(cfg: DictConfig) -> SubgoalSettings | None:
    """`subgoals:` when the job has it and it is on (mining does; a benchmark's evaluation mines no sub-goals)."""
    section = cfg.get("subgoals")
    if section is None or not section.enabled:
        return None
    return SubgoalSettings(max_per_candidate=int(section.max_per_candidate), sketch_prompt=bool(section.sketch_prompt))


def grounding_settings(cfg: DictConfig, index: IndexSettings) -> GroundingSettings | None:
    """`grounding:` when it is on: the declarations formalize and prove show the model."""
    section = cfg.grounding
    if not section.enabled:
        return None
    return GroundingSettings(k=int(section.k), k_missing=int(section.k_missing), max_missing=int(section.max_missing),
                             header=str(section.header), missing_header=str(section.missing_header), index=index)


def benchmark_problems(cfg: DictConfig) -> tuple[Any, ...]:
    """Every problem of the benchmarks `decontaminate.benchmarks` names, read on the driver."""
    section = cast(dict[str, Any], OmegaConf.to_container(cfg.decontaminate, resolve=True))
    return tuple(problem for benchmark in read_benchmarks(section) for problem in benchmark.problems)


def stage_settings(cfg: DictConfig, index: IndexSettings, inputs: Iterable[str], table: str,
                  examples: Any = None) -> StageSettings:
    """The run's pipeline (rows entering with the statuses `inputs`, written to `table`) and its stages' settings."""
    resolved = cast(dict[str, Any], OmegaConf.to_container(cfg, resolve=True))
    try:
        stages = pipeline(resolved, inputs)
    except PipelineError as error:
        raise SetupError(str(error)) from None
    for stage in stages:
        try:
            stage.resources_of(resolved)
        except ValueError as error:
            raise SetupError(f"{stage.resources}: {error}") from None
    shared = Shared(prompts=resolved["prompts"], index=index, grounding=grounding_settings(cfg, index),
                    subgoals=subgoal_settings(cfg), table=table, benchmark_problems=lambda: benchmark_problems(cfg),
                    examples=examples)
    return StageSettings(stages, {stage.name: stage.arguments(resolved, shared) for stage in stages}, shared)
