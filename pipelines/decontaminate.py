"""`python -m pipelines.decontaminate corpus=PATH benchmarks=[PATH,...] out=DIR`: is a corpus clean of a benchmark?

Reads the benchmarks' problems (directories of `.lean` files, JSONL or Parquet tables with a statement column, a
Folklore benchmark or run) and the corpus (a Folklore run or export, or any Parquet/JSONL table with a statement
column), compares every corpus statement with every problem (`operators.decontaminate`), and writes each corpus
table back with the verdict's columns, a summary per benchmark and a manifest naming the benchmarks, their revisions
and the settings. `pipelines.export` calls the same `Decontaminator` to drop what it finds. Everything runs on the
driver: reading keys takes about a millisecond a statement, and the embedding model runs on the driver's CPUs.
"""

from __future__ import annotations

import io
import json
import sys
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.json as pajson
import pyarrow.parquet as pq
from omegaconf import OmegaConf

from lean_pool.lean_source import read_commands
from operators.decontaminate import (
    DECISIVE_KINDS,
    STATEMENT_KINDS,
    BenchmarkSet,
    MatchSettings,
    Problem,
    StatementJudge,
    Verdict,
)
from operators.retrieval.declaration_index import content_hash, git_head
from operators.retrieval.embeddings import load_encoder
from operators.storage import is_uri, join, open_location, without_options
from pipelines.reporting.summary import Closing, closing_lines
from pipelines.runtime.cli import SetupError, WorkWritten, compose_config, run_job
from pipelines.runtime.run_dir import PARQUET_SUFFIX, RunDir, data_files

LEAN_SUFFIX = ".lean"
# The context commands a problem read from a file keeps: its `open` lines decide what its names mean.
OPEN_COMMANDS = frozenset({"open"})
JSONL_SUFFIXES = (".jsonl", ".json")
CANDIDATES = "candidates"
EXPORT_CORPORA = ("pairs", "judge", "trajectories")
SUMMARY = "summary"
# The job's own manifest, and the file that marks a directory as a Folklore export.
MANIFEST = "manifest.json"
# A corpus read from one table (not a run or an export) is written back under this name.
ROWS = "rows"
# Statement columns tried, in order, when `corpus_column` is null; a run's candidate without a compiled statement
# is compared by its raw one.
DEFAULT_CORPUS_COLUMNS = ("statement", "formal_statement")
RAW_STATEMENT = "statement_raw"
VERDICT_FIELDS = [
    ("contaminated", pa.bool_()), ("benchmark", pa.string()), ("benchmark_problem", pa.string()),
    ("match_kind", pa.string()), ("match_score", pa.float64()), ("nearest_benchmark", pa.string()),
    ("nearest_problem", pa.string()), ("nearest_statement", pa.string()), ("nearest_similarity", pa.float64()),
    ("ngram_benchmark", pa.string()), ("ngram_problem", pa.string()), ("ngram_overlap", pa.float64()),
    ("decontaminate_note", pa.string()),
]
SUMMARY_SCHEMA = pa.schema([
    ("benchmark", pa.string()), ("location", pa.string()), ("revision", pa.string()), ("revision_source", pa.string()),
    ("problems", pa.int64()), ("problems_unread", pa.int64()), ("problems_matched", pa.int64()),
    ("corpus_rows_matched", pa.int64()), *[(f"rows_{kind}", pa.int64()) for kind in DECISIVE_KINDS],
    ("rows_ngram_flagged", pa.int64()),
])


@dataclass(frozen=True)
class Benchmark:
    """A benchmark read: its name, where it was read, its revision and where that came from, and its problems."""

    name: str
    location: str
    revision: str
    revision_source: str
    problems: list[Problem]


def _read_text(filesystem: pafs.FileSystem, path: str) -> str:
    with filesystem.open_input_stream(path) as stream:
        return stream.read().decode("utf-8")


def _read_table(filesystem: pafs.FileSystem, path: str) -> pa.Table:
    """A Parquet or JSONL file as a table."""
    if path.endswith(PARQUET_SUFFIX):
        return pq.read_table(path, filesystem=filesystem)
    with filesystem.open_input_stream(path) as stream:
        return pajson.read_json(io.BytesIO(stream.read()))


def _table_files(filesystem: pafs.FileSystem, root: str) -> list[str]:
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


def _first_present(names: Sequence[str], wanted: Sequence[str]) -> str | None:
    return next((column for column in wanted if column in names), None)


