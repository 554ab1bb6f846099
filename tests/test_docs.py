"""The documentation says what the code does: README.md stays a front door, every relative link reaches a file,
every command in a fenced block names a job and sets only keys that job's config has, and every config key written in
backticks exists in some job's config. Pure: configs are composed with Hydra, nothing is started."""

from __future__ import annotations

import functools
import itertools
import re
import shlex
from collections.abc import Iterator
from fnmatch import fnmatchcase
from pathlib import Path

import pytest
from hydra import compose, initialize_config_module
from hydra.core.global_hydra import GlobalHydra
from hydra.errors import HydraException
from omegaconf import DictConfig, OmegaConf

from conf import ConfigError

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
PAGES = [README, *sorted((REPO / "docs").glob("**/*.md"))]
MAX_README_LINES = 250

# Each job: the module `python -m` runs and the config it composes (`folklore JOB` runs the same).
JOBS = {
    "mine": "pipelines.mine",
    "plan": "pipelines.plan",
    "report": "pipelines.report",
    "export": "pipelines.export",
    "autoformalize": "pipelines.autoformalize",
    "evaluate": "pipelines.evaluate",
    "decontaminate": "pipelines.decontaminate",
    "index": "pipelines.index",
    "check": "lean_pool.check",
    "contribute": "pipelines.contribute",
}
MODULE_JOBS = {module: job for job, module in JOBS.items()}
# Modules a fenced block may run that are not jobs: setting up and testing.
OTHER_MODULES = {"venv", "pip", "pytest"}
# `folklore plan` sends `plan.*` to conf/plan.yaml and everything else to conf/mine.yaml.
PLAN_KEY = "plan"
# `autoformalize mode=X` is short for `autoformalize.mode=X`.
SHORTHANDS = {"autoformalize": {"mode": "autoformalize.mode"}}

LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```[^\n]*\n(.*?)^```", re.DOTALL | re.MULTILINE)
CODE_SPAN = re.compile(r"`([^`\n]+)`")
DOTTED_KEY = re.compile(r"^[a-z_]+(\.[a-z_*]+)+$")
SEPARATORS = {"&&", "||", ";", "|"}


def relative_links(page: Path) -> Iterator[str]:
    """Targets of the page's markdown links that point into the repository (no URL, no bare anchor)."""
    for target in LINK.findall(page.read_text()):
        if not re.match(r"^[a-z][a-z0-9+.-]*:", target) and not target.startswith("#"):
            yield target.split("#", 1)[0]


def fenced_lines(page: Path) -> Iterator[str]:
    """Each logical line of the page's fenced code blocks, backslash continuations joined."""
    for block in FENCE.findall(page.read_text()):
        yield from block.replace("\\\n", " ").splitlines()


def commands(line: str) -> Iterator[tuple[str, list[str]]]:
    """(job or module, arguments) of every `folklore JOB ...` and `python -m MODULE ...` in a shell line; a job is
    returned as itself, a module that is not a job as `module:NAME`."""
    try:
        words = shlex.split(line, comments=True)
    except ValueError:
        return
    for index, word in enumerate(words):
        name = None
        if word == "folklore" and index + 1 < len(words):
            name, rest = words[index + 1], words[index + 2:]
        elif re.fullmatch(r"python3?", word) and words[index + 1:index + 2] == ["-m"] and index + 2 < len(words):
            module, rest = words[index + 2], words[index + 3:]
            name = MODULE_JOBS.get(module, f"module:{module}")
        if name is None or name.startswith("-"):
            continue
        arguments = []
        for argument in rest:
            if argument in SEPARATORS:
                break
            arguments.append(argument)
        yield name, arguments


def documented_commands() -> list[tuple[str, str, list[str]]]:
    """(page, job or module, arguments) of every command in a fenced block of README.md and docs/."""
    return [(str(page.relative_to(REPO)), name, arguments)
            for page in PAGES for line in fenced_lines(page) for name, arguments in commands(line)]


def loader_call(method: str, *args: str) -> list[str]:
    """A question to Hydra's config loader about conf/ (`list_groups`, `get_group_options`)."""
    with initialize_config_module(config_module="conf", version_base=None):
        return list(getattr(GlobalHydra.instance().config_loader(), method)(*args))


@functools.cache
def groups() -> frozenset[str]:
    """The config groups under conf/ (`llm`, `lean`, `llm/engines`, ...)."""
    found, pending = set(), [""]
    while pending:
        parent = pending.pop()
        for group in loader_call("list_groups", parent):
            path = f"{parent}/{group}" if parent else group
            found.add(path)
            pending.append(path)
    return frozenset(found)


@functools.cache
def composed(job: str, selections: tuple[str, ...] = ()) -> DictConfig:
    """conf/JOB.yaml composed with group choices only, as the job reads it (unresolved: nothing is looked up)."""
    try:
        with initialize_config_module(config_module="conf", version_base=None):
            return compose(config_name=job, overrides=list(selections))
    except HydraException as error:
        raise ConfigError(str(error).split("\n", 1)[0]) from None


