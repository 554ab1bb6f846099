"""The contribution job: a mining run's proved lemmas offered as changes Mathlib would take (the job reads the
run's candidates instead of claiming the run), the Mathlib files and names it works against, the Lean check of a
patched file, and where its outputs go. `pipelines.contribute` is the command that runs it.

The job writes its own `contributions/` table into the run whole, each start replacing the last: what it offers
depends on the checkout and settings of that start alone, so nothing of an earlier start is mixed in. Patches and
descriptions go under `out` (default `<run_dir>/contribute`), a folder of contribute's own
(`pipelines.runtime.outputs`): never the run's other folders, the checkout or the seeds tree.
"""

from __future__ import annotations

import asyncio
from collections import Counter, defaultdict
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pyarrow.fs as pafs
import pyarrow.parquet as pq
import ray
from omegaconf import DictConfig

from lean_pool.pool import checker_provenance
from operators.contribute.description import file_description
from operators.contribute.patches import (
    changed_declarations,
    claim_names,
    declared_names,
    home_namespace,
    mined_name,
    placed,
    refused_blocks,
)
from operators.contribute.placement import unified_diff
from operators.retrieval.declaration_index import TABLE_FILE, node_local
from operators.rows.contributions import (
    ERROR_INFRA,
    FILE_REJECTED,
    NOT_PLACED,
    OFFERED,
    PENDING,
    STATUSES,
    contributions_table,
    new_contribution,
    offer_refusal,
)
from operators.storage import StorageFull, is_uri, join, open_location, refused_write
from pipelines.reporting.run_data import load_run
from pipelines.reporting.summary import (
    Closing,
    closing_lines,
    rows_by_status,
    written_cost,
)
from pipelines.runtime.cli import SetupError, WorkWritten
from pipelines.runtime.index_check import index_location
from pipelines.runtime.job import Job, started
from pipelines.runtime.outputs import Output, marker, placed_output, run_output
from pipelines.runtime.table_schemas import MINING_RUN_TABLES, check_tables
from pipelines.runtime.waves import execute_collecting
from pipelines.runtime.wiring import plan_steps, streamed

TABLE = "contributions"
# Where patches and descriptions go under `out`, and their suffixes after the Mathlib file's path.
PATCHES, DESCRIPTIONS = "patches", "descriptions"
PATCH_SUFFIX, DESCRIPTION_SUFFIX = ".patch", ".md"
# `out` when the command line names none: inside the run.
DEFAULT_OUT = "contribute"


class ContributeJob(Job):
    """A job over a mining run that already exists: it claims nothing in the run's manifest (its table is rebuilt
    whole by every start) and refuses a directory that holds no mining run."""

    JOB = "contribute"
    TABLES = (TABLE,)
    PLAN_TABLE = TABLE
    INPUTS = frozenset({PENDING})

    def __init__(self, cfg: DictConfig) -> None:
        filesystem, path = open_location(str(cfg.run_dir))
        if filesystem.get_file_info(path).type != pafs.FileType.Directory:
            raise SetupError(f"run_dir={cfg.run_dir} is not a directory: no mining run to contribute from")
        super().__init__(cfg)

    def claim_run_dir(self) -> dict[str, Any]:
        """The run's manifest as it is, its tables and the checkout checked, before anything starts: a file in a table
        folder that is not that table's is `ForeignContents` naming it (the readers' check, so `contribute`, `report`
        and `export` say the same of a run); a directory without a mining run, or a checkout that is not a directory,
        is a `SetupError`."""
        check_tables(self.run, MINING_RUN_TABLES)
        manifest = self.run.read_manifest()
        if manifest is None or not self.run.files("candidates"):
            raise SetupError(f"run_dir={self.run.uri} holds no mining run (no run.json or no candidates/ table)")
        self.manifest = manifest
        self.mathlib = MathlibFiles(self.mathlib_dir())
        self.mathlib.check()
        self.output = self.checked_output()
        return manifest

    def checked_output(self) -> Output:
        """Where patches and descriptions go (`out`, else `<run_dir>/contribute`), refused in one line before anything
        starts unless it is a folder of contribute's own: directly in the run and none of its tables, or elsewhere
        outside the checkout and the seeds tree; absent, empty or marked by an earlier start."""
        if self.cfg.out is None:
            output = run_output(self.run, "out", join(self.run.uri, DEFAULT_OUT), self.JOB, DEFAULT_OUT)
        else:
            seeds = ((self.manifest.get("config") or {}).get("seeds") or {}).get("root")
            trees = {f"the Mathlib checkout {self.mathlib.root}": self.mathlib.root,
                     **({f"the seeds tree {seeds}": str(seeds)} if seeds is not None else {})}
            output = placed_output("out", str(self.cfg.out), self.JOB, self.run, trees)
        output.check_own()
        return output

    @property
    def out(self) -> str:
        """Where patches and descriptions go."""
        return self.output.location

    def mathlib_dir(self) -> str:
        """The checkout the patches are against: `mathlib_dir`, else the run's own `seeds.root`."""
        if self.cfg.mathlib_dir is not None:
            return str(self.cfg.mathlib_dir)
        root = ((self.manifest.get("config") or {}).get("seeds") or {}).get("root")
        if root is None:
            raise SetupError(f"run_dir={self.run.uri} does not say which seeds.root it mined: give mathlib_dir=")
        return str(root)

    def checker(self) -> str:
        """The Lean that checks here, as a description says it."""
        lean = checker_provenance(self.lean_cfg)
        return f"Lean {lean['toolchain']}, Mathlib {lean['mathlib_rev']}"


