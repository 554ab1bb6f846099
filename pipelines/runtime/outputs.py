"""Where a job may write its output folder, and when it may replace what is there.

`report`, `export`, `contribute` and `index` replace what an earlier start wrote, so that no stale file stands beside
the new ones. That is safe only in a folder the job made: each one marks the folders it writes with a file naming it
(`.folklore-report`, ...) and writes only into a folder that is absent, empty or marked as its own. An output folder
in a run is one folder directly in it, never the run itself, a folder above it or one of the run's own tables and
files; one outside a run gets the checks a run directory gets, and never lies in or holds a tree no job writes into
(the seeds, a Mathlib checkout, the run). Every refusal is one `SetupError` naming the setting, before anything is
written.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import pyarrow.fs as pafs

from operators.llm.cache import CACHE_DIR
from operators.storage import is_uri, join, open_location
from pipelines.runtime.cli import SetupError
from pipelines.runtime.lease import LEASE
from pipelines.runtime.run_dir import MANIFEST, RunDir, replace_whole, unfit_reason
from pipelines.runtime.run_progress import PROGRESS
from pipelines.runtime.table_schemas import TABLE_SCHEMAS

MARKER_PREFIX = ".folklore-"
# The folder of the jobs' logs in a run (`logs/ray.log`, `logs/ray_session.json`).
RUN_LOGS = "logs"
# What a run directory holds of its own: no output folder takes one of these names, present or not.
RUN_ENTRIES = frozenset({*TABLE_SCHEMAS, MANIFEST, LEASE, PROGRESS, CACHE_DIR, RUN_LOGS})


def marker(job: str) -> str:
    """The name of the file that marks a folder as `job`'s own."""
    return f"{MARKER_PREFIX}{job}"


@dataclass(frozen=True)
class Found:
    """What stands where an output folder goes: nothing (`exists` false), a file (`is_folder` false), or a folder
    holding `entries` (names)."""

    exists: bool
    is_folder: bool = False
    entries: frozenset[str] = frozenset()


def name_refusal(name: str) -> str | None:
    """Why `name` cannot name a job's folder in a run, None when it can: one folder directly in the run, neither the run
    itself nor above it, nor one of the run's own tables and files (a report written there would take their place)."""
    if not name.strip():
        return "it is empty, which names the run directory itself"
    if is_uri(name) or PurePosixPath(name).is_absolute():
        return "it is an absolute location, not a folder in the run"
    parts = PurePosixPath(name).parts
    if not parts:
        return "it names the run directory itself"
    if ".." in parts:
        return "it leads out of the run directory"
    if len(parts) > 1:
        return "it is not one folder directly in the run"
    if parts[0] in RUN_ENTRIES:
        return f"it names the run's own {parts[0]}, which the run's jobs write"
    return None


def placement_refusal(path: Path, protected: Mapping[str, Path]) -> str | None:
    """Why the local folder `path` (absolute, links resolved) cannot hold a job's output, None when it can: the reasons
    a run directory is refused (`unfit_reason`), and a tree of `protected` (what it is -> its resolved path) that
    `path` is, lies in or holds."""
    unfit = unfit_reason(path)
    if unfit is not None:
        return f"it is {unfit}"
    for what, tree in protected.items():
        if path == tree:
            return f"it is {what}"
        if tree in path.parents:
            return f"it lies inside {what}"
        if path in tree.parents:
            return f"it holds {what}"
    return None


def refuse_run_inside(run_dir: str, tree: str, setting: str) -> None:
    """A `SetupError` when the local run directory `run_dir` is, or lies inside, the local tree `setting` names: a job
    that reads that tree (the seeds) would write into it, and its next start would read what the run wrote there."""
    if is_uri(run_dir) or is_uri(tree):
        return
    run, root = Path(run_dir).expanduser().resolve(), Path(tree).expanduser().resolve()
    if run == root or root in run.parents:
        raise SetupError(f"run_dir={run_dir} lies inside {setting}={tree}, which the job reads and never writes into: "
                         "put the run directory elsewhere")


def replace_refusal(job: str, found: Found) -> str | None:
    """Why `job` may not write into the folder `found` describes, replacing what it wrote there before; None when it
    may: the folder is absent, empty, or holds the job's marker."""
    if found.exists and not found.is_folder:
        return "it is a file, not a folder"
    if not found.entries or marker(job) in found.entries:
        return None
    return f"it holds files {job} did not write (no {marker(job)} in it), which a start of {job} would replace"


