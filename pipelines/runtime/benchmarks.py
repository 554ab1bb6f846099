"""The benchmarks a corpus is checked against, read wherever they live: directories of `.lean` files, JSONL or Parquet
tables with a statement column, a Folklore benchmark or run; each with its revision (given, its git checkout's head,
or a hash of its problems). `pipelines.decontaminate`, `pipelines.export` and `mine`'s benchmark check read them here.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from lean_pool.lean_source import read_commands
from operators.decontaminate import STATEMENT_KINDS, BenchmarkSet, MatchSettings, Problem, StatementJudge, Verdict
from operators.retrieval.declaration_index import content_hash, git_head
from operators.retrieval.embeddings import load_encoder
from operators.rows.input_values import described
from operators.storage import is_uri, open_location, without_options
from pipelines.runtime.cli import SetupError
from pipelines.runtime.run_dir import PARQUET_SUFFIX, data_files

LEAN_SUFFIX = ".lean"
# The context commands a problem read from a file keeps: its `open` lines decide what its names mean.
OPEN_COMMANDS = frozenset({"open"})
JSONL_SUFFIXES = (".jsonl", ".json")
CANDIDATES = "candidates"


@dataclass(frozen=True)
class Benchmark:
    """A benchmark read: its name, where it was read, its revision and where that came from, and its problems."""

    name: str
    location: str
    revision: str
    revision_source: str
    problems: list[Problem]


def read_bytes(filesystem: pafs.FileSystem, path: str) -> bytes:
    """A file's bytes; one that cannot be read is a `SetupError` naming it."""
    try:
        with filesystem.open_input_stream(path) as stream:
            return stream.read()
    except OSError as error:
        raise SetupError(f"cannot read {path}: {error}") from None


def read_text(filesystem: pafs.FileSystem, path: str) -> str:
    """A UTF-8 file's text; a file in another encoding is a `SetupError` naming it and the line of the first byte that
    is not UTF-8."""
    data = read_bytes(filesystem, path)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data[: error.start].count(b"\n") + 1
        raise SetupError(f"{path} line {line} is not UTF-8: {error.reason} at byte {error.start}") from None


def jsonl_records(filesystem: pafs.FileSystem, path: str) -> list[tuple[int, dict[str, Any]]]:
    """The objects of a JSONL file with their line numbers, blank lines skipped; a line that is not UTF-8 or not a
    JSON object is a `SetupError` naming the file and the line."""
    records = []
    for number, raw in enumerate(read_bytes(filesystem, path).split(b"\n"), start=1):
        if not raw.strip():
            continue
        try:
            record = json.loads(raw.decode("utf-8"))
        except UnicodeDecodeError as error:
            raise SetupError(f"{path} line {number} is not UTF-8: {error.reason} at byte {error.start}") from None
        except json.JSONDecodeError as error:
            raise SetupError(f"{path} line {number} is not JSON: {error.msg} at column {error.colno}") from None
        if not isinstance(record, dict):
            raise SetupError(f"{path} line {number} is not a JSON object")
        records.append((number, record))
    return records


def records_table(path: str, records: Sequence[tuple[int, Mapping[str, Any]]], text_columns: Sequence[str]
                  ) -> pa.Table:
    """JSONL records (with their line numbers) as a table, each key a column, null where a record lacks it. A value
    of `text_columns` that is not text, or a column whose values Arrow cannot hold together, is a `SetupError` naming
    the file and the line."""
    names = list(dict.fromkeys(name for _, record in records for name in record))
    columns = {}
    for name in names:
        given = [(number, record[name]) for number, record in records if record.get(name) is not None]
        wrong = next(((number, value) for number, value in given if not isinstance(value, str)), None)
        if name in text_columns and wrong:
            raise SetupError(f"{path} line {wrong[0]}: {name} is {described(wrong[1])}, not text")
        try:
            columns[name] = pa.array([record.get(name) for _, record in records])
        except (pa.ArrowInvalid, pa.ArrowTypeError) as error:
            first = given[0]
            other = next((item for item in given if type(item[1]) is not type(first[1])), None)
            if other is None:
                raise SetupError(f"{path}: {name} holds values Arrow cannot store: {error}") from None
            raise SetupError(f"{path} line {other[0]}: {name} is {described(other[1])}, where line {first[0]} gives "
                             f"{described(first[1])}") from None
    return pa.table(columns)


