"""`python -m pipelines.decontaminate corpus=PATH benchmarks=[PATH,...] out=DIR`: is a corpus clean of a benchmark?

Reads the benchmarks' problems (directories of `.lean` files, JSONL or Parquet tables with a statement column, a
Folklore benchmark or run) and the corpus (a Folklore run or export, or any Parquet/JSONL table with a statement
column), compares every corpus statement with every problem (`operators.decontaminate`), and writes each corpus
table back with the verdict's columns, a summary per benchmark and a manifest naming the benchmarks, their revisions
and the settings. `pipelines.export` calls the same `Decontaminator` to drop what it finds. Everything runs on the
driver: reading keys takes about a millisecond a statement, and the embedding model runs on the driver's CPUs.
"""

from __future__ import annotations

from lean_pool.command_line import hold_stops

if __name__ == "__main__":
    hold_stops()  # the imports below take seconds: a Ctrl-C or SIGTERM meanwhile stops the job in one line

import json
import sys
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypedDict, cast

import pyarrow as pa
import pyarrow.fs as pafs
from omegaconf import OmegaConf

from operators.decontaminate import DECISIVE_KINDS, EMBEDDING, EXACT, NOTATION, Verdict
from operators.storage import join, open_location, without_options
from pipelines.reporting.summary import Closing, closing_lines
from pipelines.runtime.benchmarks import (
    CANDIDATES,
    Decontaminator,
    concat_files,
    decontaminator,
    first_present,
    method_description,
    read_table_file,
    table_files,
)
from pipelines.runtime.cli import SetupError, WorkWritten, compose_config, run_job
from pipelines.runtime.outputs import Output, placed_output
from pipelines.runtime.run_dir import RunDir

# The job's name, as its output folder's marker says it.
JOB = "decontaminate"
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


class SummaryRow(TypedDict):
    """One row of the summary table, a benchmark's (tests/test_row_shapes.py holds it equal to the schema)."""

    benchmark: str
    location: str
    revision: str
    revision_source: str
    problems: int
    problems_unread: int
    problems_matched: int
    corpus_rows_matched: int
    rows_exact: int
    rows_notation: int
    rows_embedding: int
    rows_ngram_flagged: int


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
    present = first_present(table.column_names, DEFAULT_CORPUS_COLUMNS)
    if present is None:
        return None
    texts = table.column(present).to_pylist()
    if RAW_STATEMENT in table.column_names:
        raw = table.column(RAW_STATEMENT).to_pylist()
        texts = [text or fallback for text, fallback in zip(texts, raw, strict=True)]
    return texts


def _read_tables(filesystem: pafs.FileSystem, root: str, text_columns: Sequence[str]) -> pa.Table:
    """The Parquet and JSONL files at `root` as one table (`text_columns` holding text); a file that cannot be read
    as one is a `SetupError` naming it."""
    files = table_files(filesystem, root)
    if not files:
        raise SetupError(f"{root} holds no Parquet or JSONL file")
    return concat_files(files, [read_table_file(filesystem, path, text_columns) for path in files])


def read_corpus(location: str, column: str | None) -> list[CorpusTable]:
    """The corpus at `location` as tables: a run's candidates, each corpus of an export (a trajectory judged by its
    candidate's statement from the export's other corpora), or one table of Parquet/JSONL files."""
    filesystem, root = open_location(location)
    info = filesystem.get_file_info(root)
    if info.type == pafs.FileType.NotFound:
        raise SetupError(f"corpus={without_options(location)} does not exist")
    named: list[tuple[str, pa.Table]]
    text_columns = [column] if column is not None else [*DEFAULT_CORPUS_COLUMNS, RAW_STATEMENT]
    if info.type == pafs.FileType.Directory and filesystem.get_file_info(f"{root}/{CANDIDATES}").type == \
            pafs.FileType.Directory:
        named = [(CANDIDATES, _read_tables(filesystem, f"{root}/{CANDIDATES}", text_columns))]
    elif info.type == pafs.FileType.Directory and filesystem.get_file_info(f"{root}/{MANIFEST}").type == \
            pafs.FileType.File:
        named = [(name, _read_tables(filesystem, f"{root}/{name}", text_columns)) for name in EXPORT_CORPORA
                 if filesystem.get_file_info(f"{root}/{name}").type == pafs.FileType.Directory]
    else:
        named = [(ROWS, _read_tables(filesystem, root, text_columns))]
    texts = {name: _column_texts(table, column) for name, table in named}
    by_candidate: dict[str, str] = {}
    for name, table in named:
        table_texts = texts[name]
        if table_texts is not None and "candidate_id" in table.column_names:
            for candidate, text in zip(table.column("candidate_id").to_pylist(), table_texts, strict=True):
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


def summary_rows(decontaminator: Decontaminator, verdicts: Sequence[Verdict]) -> list[SummaryRow]:
    """Per benchmark: its problems, those unread, those some corpus row restates, and the rows matched by kind."""
    index = decontaminator.index
    flagged = [v for v in verdicts if index.ngram_flagged(v)]
    unread = Counter(problem.benchmark for problem in index.unread())
    rows: list[SummaryRow] = []
    for benchmark in decontaminator.benchmarks:
        matched = [v for v in verdicts if v.contaminated and v.benchmark == benchmark.name]
        kinds = Counter(v.kind for v in matched)
        rows.append({
            "benchmark": benchmark.name, "location": benchmark.location, "revision": benchmark.revision,
            "revision_source": benchmark.revision_source, "problems": len(benchmark.problems),
            "problems_unread": unread[benchmark.name], "problems_matched": len({v.problem for v in matched}),
            "corpus_rows_matched": len(matched), "rows_exact": kinds[EXACT], "rows_notation": kinds[NOTATION],
            "rows_embedding": kinds[EMBEDDING],
            "rows_ngram_flagged": sum(1 for v in flagged if v.ngram_benchmark == benchmark.name),
        })
    return rows


def owned_output(cfg: Mapping[str, Any]) -> Output:
    """`out` as this job's folder, checked before anything is read: never the corpus or a benchmark, nor in or around
    one, and replaced only when absent, empty or written by an earlier decontaminate (`pipelines.runtime.outputs`)."""
    inputs = {f"the corpus, corpus={cfg['corpus']}": str(cfg["corpus"]),
              **{f"the benchmark {location}": str(location) for location in cfg["benchmarks"]}}
    output = placed_output("out", str(cfg["out"]), JOB, None, inputs)
    output.check_own()
    return output


def decontaminate(cfg: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    """Judge every row of the corpus and write the tables, the summary and the manifest under `out`, in place of what
    an earlier start wrote there; the manifest, and per table written where it went."""
    output = owned_output(cfg)
    tables = read_corpus(str(cfg["corpus"]), cfg["corpus_column"])
    judge = decontaminator(cfg, cfg["embedding"])
    output.empty()
    out = RunDir(output.location)
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
    with out.filesystem.open_output_stream(join(out.path, MANIFEST)) as stream:
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
        composed = compose_config("decontaminate", sys.argv[1:] if argv is None else argv)
        cfg = cast(dict[str, Any], OmegaConf.to_container(composed, resolve=True))
        manifest, written = decontaminate(cfg)
        work.mark()
        print("\n".join(closing_lines(closing(str(cfg["out"]), manifest, written))), flush=True)

    return run_job(run, (), work, interrupted="nothing is kept half-written; run the same command again")


if __name__ == "__main__":
    sys.exit(main())
