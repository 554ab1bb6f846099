"""What made a run's rows: the settings that decide them, and what a restart with other settings must be told.

A run directory's tables hold rows made under one set of deciding settings (the job and its mode, models and
sampling, budgets, dedup, faithfulness, seeds or input, the Lean backend and header). Rows made under others must
never be mixed in silently, so a start compares its deciding settings with those recorded for every table that
already holds rows, and refuses by name when they differ. Settings that change only speed or placement (tagged
`speed` in their schema: `conf.schema.speed_keys`) and sections a job does not read (`resume.unused`) are not
deciding.

Settings are read without resolving interpolations: `${package_dir:pipelines/demo_seeds}` is the same setting on
every node and in every unpacked copy of the project, wherever it resolves.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from fnmatch import fnmatchcase
from typing import Any

from conf import schema

# The key that records which job wrote a table (a `mine` table is not an `evaluate` table).
JOB_KEY = "job"
# Characters of a value shown in a refusal before it is cut (a prompt is long; its start tells which one it was).
SHOWN_VALUE_CHARS = 48


def flat_settings(config: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """A nested config as dotted keys to leaf values (lists and empty mappings are leaves)."""
    flat: dict[str, Any] = {}
    for key, value in config.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            flat.update(flat_settings(value, f"{dotted}."))
        else:
            flat[dotted] = value
    return flat


def matches(key: str, patterns: Iterable[str]) -> bool:
    """Whether `key` is named by one of `patterns`: a glob (`stages.*`, `*` crosses dots) or a section (`ray` names
    `ray.address`)."""
    return any(fnmatchcase(key, pattern) or key.startswith(f"{pattern}.") for pattern in patterns)


def deciding_settings(job: str, config: Mapping[str, Any], not_deciding: Sequence[str],
                      known: Mapping[str, Any]) -> dict[str, Any]:
    """The settings that decide a job's rows: its name, every config leaf not named by `not_deciding`, and `known`
    values found at start (the Lean toolchain and Mathlib revision a project pins) in place of the config's."""
    settings = {key: value for key, value in flat_settings(config).items() if not matches(key, not_deciding)}
    settings.update(known)
    settings[JOB_KEY] = job
    return dict(sorted(settings.items()))


def fingerprint(settings: Mapping[str, Any]) -> str:
    """A digest of `settings`, equal for equal settings whatever their order."""
    return hashlib.sha256(json.dumps(settings, sort_keys=True, default=str).encode()).hexdigest()


def changed_settings(recorded: Mapping[str, Any], current: Mapping[str, Any]) -> dict[str, tuple[Any, Any]]:
    """Each key whose value differs between the recorded and the current settings: (recorded, current); a key on one
    side only is None on the other, but a key added to conf/ since (its `introduced` in the job's schema) counts as
    recorded with the value the older rows were made under (one of every entry of a mapping,
    `llm.sampling.*.answer_format`, for each entry)."""
    job = current.get(JOB_KEY)
    added = schema.introduced(job) if job in schema.JOBS else {}
    introduced = {key: value for pattern, value in added.items() for key in current
                  if fnmatchcase(key, pattern)}
    recorded = {**introduced, **recorded}
    keys = sorted(set(recorded) | set(current))
    return {key: (recorded.get(key), current.get(key)) for key in keys if recorded.get(key) != current.get(key)}


def shown(value: Any) -> str:
    """A setting's value as the command line writes it, cut when long."""
    text = json.dumps(value, default=str, ensure_ascii=False) if not isinstance(value, str) else value
    text = " ".join(text.split())
    return text if len(text) <= SHOWN_VALUE_CHARS else f"{text[:SHOWN_VALUE_CHARS]}…"


def refusal(run: str, changes: Mapping[str, tuple[Any, Any]]) -> str:
    """The one line that refuses a start whose deciding settings differ from the run's: each key with both values,
    and the two ways on."""
    differences = ", ".join(f"{key}={shown(old)} (now {shown(new)})" for key, (old, new) in changes.items())
    return (f"{run} holds rows made with other settings: {differences}. Start in another run_dir, or carry on with "
            f"these rows knowingly with resume.accept_changes=[{','.join(changes)}] (run.json records it)")


def unrecorded_tables(manifest: Mapping[str, Any] | None, tables_with_rows: Iterable[str]) -> list[str]:
    """The tables holding rows whose deciding settings `manifest` (None: there is no run.json) does not record, or
    records empty: nothing says which settings made their rows, so no start may claim that its own did unasked."""
    recorded = (manifest or {}).get("tables") or {}
    return [table for table in tables_with_rows if not (recorded.get(table) or {}).get("settings")]


class ChangedSettings(ValueError):
    """A start's deciding settings differ from those the run directory's rows were made with: each differing key with
    (recorded, current)."""

    def __init__(self, changes: Mapping[str, tuple[Any, Any]]) -> None:
        super().__init__(", ".join(changes))
        self.changes = dict(changes)


def claim(manifest: dict[str, Any], tables: Sequence[str], tables_with_rows: Iterable[str], settings: Mapping[str, Any],
          accept_changes: Sequence[str], now: str) -> dict[str, Any]:
    """The manifest after a start that writes `tables` under `settings`: each table's settings and fingerprint
    recorded, and the changes `accept_changes` allowed kept with the time they were accepted. A change to a table
    that holds rows and was not accepted is `ChangedSettings`; a table without rows takes the new settings."""
    recorded = manifest.get("tables", {})
    changes: dict[str, tuple[Any, Any]] = {}
    for table in tables_with_rows:
        if table in recorded:
            changes.update(changed_settings(recorded[table]["settings"], settings))
    refused = {key: change for key, change in changes.items() if not matches(key, accept_changes)}
    if refused:
        raise ChangedSettings(refused)
    updated = {**manifest, "tables": {**recorded}}
    if changes:
        accepted = {key: list(change) for key, change in changes.items()}
        updated["accepted_changes"] = [*manifest.get("accepted_changes", []), {"at": now, "changes": accepted}]
    for table in tables:
        updated["tables"][table] = {"job": settings[JOB_KEY], "fingerprint": fingerprint(settings),
                                    "settings": dict(settings)}
    return updated
