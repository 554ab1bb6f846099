"""The run directory: where a run's Parquet tables live, and what a resumed run must not do again.

A run directory is a local path or any pyarrow filesystem URI. Tables are directories of Parquet files
appended by Ray Data. Resuming is an anti-join: the ids already written with a finished status are
skipped. Before that, files a killed run left half-written are deleted (their rows were never
written), and rows that failed for infrastructure reasons are dropped from their files so that they
are asked again, without ever leaving two rows for one id.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Callable, Collection, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from operators.storage import (
    StorageError,
    StorageFull,
    first_line,
    is_uri,
    join,
    location_of,
    open_location,
    refused_write,
)

PARQUET_SUFFIX = ".parquet"
# Hex characters of the digest that names a file appended by `append_file` (128 bits: no two sets of ids collide).
FILE_DIGEST_CHARS = 32
MANIFEST = "run.json"
# The kinds of JSON value a manifest's field may be, by the name a message gives them; and two more: a time (an ISO
# 8601 string with a UTC offset) and null.
JSON_KINDS: dict[str, type | tuple[type, ...]] = {"an object": dict, "a list": list, "a string": str,
                                                  "an integer": int, "a number": (int, float)}
TIME = "an ISO 8601 time with a UTC offset"
NULL = "null"
# The fields of run.json that jobs and readers read, where present, and what each may be (a dotted path, `*` for every
# key of an object). run_id must be there, a string that is not empty.
MANIFEST_FIELDS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("run_id", ("a string",)),
    ("created_at", (TIME,)),
    ("config", ("an object",)),
    *((f"config.{section}", ("an object", NULL)) for section in ("seeds", "prompts", "formalize", "prove",
                                                                   "faithfulness")),
    ("config.seeds.root", ("a string", NULL)),
    ("config.prove.max_repairs", ("an integer", NULL)),
    ("config.faithfulness.alpha", ("a number", NULL)),
    ("tables", ("an object",)),
    ("tables.*", ("an object",)),
    ("tables.*.job", ("a string",)),
    ("tables.*.fingerprint", ("a string",)),
    ("tables.*.settings", ("an object",)),
    ("accepted_changes", ("a list",)),
)
# Columns a message about a foreign file names before it gives only their count.
SHOWN_COLUMNS = 3
# The system's own folders: no run belongs in them or under them.
SYSTEM_FOLDERS = ("/bin", "/boot", "/dev", "/etc", "/lib", "/lib32", "/lib64", "/proc", "/sbin", "/sys", "/usr")
# The folder holding the project's packages (the checkout, or site-packages when installed).
PROJECT_ROOT = Path(__file__).resolve().parents[2]


class UnfitRunDir(StorageError):
    """A run directory that is a place no run belongs (the filesystem root, a home or the project's own folders)."""


class ForeignContents(StorageError):
    """What a run directory holds is not the run's own: a file in a table folder that is not that table's, a run.json
    that cannot be read, or tables without a run.json; reading it on would mix rows or claims that do not belong."""


def type_fits(written: pa.DataType, table: pa.DataType) -> bool:
    """Whether a column written as `written` holds the table's `table` type: the same type, or (in a file written
    before a struct gained a field) a struct or list of structs with some of its fields, each fitting."""
    if written.equals(table):
        return True
    if pa.types.is_struct(written) and pa.types.is_struct(table):
        fields = {field.name: field.type for field in table}
        return all(field.name in fields and type_fits(field.type, fields[field.name]) for field in written)
    if pa.types.is_list(written) and pa.types.is_list(table):
        return type_fits(written.value_type, table.value_type)
    return False


def schema_difference(written: pa.Schema, table: pa.Schema, later: Collection[str] = ()) -> str | None:
    """How the columns of a file differ from its table's (the columns it lacks, has beyond them or holds with another
    type), None when they are the table's; a file may lack the `later` columns, which the table gained after it was
    written."""
    missing = [name for name in table.names if name not in written.names and name not in later]
    extra = [name for name in written.names if name not in table.names]
    retyped = [f"{field.name} is {field.type}, not {table.field(field.name).type}" for field in written
               if field.name in table.names and not type_fits(field.type, table.field(field.name).type)]
    parts = [*([f"lacks {listed(missing)}"] if missing else []),
             *([f"has {listed(extra)} beyond them"] if extra else []), *retyped]
    return "; ".join(parts) or None


def listed(columns: Sequence[str]) -> str:
    """Columns named for a message, the first `SHOWN_COLUMNS` of them when there are more."""
    shown = ", ".join(columns[:SHOWN_COLUMNS])
    more = f"… ({len(columns)} columns)" if len(columns) > SHOWN_COLUMNS else ""
    return f"{shown}{more}"


def unfit_reason(path: Path) -> str | None:
    """Why the local folder `path` (absolute, symlinks resolved) cannot be a run's directory, None when it can: a
    run writes tables, logs, a cache and run.json into it, and resuming deletes what it takes for half-written files
    there, so it must be a folder of the run's own."""
    home = Path.home().resolve()
    packages = [folder for folder in PROJECT_ROOT.iterdir() if (folder / "__init__.py").is_file()]
    if path.parent == path:
        return "the filesystem root"
    if path == home or path in home.parents:
        return "your home directory or a folder holding it"
    if path.parent.parent == path.parent:
        return "a folder directly under the filesystem root, shared with everything else"
    if path == PROJECT_ROOT:
        return "the project's own folder"
    for folder in [*packages, *map(Path, SYSTEM_FOLDERS)]:
        if path == folder or folder in path.parents:
            return f"in {folder}, which holds the {'project' if folder in packages else 'system'}'s own files"
    return None


def data_files(filesystem: pafs.FileSystem, directory: str) -> list[str]:
    """The files under `directory`, recursively and sorted, without the hidden and temporary ones (`.x`, `_x`)
    that writers and editors leave beside data."""
    entries = filesystem.get_file_info(pafs.FileSelector(directory, recursive=True))
    return sorted(entry.path for entry in entries
                  if entry.type == pafs.FileType.File and not entry.base_name.startswith((".", "_")))


def write_whole(filesystem: pafs.FileSystem, path: str, table: pa.Table) -> str:
    """Write `table` to the Parquet file `path` (new or replaced) whole (`replace_whole`); `path`."""
    return replace_whole(filesystem, path, lambda temporary: pq.write_table(table, temporary, filesystem=filesystem))


def replace_whole(filesystem: pafs.FileSystem, path: str, write: Callable[[str], None]) -> str:
    """Have `write` write the file `path` (new or replaced) under a hidden name beside it and then rename it, so a
    reader (or a resumed run) never sees it half-written and a write the disk refuses leaves the old file as it was;
    `path`."""
    directory, base = path.rsplit("/", 1)
    filesystem.create_dir(directory, recursive=True)
    temporary = f"{directory}/.{base}.{uuid.uuid4().hex}.tmp"
    try:
        write(temporary)
    except BaseException:
        _delete_if_there(filesystem, temporary)
        raise
    filesystem.move(temporary, path)
    return path


def _delete_if_there(filesystem: pafs.FileSystem, path: str) -> None:
    try:
        filesystem.delete_file(path)
    except OSError:  # not written at all, or not removable either: the resume's `prepare` retries
        return


@contextmanager
def refused_writes_in_one_line(location: str, tables: Sequence[str]) -> Iterator[None]:
    """Turn a write the run directory at `location` refused (a full disk, a quota, a read-only filesystem: anywhere in
    the job, a Ray worker's error included) into one `StorageFull` naming the run directory, once the files of
    `tables` that the failed writes left half-written are deleted: the rows written before stay, whole. A refusal
    already told in one line (another location's, `contribute`'s `out`) stays as told."""
    try:
        yield
    except StorageFull:
        raise
    except Exception as error:
        reason = refused_write(error)
        if reason is None:
            raise
        run = RunDir(location)
        removed = sum(run.remove_half_written(table) for table in tables)
        raise StorageFull(f"{run.uri} refused a write ({reason}): the rows written before are kept and {removed} "
                          "half-written files removed, so nothing is lost; make room (or move the run directory) "
                          "and run the same command again to resume") from None


def append_file(filesystem: pafs.FileSystem, directory: str, table: pa.Table, id_column: str) -> str:
    """Add `table` to the table stored in `directory` as a Parquet file (`write_whole`) named by the ids it holds; the
    file's path. The same rows written again, by a task Ray retried after its node was lost once the first copy had
    landed, replace that copy instead of adding a second one."""
    ids = "\n".join(sorted(table.column(id_column).to_pylist()))
    name = hashlib.sha256(ids.encode()).hexdigest()[:FILE_DIGEST_CHARS]
    return write_whole(filesystem, f"{directory}/{name}{PARQUET_SUFFIX}", table)


@dataclass(frozen=True)
class Repair:
    """What preparing a table for a resumed run did."""

    partial_files_removed: int
    retried_rows_dropped: int


class RunDir:
    """A run directory on any pyarrow filesystem."""

    def __init__(self, location: str, create: bool = True) -> None:
        # A place no run belongs is an UnfitRunDir, and a missing bucket or refused credentials a StorageError, here,
        # before a job creates anything or starts Ray. `create=False` for a reader that writes nothing (`status`).
        def refuse_unfit(filesystem: pafs.FileSystem, path: str) -> None:
            reason = unfit_reason(Path(path)) if isinstance(filesystem, pafs.LocalFileSystem) else None
            if reason is not None:
                raise UnfitRunDir(f"{location} cannot be a run directory: it is {reason}. A run writes its tables, "
                                  f"logs and run.json into a folder of its own: name one, e.g. runs/NAME")

        self.filesystem, self.path = open_location(location, create=create, check=refuse_unfit)
        self.uri = location if is_uri(location) else self.path

    def table_uri(self, name: str) -> str:
        """Where table `name` lives, as a location every node resolves alike (a URI keeps the run's options)."""
        return join(self.uri, name)

    def table_path(self, name: str) -> str:
        """Table `name`'s directory as a path on `filesystem` (what Ray Data's writers take with the filesystem). Made
        by `join`, never by pasting `/`: a run at the root would give `//name`, which Ray Data reads as a host."""
        return join(self.path, name)

    def files(self, name: str) -> list[str]:
        """The table's Parquet files (filesystem paths), sorted; hidden and temporary files excluded."""
        selector = pafs.FileSelector(self.table_path(name), recursive=True, allow_not_found=True)
        return sorted(
            info.path
            for info in self.filesystem.get_file_info(selector)
            if info.type == pafs.FileType.File
            and info.base_name.endswith(PARQUET_SUFFIX)
            and not info.base_name.startswith((".", "_"))
        )

    def check_table(self, name: str, schema: pa.Schema, later: Collection[str] = ()) -> None:
        """Refuse (`ForeignContents`, naming it) any file in table `name`'s folder that is not a file of the table:
        one not named as a Parquet file, or whose columns are not `schema`'s (`later` ones aside). Half-written files of
        the table (no readable footer) pass: `prepare` removes them. Hidden and temporary files are the writers' own."""
        folder = self.table_path(name)
        selector = pafs.FileSelector(folder, recursive=True, allow_not_found=True)
        for info in self.filesystem.get_file_info(selector):
            if info.type != pafs.FileType.File or info.base_name.startswith((".", "_")):
                continue
            if not info.base_name.endswith(PARQUET_SUFFIX):
                self._refuse_file(name, info.path, f"not a {PARQUET_SUFFIX} file")
            try:
                written = pq.read_schema(info.path, filesystem=self.filesystem)
            except (OSError, pa.ArrowInvalid):
                continue
            difference = schema_difference(written, schema, later)
            if difference is not None:
                self._refuse_file(name, info.path, f"its columns are not the table's: it {difference}")

    def _refuse_file(self, name: str, path: str, why: str) -> None:
        location = location_of(self.uri, self.path, path)
        raise ForeignContents(f"{location} is not a file of the {name} table ({why}): move it out of "
                              f"{self.table_uri(name)} and start again")

    def file_uris(self, name: str) -> list[str]:
        """The table's files as locations that resolve to the right filesystem on any node."""
        return [location_of(self.uri, self.path, path) for path in self.files(name)]

    def read(self, name: str, schema: pa.Schema, columns: Sequence[str] | None = None) -> pa.Table:
        """Table `name` (only `columns` when given) from every file; an empty table when nothing is written. Files
        written before a column or a struct's field existed (a resumed run's older files) read with it null."""
        wanted = list(columns) if columns is not None else schema.names
        tables = [self._read_file(path, schema, wanted) for path in self.files(name)]
        if not tables:
            return pa.schema([schema.field(column) for column in wanted]).empty_table()
        return pa.concat_tables(tables, promote_options="permissive")

    def _read_file(self, path: str, schema: pa.Schema, columns: Sequence[str]) -> pa.Table:
        """`columns` of one file of a table of `schema`, a column the file lacks (it came later) null."""
        parquet = pq.ParquetFile(path, filesystem=self.filesystem)
        table = parquet.read(columns=[column for column in columns if column in parquet.schema_arrow.names])
        for column in columns:
            if column not in table.column_names:
                table = table.append_column(schema.field(column), pa.nulls(table.num_rows, schema.field(column).type))
        return table.select(list(columns))

    def read_by_file(self, name: str, columns: Sequence[str]) -> Iterator[pa.Table]:
        """Table `name`'s `columns`, one file at a time, so what is made of a whole run's table need not hold it all."""
        for path in self.files(name):
            yield pq.read_table(path, filesystem=self.filesystem, columns=list(columns))

    def ids(self, name: str, id_column: str) -> set[str]:
        """The ids written to table `name` (after `prepare`, every one of them is finished)."""
        return set(self.read_column(name, id_column))

    def row_count(self, name: str) -> int:
        """How many rows table `name` holds, from the files' footers (no column is read)."""
        return sum(pq.ParquetFile(path, filesystem=self.filesystem).metadata.num_rows for path in self.files(name))

    def read_column(self, name: str, column: str) -> list[Any]:
        """One column of table `name` as a Python list, read file by file."""
        return [value for _, values in self.column_by_file(name, column) for value in values]

    def column_by_file(self, name: str, column: str) -> list[tuple[str, list[Any]]]:
        """One column of table `name`, file by file: (the file's URI, its values)."""
        return [
            (uri, pq.read_table(path, filesystem=self.filesystem, columns=[column]).column(column).to_pylist())
            for path, uri in zip(self.files(name), self.file_uris(name), strict=True)
        ]

    def prepare(self, name: str, retried_statuses: Collection[str]) -> Repair:
        """Make table `name` safe to resume from: delete unreadable (half-written) files and rewrite files
        holding rows whose status is to be retried without those rows."""
        removed = dropped = 0
        for path in self.files(name):
            try:
                table = pq.read_table(path, filesystem=self.filesystem)
            except (OSError, pa.ArrowInvalid):
                self.filesystem.delete_file(path)
                removed += 1
                continue
            retried = pc.is_in(table.column("status"), value_set=pa.array(sorted(retried_statuses), pa.string()))
            count = pc.sum(retried).as_py() or 0
            if count:
                write_whole(self.filesystem, path, table.filter(pc.invert(retried)))
                dropped += count
        return Repair(removed, dropped)

    def remove_half_written(self, name: str) -> int:
        """Delete the files of table `name` that cannot be read (cut by a write that failed); how many."""
        removed = 0
        for path in self.files(name):
            try:
                pq.read_metadata(path, filesystem=self.filesystem)
            except (OSError, pa.ArrowInvalid):
                self.filesystem.delete_file(path)
                removed += 1
        return removed

    def write_table(self, name: str, table: pa.Table) -> str:
        """Replace table `name` by one file holding `table` (for small tables rebuilt at the end of a run)."""
        target = write_whole(self.filesystem, join(self.table_path(name), f"{name}{PARQUET_SUFFIX}"), table)
        for path in self.files(name):
            if path != target:
                self.filesystem.delete_file(path)
        return self.table_uri(name)

    def keep_log(self, local: Path, relative: str) -> str:
        """Copy the node-local file `local` to `relative` in the run directory (replacing an earlier copy); where it
        went. For what a run writes on its own node, like Ray's log, when the run directory is not local."""
        target = join(self.path, relative)
        self.filesystem.create_dir(target.rsplit("/", 1)[0], recursive=True)
        pafs.copy_files(str(local), target, source_filesystem=pafs.LocalFileSystem(),
                        destination_filesystem=self.filesystem)
        return join(self.uri, relative)

    def read_manifest(self) -> dict[str, Any] | None:
        """The run's manifest (`run.json`: run id, creation time, first config, what made each table), None before the
        first start; one that is not a file, not JSON or not of a manifest's shape (`manifest_problem`) is
        `ForeignContents`."""
        path = join(self.path, MANIFEST)
        kind = self.filesystem.get_file_info(path).type
        if kind == pafs.FileType.NotFound:
            return None
        if kind != pafs.FileType.File:
            raise ForeignContents(self._manifest_refusal("a directory" if kind == pafs.FileType.Directory
                                                         else "not a regular file"))
        with self.filesystem.open_input_stream(path) as stream:
            text = stream.read()
        try:
            manifest = json.loads(text.decode())
        except ValueError as error:  # not UTF-8, or not JSON
            raise ForeignContents(self._manifest_refusal(first_line(error))) from None
        problem = manifest_problem(manifest)
        if problem is not None:
            raise ForeignContents(self._manifest_refusal(problem))
        return manifest

    def _manifest_refusal(self, why: str) -> str:
        return (f"{join(self.uri, MANIFEST)} is not a run's manifest ({why}): restore it from a copy, or move the "
                f"run's tables to another run_dir")

    def write_manifest(self, manifest: dict[str, Any]) -> None:
        """Replace the run's manifest whole (`replace_whole`): a full disk at a start must not cut the run.json that
        says what made the run's rows."""
        def write(temporary: str) -> None:
            with self.filesystem.open_output_stream(temporary) as stream:
                stream.write(json.dumps(manifest, indent=2, default=str).encode())

        replace_whole(self.filesystem, join(self.path, MANIFEST), write)


def json_kind(value: Any) -> str:
    """What a JSON value is, as a message names it."""
    if isinstance(value, bool):
        return "true or false"
    for kind, types in JSON_KINDS.items():
        if isinstance(value, types):
            return kind
    return "null"


def fits(value: Any, kind: str) -> bool:
    """Whether the JSON value `value` is of `kind` (a key of `JSON_KINDS`, `null`, or `a time`)."""
    if kind == NULL:
        return value is None
    if kind == TIME:
        return isinstance(value, str) and aware_time(value) is not None
    return not isinstance(value, bool) and isinstance(value, JSON_KINDS[kind])


def aware_time(text: str) -> datetime | None:
    """The ISO 8601 time `text` with its UTC offset, None when it is not one (a time without an offset says nothing
    of which zone it was written in)."""
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        return None
    return moment if moment.utcoffset() is not None else None


def values_at(document: Any, path: Sequence[str], where: str = "") -> Iterator[tuple[str, Any]]:
    """The values of `document` at the dotted `path` (`*` stands for every key of an object) that are there, each
    with its own dotted path; a step into what is not an object finds nothing."""
    if not path:
        yield where, document
        return
    if not isinstance(document, dict):
        return
    keys = list(document) if path[0] == "*" else [path[0]] if path[0] in document else []
    for key in keys:
        yield from values_at(document[key], path[1:], f"{where}.{key}" if where else str(key))


def manifest_problem(manifest: Any) -> str | None:
    """What keeps `manifest` (run.json, parsed) from being a run's manifest, None when nothing does: every reader
    and job reads these fields as `MANIFEST_FIELDS` says, and one of another shape would stop it midway."""
    if not isinstance(manifest, dict):
        return f"{json_kind(manifest)}, not a JSON object"
    if not manifest.get("run_id"):
        return "it has no run_id"
    for path, kinds in MANIFEST_FIELDS:
        for where, value in values_at(manifest, path.split(".")):
            if not any(fits(value, kind) for kind in kinds):
                return f"{where} is {json_kind(value)}, not {' or '.join(kinds)}"
    return None


def new_manifest(config: dict[str, Any]) -> dict[str, Any]:
    """The manifest of a run's first start: a fresh run id, the time, and the config it started with."""
    return {"run_id": uuid.uuid4().hex, "created_at": now_iso(), "config": config}


def now_iso() -> str:
    """The current UTC time as ISO 8601 (what manifests record)."""
    return datetime.now(UTC).isoformat()