def has_key(cfg: DictConfig, key: str) -> bool:
    """Whether the dotted `key` is a path of `cfg` (its value may be null or `???`, still to be given)."""
    node: object = OmegaConf.to_container(cfg, resolve=False)
    for part in key.split("."):
        if not isinstance(node, dict) or part not in node:
            return False
        node = node[part]
    return True


def split_override(argument: str) -> tuple[str, str] | None:
    """(key, value) of a `key=value` override; None for what is not one (a path, a flag, `+key=`, `~key`)."""
    argument = argument.strip("[]") if argument.startswith("[") else argument
    if argument.startswith(("+", "~", "-")) or "=" not in argument:
        return None
    key, value = argument.split("=", 1)
    return (key, value) if re.fullmatch(r"[A-Za-z_][\w.@/]*", key) else None


def is_group_choice(key: str) -> bool:
    return key in groups() or "/" in key or "@" in key


def unknown_overrides(job: str, arguments: list[str]) -> list[str]:
    """The `key=value` overrides of `folklore JOB ARGUMENTS` whose key is not in the job's composed config."""
    settings = [pair for pair in map(split_override, arguments) if pair is not None]
    selections = tuple(f"{key}={value}" for key, value in settings if is_group_choice(key))
    unknown = []
    for key, _ in settings:
        if is_group_choice(key):
            continue
        key = SHORTHANDS.get(job, {}).get(key, key)
        if job == PLAN_KEY:
            config = composed(PLAN_KEY) if key.split(".")[0] == PLAN_KEY else composed("mine", selections)
        else:
            config = composed(job, selections)
        if not has_key(config, key):
            unknown.append(key)
    return unknown


@functools.cache
def every_config() -> tuple[DictConfig, ...]:
    """Every job's config as composed by default, and the config of the first job that takes each other option of a
    group with several (for a nested group such as llm/engines, under each option of its parent), so keys that only
    an option brings (`lean.kimina.url`, `llm.serve.engines.smollm2.model_source`) are known too."""
    configs = [composed(job) for job in JOBS]
    for group in sorted(groups()):
        options = loader_call("get_group_options", group)
        if len(options) < 2:
            continue
        parent = group.rsplit("/", 1)[0] if "/" in group else None
        contexts = [(f"{parent}={option}",) for option in loader_call("get_group_options", parent)] if parent else [()]
        for option in options:
            for context, job in itertools.product(contexts, JOBS):
                try:
                    configs.append(composed(job, (*context, f"{group}={option}")))
                    break
                except ConfigError:
                    continue
    return tuple(configs)


@functools.cache
def every_key() -> frozenset[str]:
    """Every dotted key path of every composed config (sections and leaves)."""
    keys: set[str] = set()

    def walk(node: object, prefix: str) -> None:
        if isinstance(node, dict):
            for name, value in node.items():
                path = f"{prefix}.{name}" if prefix else str(name)
                keys.add(path)
                walk(value, path)

    for config in every_config():
        walk(OmegaConf.to_container(config, resolve=False), "")
    return frozenset(keys)


def backticked_keys(page: Path) -> Iterator[str]:
    """Code spans of the page outside fenced blocks that look like a job's config key: lower-case dotted names (a `*`
    allowed after the first part) whose first part is a top-level key of some job's config."""
    text = FENCE.sub("", page.read_text())
    top_level = {key for config in every_config() for key in config}
    for span in CODE_SPAN.findall(text):
        if DOTTED_KEY.fullmatch(span) and span.split(".")[0] in top_level:
            yield span


def test_the_readme_is_a_front_door() -> None:
    lines = len(README.read_text().splitlines())
    assert lines <= MAX_README_LINES, f"README.md has {lines} lines; move detail to docs/"


@pytest.mark.parametrize("page", PAGES, ids=lambda page: str(page.relative_to(REPO)))
def test_every_relative_link_reaches_a_file(page: Path) -> None:
    missing = [target for target in relative_links(page) if target and not (page.parent / target).exists()]
    assert not missing, f"{page.relative_to(REPO)} links to what does not exist: {missing}"


@pytest.mark.slow
def test_every_documented_command_names_a_job_and_sets_keys_it_has() -> None:
    commands_found = documented_commands()
    assert any(name == "mine" for _, name, _ in commands_found), "no mining command found: the parser is broken"
    problems = []
    for page, name, arguments in commands_found:
        if name.startswith("module:"):
            if name.removeprefix("module:") not in OTHER_MODULES:
                problems.append(f"{page}: python -m {name.removeprefix('module:')} is not a job")
        elif name not in JOBS:
            problems.append(f"{page}: folklore {name} is not a job")
        else:
            try:
                unknown = unknown_overrides(name, arguments)
            except ConfigError as error:
                problems.append(f"{page}: folklore {name} {' '.join(arguments)}: {error}")
                continue
            problems += [f"{page}: folklore {name} ... {key}=: no such key" for key in unknown]
    assert not problems, "\n".join(problems)


@pytest.mark.slow
def test_every_backticked_config_key_exists() -> None:
    keys = every_key()
    problems = [f"{page.relative_to(REPO)}: `{key}`" for page in PAGES for key in backticked_keys(page)
                if key not in keys and ("*" not in key or not any(fnmatchcase(known, key) for known in keys))]
    assert not problems, "config keys the docs name that no job's config has:\n" + "\n".join(problems)