def offered_rows(job: ContributeJob) -> tuple[list[dict[str, Any]], Counter[str]]:
    """A contribution row for each candidate of the run that is offered, and why the others are not."""
    cfg = job.cfg.contribute
    now = datetime.now(UTC)
    rows: list[dict[str, Any]] = []
    refused = Counter[str]()
    for candidate in load_run(job.run.uri).candidates.iter_rows(named=True):
        why = offer_refusal(candidate, list(cfg.statuses), float(cfg.min_faithfulness))
        if why is None:
            # a plain dict: locating, naming and shortening fill its columns in place, as the steps' rows are
            rows.append(dict(new_contribution(candidate, job.manifest["run_id"], job.simulated, now)))
        else:
            refused[why] += 1
    return rows, refused


def locate(rows: list[dict[str, Any]], seeds: dict[str, str | None], dropped_context: Sequence[str]) -> None:
    """The mined name and the namespace each lemma will live in (placement under the mined names); a lemma whose seed
    file the checkout lacks is `not_placed`."""
    for file, file_rows in by_file(rows).items():
        seed_text = seeds[file]
        if seed_text is None:
            for row in file_rows:
                row.update(status=NOT_PLACED, reason=f"{file} is not in the Mathlib checkout (or not UTF-8)")
            continue
        where = {p.candidate_id: p for p in placed(seed_text, file_rows, dropped_context, renamed=False).placements}
        for row in file_rows:
            spot = where[row["candidate_id"]]
            row.update(old_name=mined_name(row["statement"])[0], namespace=home_namespace(spot.namespace, spot.anchor))