def table_problems(name: str, source: str, table: pa.Table, read: Mapping[str, Any]) -> list[Problem]:
    """A benchmark table's rows as problems: the statement column (the header column before it when there is one),
    the id column or `source#row`."""
    statement = _first_present(table.column_names, read["statement_columns"])
    if statement is None:
        columns = list(read["statement_columns"])
        raise SetupError(f"benchmark {name}: {source} has none of the statement columns {columns}")
    header = _first_present(table.column_names, read["header_columns"])
    ident = _first_present(table.column_names, read["id_columns"])
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
        problems = lean_problems(name, [(path[len(base) + 1 :], _read_text(filesystem, path)) for path in lean])
    else:
        candidates = f"{root}/{CANDIDATES}"
        run = filesystem.get_file_info(candidates).type == pafs.FileType.Directory
        problems = []
        for path in _table_files(filesystem, candidates if run else root):
            source = path[len(root) + 1 :] or PurePosixPath(path).name
            problems += table_problems(name, source, _read_table(filesystem, path), read)
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


def verdict_columns(verdicts: Sequence[Verdict]) -> list[tuple[str, pa.Array]]:
    """The verdicts as the columns a decontaminated table gains."""
    values = [
        [v.contaminated for v in verdicts], [v.benchmark for v in verdicts], [v.problem for v in verdicts],
        [v.kind for v in verdicts], [v.score for v in verdicts], [v.nearest_benchmark for v in verdicts],
        [v.nearest_problem for v in verdicts], [v.nearest_statement for v in verdicts],
        [v.nearest_similarity for v in verdicts], [v.ngram_benchmark for v in verdicts],
        [v.ngram_problem for v in verdicts], [v.ngram_overlap for v in verdicts], [v.note for v in verdicts],
    ]
    return [(name, pa.array(column, kind)) for (name, kind), column in zip(VERDICT_FIELDS, values, strict=True)]


@dataclass(frozen=True)
class CorpusTable:
    """One table of the corpus: its name in the output, its rows, and the Lean text each row is judged by."""

    name: str
    table: pa.Table
    texts: list[str | None]


def _column_texts(table: pa.Table, column: str | None) -> list[str | None] | None:
    """The statement of each row: `column` when given, else the default columns (a run's raw statement where it has
    no compiled one); None when the table has no such column."""
    if column is not None:
        return table.column(column).to_pylist() if column in table.column_names else None
    present = _first_present(table.column_names, DEFAULT_CORPUS_COLUMNS)
    if present is None:
        return None
    texts = table.column(present).to_pylist()
    if RAW_STATEMENT in table.column_names:
        raw = table.column(RAW_STATEMENT).to_pylist()
        texts = [text or fallback for text, fallback in zip(texts, raw, strict=True)]
    return texts


def _read_tables(filesystem: pafs.FileSystem, root: str) -> pa.Table:
    files = _table_files(filesystem, root)
    if not files:
        raise SetupError(f"{root} holds no Parquet or JSONL file")
    return pa.concat_tables([_read_table(filesystem, path) for path in files], promote_options="default")


def read_corpus(location: str, column: str | None) -> list[CorpusTable]:
    """The corpus at `location` as tables: a run's candidates, each corpus of an export (a trajectory judged by its
    candidate's statement from the export's other corpora), or one table of Parquet/JSONL files."""
    filesystem, root = open_location(location)
    info = filesystem.get_file_info(root)
    if info.type == pafs.FileType.NotFound:
        raise SetupError(f"corpus={without_options(location)} does not exist")
    named: list[tuple[str, pa.Table]]
    if info.type == pafs.FileType.Directory and filesystem.get_file_info(f"{root}/{CANDIDATES}").type == \
            pafs.FileType.Directory:
        named = [(CANDIDATES, _read_tables(filesystem, f"{root}/{CANDIDATES}"))]
    elif info.type == pafs.FileType.Directory and filesystem.get_file_info(f"{root}/{MANIFEST}").type == \
            pafs.FileType.File:
        named = [(name, _read_tables(filesystem, f"{root}/{name}")) for name in EXPORT_CORPORA
                 if filesystem.get_file_info(f"{root}/{name}").type == pafs.FileType.Directory]
    else:
        named = [(ROWS, _read_tables(filesystem, root))]
    texts = {name: _column_texts(table, column) for name, table in named}
    by_candidate: dict[str, str] = {}
    for name, table in named:
        if texts[name] is not None and "candidate_id" in table.column_names:
            for candidate, text in zip(table.column("candidate_id").to_pylist(), texts[name], strict=True):
                if text:
                    by_candidate.setdefault(candidate, text)
    tables = []
    for name, table in named:
        rows = texts[name]
        if rows is None and "candidate_id" in table.column_names and by_candidate:
            rows = [by_candidate.get(candidate) for candidate in table.column("candidate_id").to_pylist()]
        if rows is None:
            wanted = column or " or ".join(DEFAULT_CORPUS_COLUMNS)
            raise SetupError(f"corpus table {name} has no {wanted} column (name it with corpus_column=)")
        clash = [field_name for field_name, _ in VERDICT_FIELDS if field_name in table.column_names]
        if clash:
            raise SetupError(f"corpus table {name} already has the columns {clash} that decontamination writes")
        tables.append(CorpusTable(name, table, rows))
    return tables