def read_table_file(filesystem: pafs.FileSystem, path: str, text_columns: Sequence[str] = ()) -> pa.Table:
    """A Parquet or JSONL file as a table, each of `text_columns` it has holding text; a file that is not Parquet, a
    broken line or a text column of another type is a `SetupError` naming the file (and the line or row)."""
    if not path.endswith(PARQUET_SUFFIX):
        return records_table(path, jsonl_records(filesystem, path), text_columns)
    try:
        table = pq.read_table(path, filesystem=filesystem)
    except (pa.ArrowException, OSError) as error:
        raise SetupError(f"{path} is not a readable Parquet file: {error}") from None
    for column in text_columns:
        if column in table.column_names and not is_text(table.schema.field(column).type):
            values = enumerate(table.column(column).to_pylist(), start=1)
            wrong = next(((row, value) for row, value in values if value is not None), None)
            if wrong:
                raise SetupError(f"{path} row {wrong[0]}: {column} is {described(wrong[1])}, not text")
    return table


def is_text(kind: pa.DataType) -> bool:
    """Whether a column of type `kind` holds text (or only nulls)."""
    return pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_null(kind)


def concat_files(paths: Sequence[str], tables: Sequence[pa.Table]) -> pa.Table:
    """The tables read from `paths` as one; a file whose columns do not fit those of the files before it (a column of
    another type) is a `SetupError` naming it."""
    table = tables[0]
    for path, more in zip(paths[1:], tables[1:], strict=True):
        try:
            table = pa.concat_tables([table, more], promote_options="default")
        except pa.ArrowException as error:
            raise SetupError(f"{path}: its columns do not fit those of {paths[0]}: {error}") from None
    return table


def table_files(filesystem: pafs.FileSystem, root: str) -> list[str]:
    """The Parquet and JSONL files at `root` (a file, or a directory searched recursively)."""
    if filesystem.get_file_info(root).type == pafs.FileType.File:
        return [root]
    return [path for path in data_files(filesystem, root) if path.endswith((PARQUET_SUFFIX, *JSONL_SUFFIXES))]


def lean_problems(name: str, files: Sequence[tuple[str, str]]) -> list[Problem]:
    """Each theorem of each `.lean` file (relative path, text) a problem, with the `open` lines in force before it;
    a problem is named by its theorem, or by `path:theorem` when two files name theorems alike."""
    found = []
    for relative, text in files:
        for command in read_commands(text):
            if command.kind in STATEMENT_KINDS:
                context = "\n".join(c.text for c in command.context(OPEN_COMMANDS))
                found.append((relative, command.name or f"{command.kind}@{command.line}", f"{context}\n{command.text}"))
    counts = Counter(theorem for _, theorem, _ in found)
    return [Problem(name, theorem if counts[theorem] == 1 else f"{relative}:{theorem}", text)
            for relative, theorem, text in found]


def first_present(names: Sequence[str], wanted: Sequence[str]) -> str | None:
    """The first of `wanted` among `names`."""
    return next((column for column in wanted if column in names), None)


def table_problems(name: str, source: str, table: pa.Table, read: Mapping[str, Any]) -> list[Problem]:
    """A benchmark table's rows as problems: the statement column (the header column before it when there is one),
    the id column or `source#row`."""
    statement = first_present(table.column_names, read["statement_columns"])
    if statement is None:
        columns = list(read["statement_columns"])
        raise SetupError(f"benchmark {name}: {source} has none of the statement columns {columns}")
    header = first_present(table.column_names, read["header_columns"])
    ident = first_present(table.column_names, read["id_columns"])
    problems = []
    for position, record in enumerate(table.to_pylist()):
        if not record[statement]:
            continue
        text = f"{record[header] or ''}\n{record[statement]}" if header else record[statement]
        problem_id = str(record[ident]) if ident and record[ident] is not None else f"{source}#{position}"
        problems.append(Problem(name, problem_id, text))
    return problems