def by_file(rows: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Pending rows grouped by their Mathlib file, in candidate order."""
    files: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        if row["status"] == PENDING:
            files[row["file"]].append(row)
    return dict(files)


def contribute(job: ContributeJob) -> tuple[list[dict[str, Any]], list[FileOutcome], Counter[str]]:
    """The method: offered rows located, named and shortened (a Ray Data plan), then each file placed, checked and
    written; the rows, the files and why the other candidates were not offered."""
    rows, refused = offered_rows(job)
    seeds = {file: job.mathlib.read(file) for file in {row["file"] for row in rows}}
    locate(rows, seeds, list(job.cfg.contribute.dropped_context))
    pending = [row for row in rows if row["status"] == PENDING]
    if pending:
        plan = streamed(ray.data.from_arrow(contributions_table(pending)), plan_steps(job, job.pipeline.stages),
                        job.board)
        done = {row["candidate_id"]: row for row in job.off_the_driver(execute_collecting, plan, job.ray_log)}
        rows = [done.get(row["candidate_id"], row) for row in rows]
    index = index_names(job.cfg)

    # `locate` made the rows of a file the checkout lacks `not_placed`: every pending row's file was read.
    read = {file: text for file, text in seeds.items() if text is not None}

    async def finish() -> list[FileOutcome]:
        files = by_file(rows)
        return list(await asyncio.gather(*(finish_file(job, file, read[file], file_rows, index)
                                           for file, file_rows in sorted(files.items()))))

    outcomes = asyncio.run(finish())
    write(job, rows, outcomes)
    return rows, outcomes, refused


def write(job: ContributeJob, rows: list[dict[str, Any]], outcomes: list[FileOutcome]) -> None:
    """This start's patches and descriptions under `out` (an earlier start's removed first) and `contributions/`."""
    with refused_patches_in_one_line(job.output):
        clear(job.output, [PATCHES, DESCRIPTIONS])
        job.output.claim()
        for outcome in outcomes:
            if outcome.patch is not None:
                paths = patch_paths(outcome.file)
                write_text(job.out, paths[PATCHES], outcome.patch)
                write_text(job.out, paths[DESCRIPTIONS], outcome.description or "")
    job.run.write_table(TABLE, contributions_table(rows))


def summary(job: ContributeJob, rows: list[dict[str, Any]], outcomes: list[FileOutcome],
            refused: Counter[str]) -> list[str]:
    """The closing block: what was written, the lemmas by status, how they were named and proved, why the other
    candidates were not offered, the cost, and how to apply a patch."""
    patches = sum(outcome.patch is not None for outcome in outcomes)
    written = {f"{TABLE}/": (job.run.table_uri(TABLE), f"{len(rows)} rows"),
               f"{PATCHES}/": (f"{job.out}/{PATCHES}", f"{patches} files"),
               f"{DESCRIPTIONS}/": (f"{job.out}/{DESCRIPTIONS}", f"{patches} files")}
    offered = [row for row in rows if row["name_source"] is not None]
    sources = Counter(row["name_source"] for row in offered)
    details = [f"names: {sources['original']} kept, {sources['llm']} from the LLM, {sources['checker']} from the "
               f"checker; proofs: {sum(bool(row['proof_tactic']) for row in rows)} replaced by a closing tactic",
               "not offered: " + (", ".join(f"{why} {count}" for why, count in refused.most_common()) or "none")]
    cost = job.cost_lines(written_cost([contributions_table(rows).select(["llm_calls", "lean_checks"])]))
    patches_at = f"{job.out}/{PATCHES}"
    patch = f"<file>.patch copied from {patches_at}" if is_uri(job.out) else f"{patches_at}/<file>.patch"
    hint = f"next: git -C {job.mathlib_dir()} apply --check {patch}, then without --check" if patches else None
    return closing_lines(Closing(job.run.uri, written, {TABLE: rows_by_status([r["status"] for r in rows], STATUSES)},
                                 details, cost, simulated=job.simulated, next_step=hint))

def run(cfg: DictConfig, work: WorkWritten) -> None:
    """Offer the proved lemmas of the run `cfg` names and print the closing block once the outputs are written
    (`work` marked then)."""
    with started(ContributeJob, cfg) as job:
        rows, outcomes, refused = contribute(job)
        lines = summary(job, rows, outcomes, refused)
        work.mark()
        print("\n".join(lines), flush=True)


@dataclass(frozen=True)
class MathlibFiles:
    """Read access to a Mathlib checkout, local or on object storage."""

    root: str

    def read(self, relative: str) -> str | None:
        """The text of a file of the checkout, None when it is not there or not readable as UTF-8."""
        filesystem, path = open_location(self.root)
        try:
            with filesystem.open_input_stream(f"{path}/{relative}") as stream:
                return stream.read().decode("utf-8")
        except (OSError, UnicodeDecodeError):
            return None

    def check(self) -> None:
        """A `SetupError` when the checkout is not a directory."""
        filesystem, path = open_location(self.root)
        if filesystem.get_file_info(path).type != pafs.FileType.Directory:
            raise SetupError(f"mathlib_dir={self.root} is not a directory (a Mathlib checkout, the parent of Mathlib/)")


def index_names(cfg: DictConfig) -> frozenset[str]:
    """Every declaration name of the declaration index at `index.dir` (empty without one)."""
    if cfg.index.dir is None:
        return frozenset()
    local = node_local(index_location(str(cfg.index.dir)))
    return frozenset(pq.read_table(local / TABLE_FILE, columns=["name"]).column("name").to_pylist())


def write_text(location: str, relative: str, text: str) -> str:
    """Write `text` to `relative` under `location` (local or a URI), replacing it; its full location."""
    filesystem, path = open_location(location)
    target = f"{path}/{relative}"
    filesystem.create_dir(target.rsplit("/", 1)[0], recursive=True)
    with filesystem.open_output_stream(target) as stream:
        stream.write(text.encode("utf-8"))
    return join(location, relative)


@contextmanager
def refused_patches_in_one_line(output: Output) -> Iterator[None]:
    """Turn a write `out` refused while this start's patches and descriptions were written (a full disk, a quota, a
    read-only filesystem) into one `StorageFull` naming `out`, once what was written of them is removed: no patch is
    left cut short, and the run's tables are as they were (`contributions/` is written after the patches)."""
    try:
        yield
    except Exception as error:
        reason = refused_write(error)
        if reason is None:
            raise
        with suppress(OSError):  # a read-only `out` took nothing of this start's to remove
            clear(output, [PATCHES, DESCRIPTIONS])
        raise StorageFull(f"{output.location} refused a write ({reason}): this start's patches and descriptions there "
                          "are removed and the run's tables are as they were, so nothing is lost; make room (or give "
                          "another out=DIR) and run the same command again") from None


