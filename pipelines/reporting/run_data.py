"""A written run loaded for analysis: its candidates and discoveries (a mining or evaluate run) or its
formalizations (an autoformalize run) as polars frames, and its manifest.

Report, export and the notebook read a run the same way, from a local path or any pyarrow filesystem
URI, with the table schemas the pipelines wrote, so an empty or half-finished run still loads.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

import polars as pl
import pyarrow.fs as pafs

import conf
from operators.discover import DISCOVERY_SCHEMA
from operators.pipeline import PipelineError, named
from operators.rows.candidates import CANDIDATE_SCHEMA
from operators.rows.contributions import CONTRIBUTION_SCHEMA
from operators.rows.formalizations import FORMALIZATION_SCHEMA
from operators.stage import Stage
from operators.storage import open_location
from pipelines.reporting.stats import frame_of, is_simulated
from pipelines.runtime.run_dir import RunDir
from pipelines.runtime.table_schemas import MINING_RUN_TABLES, check_tables


def run_stages(manifest: dict[str, Any]) -> tuple[Stage, ...]:
    """The stages of a run's pipeline as its config records it (as listed: what replaced one under the run's config
    calls no LLM and checks no Lean either), or for a run recorded before `pipeline:` existed, the stages its job ran
    then (the `introduced` of its job's `pipeline` key in conf/schema, as resume reads it); a stage declared in a
    module this process cannot import is left out (its calls still count in the totals, not in a row of its own)."""
    config = manifest.get("config") or {}
    jobs = [table["job"] for table in (manifest.get("tables") or {}).values()]
    job = jobs[0] if jobs and jobs[0] in conf.schema.JOBS else "mine"
    stages = []
    for entry in config.get("pipeline") or conf.schema.introduced(job)["pipeline"]:
        try:
            stages.append(named(str(entry)))
        except PipelineError:
            continue
    return tuple(stages)


class RunNotFound(RuntimeError):
    """The run directory holds no table of the kind asked for: nothing to report or export."""


@dataclass(frozen=True)
class RunData:
    """One run's tables and manifest (`config` is the run's composed config, empty if unknown)."""

    uri: str
    candidates: pl.DataFrame
    discoveries: pl.DataFrame | None
    manifest: dict[str, Any]
    contributions: pl.DataFrame | None = None  # what `contribute` offered from it, once it ran

    @property
    def stages(self) -> tuple[Stage, ...]:
        """The stages of the run's pipeline (`run_stages`)."""
        return run_stages(self.manifest)

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
        observed = cast(int | None, self.candidates["success_at"].max())  # an integer column
        return int(observed) if observed is not None else 0


@dataclass(frozen=True)
class FormalizationRun:
    """One autoformalize run's formalizations table and manifest (`config` as in `RunData`)."""

    uri: str
    formalizations: pl.DataFrame
    manifest: dict[str, Any]

    @property
    def simulated(self) -> bool:
        """True when any row came from a simulated LLM or Lean."""
        return is_simulated(self.formalizations)

    @property
    def config(self) -> dict[str, Any]:
        """The config the run was started with, as recorded in its manifest."""
        return self.manifest.get("config") or {}

    @property
    def alpha(self) -> float | None:
        """The faithfulness threshold the run judged with (`faithfulness.alpha`), None when not recorded."""
        configured = (self.config.get("faithfulness") or {}).get("alpha")
        return float(configured) if configured is not None else None


def _run_dir(location: str) -> RunDir:
    """The run directory at `location`, which must exist: RunDir would create it, leaving an empty run behind."""
    filesystem, path = open_location(location)
    if filesystem.get_file_info(path).type != pafs.FileType.Directory:
        raise RunNotFound(f"{location} is not a directory: no run to read")
    return RunDir(location)


def _manifest(run: RunDir) -> dict[str, Any]:
    """The run's run.json, empty when it has none (a run killed before writing it); one that cannot be read is
    `ForeignContents`."""
    return run.read_manifest() or {}


def _mining_run(run: RunDir) -> RunData:
    check_tables(run, MINING_RUN_TABLES)
    candidates = frame_of(run.read("candidates", CANDIDATE_SCHEMA))
    discoveries = frame_of(run.read("discoveries", DISCOVERY_SCHEMA)) if run.files("discoveries") else None
    contributions = (frame_of(run.read("contributions", CONTRIBUTION_SCHEMA)) if run.files("contributions")
                     else None)
    return RunData(run.uri, candidates, discoveries, _manifest(run), contributions)


def _formalization_run(run: RunDir) -> FormalizationRun:
    check_tables(run, ("formalizations",))
    return FormalizationRun(run.uri, frame_of(run.read("formalizations", FORMALIZATION_SCHEMA)), _manifest(run))


def load_run(location: str) -> RunData:
    """Read the run at `location`; raises RunNotFound when it has no candidates table."""
    run = _run_dir(location)
    if not run.files("candidates"):
        raise RunNotFound(f"{run.uri} has no candidates/ table: is it a run directory?")
    return _mining_run(run)


def load_formalizations(location: str) -> FormalizationRun:
    """Read the autoformalize run at `location`; raises RunNotFound when it has no formalizations table."""
    run = _run_dir(location)
    if not run.files("formalizations"):
        raise RunNotFound(f"{run.uri} has no formalizations/ table: is it an autoformalize run directory?")
    return _formalization_run(run)


def load_any(location: str) -> RunData | FormalizationRun:
    """Read whichever run is at `location` (candidates first, then formalizations), for tools such as the report
    that handle both; raises RunNotFound when it has neither table."""
    run = _run_dir(location)
    if run.files("candidates"):
        return _mining_run(run)
    if run.files("formalizations"):
        return _formalization_run(run)
    raise RunNotFound(f"{run.uri} has neither a candidates/ nor a formalizations/ table: is it a run directory?")
