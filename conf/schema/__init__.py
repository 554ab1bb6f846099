"""The config's schema: each job's keys, with their types, help, ranges and whether they decide a run's rows.

`conf.compose_config` checks every composed config against its job's schema; `--help` reads the help lines here; a
resume reads which keys change only speed (`speed_keys`) and what runs recorded before a key existed were made under
(`introduced`).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

from conf.schema import fields
from conf.schema.fields import UNSET, Key, annotation_at, choices_of, keys, takes_any_key
from conf.schema.jobs import Check, Export, IndexJob, Plan, Report, Status
from conf.schema.mining import Autoformalize, Contribute, Evaluate, Mine
from conf.schema.retrieval import DecontaminateJob

# Each config of conf/ a command composes -> its schema.
JOBS: dict[str, type] = {
    "mine": Mine,
    "evaluate": Evaluate,
    "autoformalize": Autoformalize,
    "contribute": Contribute,
    "report": Report,
    "status": Status,
    "export": Export,
    "index": IndexJob,
    "plan": Plan,
    "decontaminate": DecontaminateJob,
    "check": Check,
}

__all__ = ["JOBS", "Key", "choices", "help_line", "introduced", "job_keys", "key_at", "speed_keys", "takes_any_key"]


@functools.cache
def job_keys(name: str) -> dict[str, Key]:
    """Every key of a job's schema by dotted path (`*` where the user names the key)."""
    return {key.path: key for key in keys(JOBS[name])}


def help_line(name: str, path: str) -> str:
    """The help of the key at `path` in job `name`'s schema, empty when the schema does not know the key."""
    found = key_at(name, path)
    return found.setting.help if found else ""


def key_at(name: str, path: str | Sequence[str]) -> Key | None:
    """The key of job `name`'s schema at a concrete `path`, dotted or as its segments (an entry of a user-named
    mapping takes the mapping's help), None when the schema has none."""
    return fields.key_at(JOBS[name], path)


def choices(path: str) -> tuple[Any, ...]:
    """The values the key at `path` may take (its `Literal`), in the first job whose schema has it; empty when any
    value of its type will do."""
    for schema in JOBS.values():
        annotation = annotation_at(schema, path)
        if annotation is not None:
            return choices_of(annotation)
    return ()


@functools.cache
def speed_keys() -> tuple[str, ...]:
    """The keys of every job that change only a run's speed or placement, as dotted patterns (`*`: any entry)."""
    return tuple(sorted({key.path for name in JOBS for key in job_keys(name).values() if key.speed}))


def introduced(name: str) -> dict[str, Any]:
    """Deciding keys of job `name` added after runs were recorded -> the value those runs' rows were made under."""
    return {path: key.setting.introduced for path, key in job_keys(name).items()
            if key.setting.introduced is not UNSET}