def clear(output: Output, folders: Sequence[str]) -> None:
    """Remove what an earlier start wrote into these folders of contribute's own `output` (and its marker, when that
    is all the folder holds then), so this start's outputs stand alone."""
    filesystem, path = output.filesystem, output.path
    for folder in folders:
        if filesystem.get_file_info(f"{path}/{folder}").type == pafs.FileType.Directory:
            filesystem.delete_dir(f"{path}/{folder}")
    left = filesystem.get_file_info(pafs.FileSelector(path, allow_not_found=True))
    if [entry.base_name for entry in left] == [marker(output.job)]:
        filesystem.delete_file(f"{path}/{marker(output.job)}")


def patch_paths(file: str) -> Mapping[str, str]:
    """Where a Mathlib file's patch and description go under `out`."""
    return {PATCHES: f"{PATCHES}/{file}{PATCH_SUFFIX}", DESCRIPTIONS: f"{DESCRIPTIONS}/{file}{DESCRIPTION_SUFFIX}"}


@dataclass
class FileOutcome:
    """What one Mathlib file came to: its patch and description (None when no lemma of it is offered)."""

    file: str
    patch: str | None = None
    description: str | None = None


async def finish_file(job: ContributeJob, file: str, seed_text: str, rows: list[dict[str, Any]],
                      index: frozenset[str]) -> FileOutcome:
    """Place a file's named and shortened lemmas, check the patched file (read back, then through the pool, replay
    included), and on success mark its rows `offered` with where they went; the rows say why otherwise. The file's
    checks are counted on its first lemma."""
    cfg = job.cfg.contribute
    claim_names(rows, declared_names(seed_text), index)
    pending = [row for row in rows if row["status"] == PENDING]
    result = placed(seed_text, pending, list(cfg.dropped_context))
    refused = refused_blocks(result)
    for row in pending:
        if row["candidate_id"] in refused:
            row.update(status=FILE_REJECTED, reason="refused before Lean: " + "; ".join(refused[row["candidate_id"]]))
    if refused:
        pending = [row for row in pending if row["candidate_id"] not in refused]
        result = placed(seed_text, pending, list(cfg.dropped_context))
    if not pending:
        return FileOutcome(file)
    names = {placement.candidate_id: placement for placement in result.placements}
    added = [names[row["candidate_id"]].full_name for row in pending]
    problems = changed_declarations(seed_text, result.text, added)
    if problems:
        return reject(file, pending, FILE_REJECTED, "the patch would change the file: " + "; ".join(problems))
    check = await job.pool.check(result.text, timeout=float(cfg.file_timeout_s), mode="file", names=added)
    pending[0]["lean_checks"] += 1
    if check.infra_failure:
        return reject(file, pending, ERROR_INFRA, f"file check: Lean gave no verdict ({check.status})")
    if not check.ok:
        return reject(file, pending, FILE_REJECTED, "the patched file does not pass: " + "; ".join(check.reasons))
    replay = await job.pool.replay(result.text, names=added)
    if replay is not None:
        pending[0]["lean_checks"] += 1
        if replay.infra_failure:
            return reject(file, pending, ERROR_INFRA, f"file replay: no verdict ({replay.summary})")
        if not replay.accepted:
            return reject(file, pending, FILE_REJECTED, "the patched file fails its replay: "
                          + "; ".join(replay.reasons))
    paths = patch_paths(file)
    for row in pending:
        placement = names[row["candidate_id"]]
        row.update(status=OFFERED, namespace=placement.namespace, section=placement.section, anchor=placement.anchor,
                   line=placement.line, new_name=placement.full_name, patch=paths[PATCHES],
                   declaration=placement.text)
    description = file_description(job.cfg.description, file, job.manifest["run_id"], job.checker(), job.simulated,
                                   pending)
    return FileOutcome(file, unified_diff(file, seed_text, result.text), description)


def reject(file: str, rows: Sequence[dict[str, Any]], status: str, reason: str) -> FileOutcome:
    """Every pending lemma of a file with `status` and `reason`: nothing of the file is offered."""
    for row in rows:
        row.update(status=status, reason=reason)
    return FileOutcome(file)
