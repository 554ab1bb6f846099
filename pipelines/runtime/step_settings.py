"""Each step's typed settings, built once from the composed config: an operator receives its own and nothing else.

The config-to-settings half of the step contract (`operators/step.py` is what an operator provides,
`operators/stages.py` which stages run, `pipelines/runtime/stages.py` how they are wired): every section a step
reads (`discover:`, `dedup:`, ... `prompts:`, `grounding:`) is read here and nowhere else.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from omegaconf import DictConfig, OmegaConf

from operators.autoformalize.faithfulness import FaithfulnessSettings
from operators.decontaminate import DecontaminateSettings, MatchSettings
from operators.dedup import DedupSettings
from operators.discover import DiscoverSettings
from operators.formalize import FormalizeSettings
from operators.judge import JudgeSettings
from operators.prove import ProveSettings
from operators.retrieval.settings import GroundingSettings, IndexSettings
from operators.split import SubgoalSettings
from operators.trivial import TrivialSettings
from pipelines.runtime.benchmarks import read_benchmarks


@dataclass(frozen=True)
class StepSettings:
    """Each step's typed settings, built once from the config: an operator receives its own and nothing else.
    `dedup`, `decontaminate`, `faithfulness` and `grounding` (inside formalize and prove) are None when they are off."""

    discover: DiscoverSettings
    dedup: DedupSettings | None
    decontaminate: DecontaminateSettings | None
    judge: JudgeSettings
    formalize: FormalizeSettings
    faithfulness: FaithfulnessSettings | None
    trivial: TrivialSettings
    prove: ProveSettings
    subgoals: SubgoalSettings | None


def subgoal_settings(cfg: DictConfig) -> SubgoalSettings | None:
    """`subgoals:` when the job has it and it is on (mining does; a benchmark's evaluation mines no sub-goals)."""
    section = cfg.get("subgoals")
    if section is None or not section.enabled:
        return None
    return SubgoalSettings(max_per_candidate=int(section.max_per_candidate), sketch_prompt=bool(section.sketch_prompt))


def faithfulness_settings(cfg: DictConfig, prompts: Mapping[str, Any], index: IndexSettings) -> FaithfulnessSettings:
    """The faithfulness check's settings (`faithfulness:`), its templates beside the shared system message."""
    section = cfg.faithfulness
    return FaithfulnessSettings(
        alpha=float(section.alpha), minor_penalty=float(section.minor_penalty), max_terms=int(section.max_terms),
        prove_unfaithful=bool(section.prove_unfaithful), index=index,
        prompts={"system": prompts["system"], "decompose": str(section.decompose), "label": str(section.label),
                 "no_definitions": str(section.no_definitions)})


def decontaminate_settings(cfg: DictConfig) -> DecontaminateSettings | None:
    """The decontaminate stage's settings (`decontaminate:`), its problems read here on the driver; None without
    benchmarks."""
    section = OmegaConf.to_container(cfg.decontaminate, resolve=True)
    if not section["benchmarks"]:
        return None
    problems = tuple(problem for benchmark in read_benchmarks(section) for problem in benchmark.problems)
    return DecontaminateSettings(problems, MatchSettings.from_config(section["matches"]),
                                  OmegaConf.to_container(cfg.embedding, resolve=True))


def step_settings(cfg: DictConfig, index: IndexSettings) -> StepSettings:
    """The steps' settings from their config sections (`discover:`, `dedup:`, ... `prompts:`, `grounding:`)."""
    prompts = OmegaConf.to_container(cfg.prompts, resolve=True)
    grounding = GroundingSettings(
        k=int(cfg.grounding.k), k_missing=int(cfg.grounding.k_missing), max_missing=int(cfg.grounding.max_missing),
        header=str(cfg.grounding.header), missing_header=str(cfg.grounding.missing_header), index=index,
    ) if cfg.grounding.enabled else None
    subgoals = subgoal_settings(cfg)
    return StepSettings(
        discover=DiscoverSettings(marker=str(cfg.discover.marker), min_lemmas=int(cfg.discover.min_lemmas),
                                  max_lemmas=int(cfg.discover.max_lemmas), seed_max_tokens=int(cfg.seeds.max_tokens),
                                  chars_per_token=float(cfg.seeds.chars_per_token), prompts=prompts),
        dedup=DedupSettings(threshold=float(cfg.dedup.threshold), k=int(cfg.dedup.k), index=index)
        if cfg.dedup.enabled else None,
        decontaminate=decontaminate_settings(cfg),
        judge=JudgeSettings(samples=int(cfg.judge.samples), prompts=prompts),
        formalize=FormalizeSettings(max_repairs=int(cfg.formalize.max_repairs), marker=str(cfg.formalize.marker),
                                    diagnose=bool(cfg.formalize.diagnose), prompts=prompts, grounding=grounding),
        faithfulness=faithfulness_settings(cfg, prompts, index) if cfg.faithfulness.enabled else None,
        trivial=TrivialSettings(tactic=str(cfg.trivial.tactic)),
        prove=ProveSettings(max_repairs=int(cfg.prove.max_repairs), marker=str(cfg.prove.marker),
                            env_lines=tuple(str(line) for line in cfg.prove.env_lines),
                            include_trivial=bool(cfg.prove.include_trivial), prompts=prompts, grounding=grounding,
                            sketch=subgoals is not None and subgoals.sketch_prompt, open_goals=subgoals is not None),
        subgoals=subgoals,
    )
