"""A written run loaded for analysis: its candidates and discoveries as polars frames, and its manifest.

Report, export and the notebook read a run the same way, from a local path or any pyarrow filesystem
URI, with the table schemas the pipelines wrote, so an empty or half-finished run still loads.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow.fs as pafs

from operators.discover import DISCOVERY_SCHEMA
from operators.rows.candidates import CANDIDATE_SCHEMA
from pipelines.run_dir import MANIFEST, RunDir
from pipelines.stats import is_simulated


class RunNotFound(RuntimeError):
    """The run directory holds no candidates table: nothing to report or export."""


@dataclass(frozen=True)
class RunData:
    """One run's tables and manifest (`config` is the run's composed config, empty if unknown)."""

    uri: str
    candidates: pl.DataFrame
    discoveries: pl.DataFrame | None
    manifest: dict[str, Any]

    @property
    def simulated(self) -> bool:
        """True when any candidate came from a simulated LLM or Lean."""
        return is_simulated(self.candidates)

    @property
    def config(self) -> dict[str, Any]:
        """The config the run was started with, as recorded in its manifest."""
        return self.manifest.get("config") or {}

    def max_repairs(self) -> int:
        """K of the prove stage as the run was configured; else the most repairs any proof needed."""
        configured = (self.config.get("prove") or {}).get("max_repairs")
        if configured is not None:
            return int(configured)
        observed = self.candidates["success_at"].max()
        return int(observed) if observed is not None else 0


def load_run(location: str) -> RunData:
    """Read the run at `location`; raises RunNotFound when it has no candidates table."""
    filesystem, path = (pafs.FileSystem.from_uri(location) if "://" in location
                        else (pafs.LocalFileSystem(), str(Path(location).expanduser().resolve())))
    if filesystem.get_file_info(path).type != pafs.FileType.Directory:
        raise RunNotFound(f"{location} is not a directory: no run to read")
    run = RunDir(location)
    if not run.files("candidates"):
        raise RunNotFound(f"{run.uri} has no candidates/ table: is it a run directory?")
    candidates = pl.from_arrow(run.read("candidates", CANDIDATE_SCHEMA))
    discoveries = pl.from_arrow(run.read("discoveries", DISCOVERY_SCHEMA)) if run.files("discoveries") else None
    path = f"{run.path}/{MANIFEST}"
    manifest: dict[str, Any] = {}
    if run.filesystem.get_file_info(path).type == pafs.FileType.File:
        with run.filesystem.open_input_stream(path) as stream:
            manifest = json.loads(stream.read().decode())
    return RunData(run.uri, candidates, discoveries, manifest)