def read_benchmark(entry: str | Mapping[str, Any], read: Mapping[str, Any]) -> Benchmark:
    """One entry of `benchmarks`: a location, or {path, name, revision}; a `SetupError` when it holds no problem."""
    spec = {"path": entry} if isinstance(entry, str) else dict(entry)
    location = str(spec["path"])
    filesystem, root = open_location(location)
    info = filesystem.get_file_info(root)
    if info.type == pafs.FileType.NotFound:
        raise SetupError(f"benchmark {without_options(location)} does not exist")
    name = str(spec.get("name") or PurePosixPath(root).name.removesuffix(PARQUET_SUFFIX).removesuffix(".jsonl"))
    files = [root] if info.type == pafs.FileType.File else data_files(filesystem, root)
    # A checkout's hidden folders (`.lake/` with a built Mathlib, `.git/`) hold no problem of its own.
    lean = [path for path in files if path.endswith(LEAN_SUFFIX) and "/." not in path[len(root):]]
    if lean:
        base = str(PurePosixPath(root).parent) if info.type == pafs.FileType.File else root
        problems = lean_problems(name, [(path[len(base) + 1 :], read_text(filesystem, path)) for path in lean])
    else:
        candidates = f"{root}/{CANDIDATES}"
        run = filesystem.get_file_info(candidates).type == pafs.FileType.Directory
        problems = []
        for path in table_files(filesystem, candidates if run else root):
            source = path[len(root) + 1 :] or PurePosixPath(path).name
            text_columns = [*read["statement_columns"], *read["header_columns"]]
            problems += table_problems(name, source, read_table_file(filesystem, path, text_columns), read)
    if not problems:
        raise SetupError(f"benchmark {without_options(location)} holds no theorem and no statement to compare with")
    revision, revision_source = spec.get("revision"), "given"
    checkout = None if is_uri(location) else git_head(Path(root))
    if revision is None and checkout:
        revision, revision_source = checkout, "git"
    elif revision is None:
        revision = content_hash((p.problem_id, p.text.encode()) for p in problems)
        revision_source = "content"
    return Benchmark(name, without_options(location), str(revision), revision_source, problems)


@dataclass(frozen=True)
class Decontaminator:
    """The benchmarks read, and the judge of corpus texts built on their problems."""

    benchmarks: list[Benchmark]
    checker: StatementJudge

    @property
    def settings(self) -> MatchSettings:
        return self.checker.settings

    @property
    def index(self) -> BenchmarkSet:
        return self.checker.index

    def judge(self, texts: Sequence[str | None]) -> list[Verdict]:
        """A verdict per corpus text (`StatementJudge.judge`)."""
        return self.checker.judge(texts)


def read_benchmarks(section: Mapping[str, Any]) -> list[Benchmark]:
    """The benchmarks of a config section (`benchmarks`, `read`), each named once; a `SetupError` when there is none."""
    if not section["benchmarks"]:
        raise SetupError("benchmarks=[] names no benchmark to compare with")
    benchmarks = [read_benchmark(entry, section["read"]) for entry in section["benchmarks"]]
    names = [benchmark.name for benchmark in benchmarks]
    if len(set(names)) != len(names):
        raise SetupError(f"two benchmarks are named alike ({names}); give each a `name`")
    return benchmarks


def decontaminator(section: Mapping[str, Any], embedding: Mapping[str, Any]) -> Decontaminator:
    """The `Decontaminator` a config section describes (`benchmarks`, `read`, `matches`), with its encoder."""
    settings = MatchSettings.from_config(section["matches"])
    benchmarks = read_benchmarks(section)
    encoder = load_encoder(embedding) if settings.embedding else None
    problems = [problem for benchmark in benchmarks for problem in benchmark.problems]
    return Decontaminator(benchmarks, StatementJudge(problems, settings, encoder))


def method_description(settings: MatchSettings) -> list[str]:
    """The tiers that ran, in words, for a manifest or a dataset card."""
    tiers = []
    if settings.exact:
        tiers.append("exact: same statement up to theorem, binder and hypothesis names and order, layout")
    if settings.notation:
        tiers.append("notation: same up to notation Lean reads as one term")
    if settings.embedding:
        tiers.append(f"embedding: cosine ≥ {settings.embedding_threshold} to the nearest problem")
    if settings.ngram:
        tiers.append(f"ngram: {settings.ngram_n}-gram overlap ≥ {settings.ngram_threshold} reported, not decisive")
    return tiers