def found_at(filesystem: pafs.FileSystem, path: str) -> Found:
    """What stands at `path` on `filesystem` (a link followed)."""
    info = filesystem.get_file_info(path)
    if info.type == pafs.FileType.NotFound:
        return Found(exists=False)
    if info.type != pafs.FileType.Directory:
        return Found(exists=True)
    listing = filesystem.get_file_info(pafs.FileSelector(path))
    return Found(exists=True, is_folder=True, entries=frozenset(entry.base_name for entry in listing))


@dataclass(frozen=True)
class Output:
    """A job's output folder, its place checked: where it is (filesystem, path, location as the user reads it) and
    the setting that named it, for the messages."""

    job: str
    setting: str
    value: str
    filesystem: pafs.FileSystem
    path: str
    location: str

    def check_own(self) -> None:
        """A `SetupError` unless the folder is absent, empty or marked as the job's own: what the job replaces there
        must be what it wrote."""
        reason = replace_refusal(self.job, found_at(self.filesystem, self.path))
        if reason is not None:
            raise refusal(self.setting, self.value, self.job, reason,
                          "name a new or empty folder, or move those files away")

    def claim(self) -> None:
        """Create the folder (when absent) and mark it as the job's own, before the job writes into it."""
        def write(temporary: str) -> None:
            with self.filesystem.open_output_stream(temporary) as stream:
                stream.write(f"Written by folklore {self.job}, which replaces what it wrote here on its next start.\n"
                             .encode())

        replace_whole(self.filesystem, f"{self.path}/{marker(self.job)}", write)

    def empty(self) -> None:
        """Remove what an earlier start of the job wrote into the folder, keeping it marked (`check_own` passed)."""
        self.filesystem.delete_dir_contents(self.path, missing_dir_ok=True)
        self.claim()


def refusal(setting: str, value: str, job: str, reason: str, advice: str) -> SetupError:
    """The one line that refuses an output folder: the setting as typed, why, and what to do instead."""
    return SetupError(f"{setting}={value} cannot hold the output of {job}: {reason}; {advice}")


def run_output(run: RunDir, setting: str, value: str, job: str, name: str | None = None) -> Output:
    """The folder `name` (by default `value`, the setting's value) directly in `run` as `job`'s output, its place
    checked (`name_refusal`; locally, not a link leading elsewhere); a `SetupError` naming `setting` otherwise."""
    name = value if name is None else name
    reason = name_refusal(name)
    advice = f"name a folder of its own directly in the run, such as {job}/"
    if reason is not None:
        raise refusal(setting, value, job, reason, advice)
    folder = PurePosixPath(name).parts[0]
    path = join(run.path, folder)
    if isinstance(run.filesystem, pafs.LocalFileSystem) and Path(path).resolve() != Path(path):
        raise refusal(setting, value, job, f"it is a link to {Path(path).resolve()}", advice)
    return Output(job, setting, value, run.filesystem, path, join(run.uri, folder))


def placed_output(setting: str, value: str, job: str, run: RunDir | None,
                  protected: Mapping[str, str] | None = None) -> Output:
    """The folder `value` (a path or URI) as `job`'s output: one inside `run` is `run_output`'s; one elsewhere gets the
    checks a run directory gets and must not be, lie in or hold a local tree of `protected` (what it is -> its
    location) or the run; a `SetupError` naming `setting` otherwise."""
    filesystem, path = open_location(value)
    if run is not None and filesystem.equals(run.filesystem) and (path == run.path
                                                                  or path.startswith(f"{run.path.rstrip('/')}/")):
        return run_output(run, setting, value, job, path[len(run.path):].lstrip("/") or ".")
    location = value if is_uri(value) else path
    if isinstance(filesystem, pafs.LocalFileSystem):
        trees = {what: Path(where).expanduser().resolve() for what, where in (protected or {}).items()
                 if not is_uri(where)}
        if run is not None and isinstance(run.filesystem, pafs.LocalFileSystem):
            trees[f"the run directory {run.path}"] = Path(run.path)
        reason = placement_refusal(Path(path), trees)
        if reason is not None:
            raise refusal(setting, value, job, reason, "name a new or empty folder of its own elsewhere")
    return Output(job, setting, value, filesystem, path, location)