def summary_rows(decontaminator: Decontaminator, verdicts: Sequence[Verdict]) -> list[dict[str, Any]]:
    """Per benchmark: its problems, those unread, those some corpus row restates, and the rows matched by kind."""
    index = decontaminator.index
    flagged = [v for v in verdicts if index.ngram_flagged(v)]
    unread = Counter(problem.benchmark for problem in index.unread())
    rows = []
    for benchmark in decontaminator.benchmarks:
        matched = [v for v in verdicts if v.contaminated and v.benchmark == benchmark.name]
        kinds = Counter(v.kind for v in matched)
        rows.append({
            "benchmark": benchmark.name, "location": benchmark.location, "revision": benchmark.revision,
            "revision_source": benchmark.revision_source, "problems": len(benchmark.problems),
            "problems_unread": unread[benchmark.name], "problems_matched": len({v.problem for v in matched}),
            "corpus_rows_matched": len(matched), **{f"rows_{kind}": kinds[kind] for kind in DECISIVE_KINDS},
            "rows_ngram_flagged": sum(1 for v in flagged if v.ngram_benchmark == benchmark.name),
        })
    return rows


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


def decontaminate(cfg: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    """Judge every row of the corpus and write the tables, the summary and the manifest under `out`; the manifest,
    and per table written where it went."""
    tables = read_corpus(str(cfg["corpus"]), cfg["corpus_column"])
    judge = decontaminator(cfg, cfg["embedding"])
    out = RunDir(str(cfg["out"]))
    written, every, counts = {}, [], {}
    for corpus in tables:
        verdicts = judge.judge(corpus.texts)
        every += verdicts
        table = corpus.table
        for name, column in verdict_columns(verdicts):
            table = table.append_column(name, column)
        written[corpus.name] = out.write_table(corpus.name, table)
        counts[corpus.name] = {"rows": len(verdicts), "contaminated": sum(v.contaminated for v in verdicts),
                               "unread": sum(v.note is not None for v in verdicts)}
    summary = summary_rows(judge, every)
    written[SUMMARY] = out.write_table(SUMMARY, pa.Table.from_pylist(summary, schema=SUMMARY_SCHEMA))
    manifest = {"corpus": without_options(str(cfg["corpus"])), "tables": counts, "benchmarks": summary,
                "method": method_description(judge.settings), "matches": cfg["matches"],
                "embedding_model": cfg["embedding"]["model_id"] if judge.settings.embedding else None}
    with out.filesystem.open_output_stream(f"{out.path}/{MANIFEST}") as stream:
        stream.write(json.dumps(manifest, indent=2).encode())
    written[MANIFEST] = join(out.uri, MANIFEST)
    return manifest, written


def closing(out: str, manifest: Mapping[str, Any], written: Mapping[str, str]) -> Closing:
    """What the job says at its end: each table with its rows matched, the summary, the manifest, each benchmark."""
    described = {name: (location, f"{c['contaminated']} of {c['rows']} rows contaminated"
                                  + (f", {c['unread']} without a statement" if c["unread"] else ""))
                 for name, c in manifest["tables"].items() for location in [written[name]]}
    described[SUMMARY] = (written[SUMMARY], "per benchmark")
    described[MANIFEST] = (written[MANIFEST], "benchmarks, revisions, method")
    details = [f"{b['benchmark']} ({b['revision']}): {b['problems_matched']} of {b['problems']} problems restated by "
               f"{b['corpus_rows_matched']} rows (exact {b['rows_exact']}, notation {b['rows_notation']}, embedding "
               f"{b['rows_embedding']}); ngram flagged {b['rows_ngram_flagged']}" for b in manifest["benchmarks"]]
    return Closing(out, described, details=details)


def main(argv: Sequence[str] | None = None) -> int:
    """Decontaminate a corpus; exit 2 when a location or a column is missing or the config is wrong."""
    work = WorkWritten()

    def run() -> None:
        cfg = OmegaConf.to_container(compose_config("decontaminate", sys.argv[1:] if argv is None else argv),
                                     resolve=True)
        manifest, written = decontaminate(cfg)
        work.mark()
        print("\n".join(closing_lines(closing(str(cfg["out"]), manifest, written))), flush=True)

    return run_job(run, (), work, interrupted="nothing is kept half-written; run the same command again")


if __name__ == "__main__":
    sys.exit(main())
