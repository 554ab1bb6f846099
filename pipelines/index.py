"""`python -m pipelines.index mathlib_dir=PATH out=DIR`: the declaration index that dedup and grounding read.

Ray tasks parse the Lean files (pure text, no toolchain), a pool of embedding actors turns the
statements into vectors, and the driver writes the Parquet table, the faiss index and the manifest.
The index is keyed by the tree's Mathlib revision and the embedding model: run again on the same
ones, it does nothing (and starts no Ray); on another revision, it rebuilds. It builds only in a folder of its own
(`pipelines.runtime.outputs`): new, empty or marked by an earlier build, never the tree it reads or a folder holding
it. The job prints only its own lines:
what it wrote and what it read; Ray's notices go to `OUT/logs/ray.log`, which its last line names.
"""

from __future__ import annotations

from lean_pool.command_line import hold_stops

if __name__ == "__main__":
    hold_stops()  # the imports below take seconds: a Ctrl-C or SIGTERM meanwhile stops the job in one line

import contextlib
import hashlib
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from fnmatch import fnmatch
from importlib import metadata
from pathlib import Path
from typing import Any, cast

import numpy as np
import pyarrow as pa
import pyarrow.fs as pafs
import ray
import ray.data  # imported before Ray starts: importing it sets up its loggers, which `init_ray_logging_to` reroutes
from omegaconf import DictConfig, OmegaConf

from lean_pool.lean_source import canonical_statement
from lean_pool.ray_start import init_ray_logging_to, ray_init_options
from operators.retrieval.declaration_index import (
    DECLARATION_SCHEMA,
    FAISS_FILE,
    MANIFEST_FILE,
    TABLE_FILE,
    DeclarationRow,
    build_faiss,
    source_revision,
    stale_reasons,
    stored_manifest,
    upload_index,
    write_index,
)
from operators.retrieval.declarations import parse_declarations
from operators.retrieval.embeddings import EmbedOperator
from operators.storage import is_uri, join, open_location
from pipelines.runtime.cli import SetupError, WorkWritten, compose_config, run_job
from pipelines.runtime.outputs import Output, placed_output

# The job's name, as its output folder's marker says it.
JOB = "index"
# Why a whole file gave no declaration, as `parse_file` counts it; the manifest's other skip reasons are declarations.
UNREADABLE_FILE = "unreadable_file"
PARSER_ERROR = "parser_error"
FILE_SKIPS = (UNREADABLE_FILE, PARSER_ERROR)
# Where the index keeps the log of the Ray that built it, under `out`.
RAY_LOG = "logs/ray.log"
# Characters of the index directory's hash that name the build's log file on this node while it runs (the index is
# written whole at the end, replacing the directory, so the log joins it afterwards).
LOG_DIGEST_CHARS = 16


def load_config(overrides: Sequence[str]) -> DictConfig:
    """Compose `conf/index.yaml` with command-line overrides."""
    return compose_config("index", overrides)


def lean_files(root: Path, include: Sequence[str], exclude: Sequence[str]) -> list[str]:
    """The tree's `.lean` files (paths relative to `root`, sorted) chosen by the include/exclude globs."""
    relative = sorted(str(p.relative_to(root)) for p in root.rglob("*.lean") if p.is_file())
    return [r for r in relative if any(fnmatch(r, g) for g in include) and not any(fnmatch(r, g) for g in exclude)]


def parse_file(root: Path, relative: str) -> tuple[list[DeclarationRow], Counter[str]]:
    """One file's declaration rows and skip counts; a file that cannot be read or parsed is one count, never a crash."""
    try:
        source = (root / relative).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return [], Counter({UNREADABLE_FILE: 1})
    try:
        parsed = parse_declarations(source)
    except Exception:  # a parser bug on one file must not cost the index of the others; it is counted
        return [], Counter({PARSER_ERROR: 1})
    rows: list[DeclarationRow] = [
        {
            "name": d.name, "kind": d.kind, "signature": d.signature, "canonical": canonical_statement(d.signature),
            "docstring": d.docstring, "file": relative, "line": d.line,
        }
        for d in parsed.declarations
    ]
    return rows, parsed.skipped


@ray.remote
def _parse_files(root: str, relatives: list[str]) -> tuple[pa.Table, Counter[str]]:
    rows, skipped = [], Counter[str]()
    for relative in relatives:
        file_rows, file_skipped = parse_file(Path(root), relative)
        rows.extend(file_rows)
        skipped.update(file_skipped)
    return pa.Table.from_pylist(rows, schema=DECLARATION_SCHEMA), skipped


def _file_bytes(root: Path, relatives: Sequence[str]) -> Iterator[tuple[str, bytes]]:
    for relative in relatives:
        yield relative, (root / relative).read_bytes()


def embed_table(table: pa.Table, cfg: DictConfig) -> pa.Table:
    """The declarations with a `vector` column, embedded by a pool of Ray Data actors, in (file, line) order."""
    embedding = OmegaConf.to_container(cfg.embedding, resolve=True)
    rows = int(cfg.embed.batch_size)
    # The job's own lines say what was built; Ray Data's progress bars would only add to them.
    ray.data.DataContext.get_current().enable_progress_bars = False
    # One block per batch, so every actor of the pool gets work even when the tree is small.
    blocks = [table.slice(start, rows) for start in range(0, table.num_rows, rows)]
    ds = ray.data.from_arrow(blocks).map_batches(
        EmbedOperator,
        fn_constructor_kwargs={"settings": embedding, "text_column": "canonical"},
        batch_format="pyarrow",
        batch_size=rows,
        compute=ray.data.ActorPoolStrategy(size=int(cfg.embed.actors)),
        num_cpus=float(cfg.embed.num_cpus),
        num_gpus=float(cfg.embed.num_gpus),
    )
    batches = list(ds.iter_batches(batch_format="pyarrow", batch_size=None))
    return pa.concat_tables(batches).sort_by([("file", "ascending"), ("line", "ascending")])


@dataclass(frozen=True)
class Source:
    """The tree to index and where its index goes, found on the driver before Ray starts: `out` is where it is built
    (faiss writes local files), `home` where it is kept (`out` itself, or the object-storage location it is copied
    to once built), `output` that place as the job's own folder."""

    root: Path
    out: Path
    home: str
    output: Output
    relatives: list[str]
    revision: str
    revision_source: str


def build_dir(location: str) -> Path:
    """Where this node builds an index bound for object storage at `location`, named after it."""
    digest = hashlib.sha256(location.encode()).hexdigest()[:LOG_DIGEST_CHARS]
    return Path(tempfile.gettempdir()) / "folklore" / "index" / digest / "build"


def find_source(cfg: DictConfig) -> Source:
    """The chosen `.lean` files of `cfg.mathlib_dir` and their revision; a `SetupError` when there is nothing to
    index or `out` is no place for an index (the tree itself, in it or holding it, or a place no run belongs), a
    `StorageError` when `out` is on object storage that cannot be reached."""
    location = str(cfg.out)
    if is_uri(location):
        open_location(location, create=True)
    out = build_dir(location) if is_uri(location) else Path(location).expanduser().resolve()
    root = Path(cfg.mathlib_dir).expanduser().resolve()
    if not root.is_dir():
        raise SetupError(f"mathlib_dir={cfg.mathlib_dir} is not a directory (point it at a Mathlib checkout)")
    output = placed_output("out", location, JOB, None,
                           {f"the tree it indexes, mathlib_dir={cfg.mathlib_dir}": str(root)})
    relatives = lean_files(root, list(cfg.include), list(cfg.exclude))
    if not relatives:
        raise SetupError(f"mathlib_dir={cfg.mathlib_dir} has no .lean file matching include={list(cfg.include)} "
                         f"and exclude={list(cfg.exclude)}")
    revision, revision_source = source_revision(root, _file_bytes(root, relatives))
    return Source(root, out, location if is_uri(location) else str(out), output, relatives, revision,
                  revision_source)


def current_index(cfg: DictConfig, source: Source) -> dict[str, Any] | None:
    """The manifest of the index already kept at `out` when it serves this revision and model (None: build one)."""
    existing = stored_manifest(source.home)
    if cfg.rebuild or not existing or stale_reasons(existing, source.revision, cfg.embedding.model_id):
        return None
    return existing


def build(cfg: DictConfig, source: Source) -> dict[str, Any]:
    """Parse, embed and write the index of `source` into its `out` (Ray running); the manifest written."""
    started = time.perf_counter()
    relatives = source.relatives
    chunk = int(cfg.parse.files_per_task)
    parts = ray.get([_parse_files.remote(str(source.root), relatives[i : i + chunk])
                     for i in range(0, len(relatives), chunk)])
    skipped: Counter[str] = sum((counts for _, counts in parts), Counter())
    declarations = pa.concat_tables([table for table, _ in parts])
    parsed_at = time.perf_counter()
    if declarations.num_rows == 0:
        raise SetupError(f"no declarations found under {source.root} ({len(relatives)} .lean files chosen)")
    embedded = embed_table(declarations, cfg)
    vectors = np.asarray(embedded.column("vector").combine_chunks().flatten(), dtype=np.float32).reshape(
        embedded.num_rows, -1
    )
    index, kind = build_faiss(vectors, cast(dict[str, Any], OmegaConf.to_container(cfg.faiss, resolve=True)))
    manifest = {
        "mathlib_rev": source.revision,
        "revision_source": source.revision_source,
        "source_dir": str(source.root),
        "model_id": cfg.embedding.model_id,
        "dim": int(vectors.shape[1]),
        "faiss_kind": kind,
        "files": len(relatives),
        "declarations": embedded.num_rows,
        "skipped": dict(sorted(skipped.items())),
        "parse_seconds": round(parsed_at - started, 3),
        "embed_seconds": round(time.perf_counter() - parsed_at, 3),
        "project_version": metadata.version("folklore"),
        "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    source.output.claim()
    write_index(source.out, embedded.drop_columns(["vector"]), index, manifest)
    if is_uri(source.home):
        upload_index(source.out, source.home)
    return manifest


def build_log(out: Path) -> Path:
    """Where this node keeps the Ray log of a build of `out` while it runs, named after `out`."""
    digest = hashlib.sha256(str(out).encode()).hexdigest()[:LOG_DIGEST_CHARS]
    return Path(tempfile.gettempdir()) / "folklore" / "index" / digest / RAY_LOG


@contextlib.contextmanager
def ray_for_build(cfg: DictConfig, out: Path) -> Iterator[Path | None]:
    """Ray for a build of `out`: the caller's when one runs (None: its logs are the caller's), else one started
    here, its notices sent to a log file on this node (this build's lines only), which is yielded and named on
    stderr when the build fails; stopped when the build is over."""
    if ray.is_initialized():
        yield None
        return
    log = build_log(out)
    log.unlink(missing_ok=True)
    options, note = ray_init_options(cfg.ray)
    if note:
        print(note, file=sys.stderr, flush=True)
    init_ray_logging_to(log, include_dashboard=False, **options)
    try:
        yield log
    except Exception:
        print(f"ray log: {log}", file=sys.stderr, flush=True)
        raise
    finally:
        ray.shutdown()


def keep_log(log: Path, home: str) -> str:
    """Copy the build's Ray log beside the index kept at `home` (`logs/ray.log`); where it is now."""
    filesystem, path = open_location(home)
    filesystem.create_dir(f"{path}/{RAY_LOG}".rsplit("/", 1)[0], recursive=True)
    pafs.copy_files(str(log), f"{path}/{RAY_LOG}", source_filesystem=pafs.LocalFileSystem(),
                    destination_filesystem=filesystem)
    return join(home, RAY_LOG)


def summary_lines(manifest: Mapping[str, Any], out: str, up_to_date: bool) -> list[str]:
    """What the user reads at the end: the files of the index, what they hold, and what could not be read."""
    state = "up to date, nothing rebuilt" if up_to_date else "built"
    skips = manifest["skipped"]
    unread = {reason: count for reason, count in skips.items() if reason in FILE_SKIPS}
    declarations = {reason: count for reason, count in skips.items() if reason not in FILE_SKIPS}
    skipped = ", ".join(f"{reason}={count}" for reason, count in declarations.items()) or "none"
    not_read = ", ".join(f"{reason}={count}" for reason, count in unread.items()) or "none"
    read = manifest["files"] - sum(unread.values())
    return [
        f"index: {out} ({state}, mathlib_rev {manifest['mathlib_rev']} from {manifest['revision_source']})",
        f"  table: {join(out, TABLE_FILE)} ({manifest['declarations']} declarations; skipped: {skipped})",
        f"  faiss: {join(out, FAISS_FILE)} ({manifest['faiss_kind']}, {manifest['model_id']}, dim {manifest['dim']})",
        f"  manifest: {join(out, MANIFEST_FILE)}",
        f"  files: {manifest['files']} .lean files, {read} read; not read: {not_read}",
    ]


def main(argv: Sequence[str] | None = None) -> int:
    """Build or confirm the index; exit 0 when it is there (a Ctrl-C once it is written included), 2 when it could
    not be built as configured, 130 on a Ctrl-C before."""
    work = WorkWritten()

    def run() -> None:
        cfg = load_config(sys.argv[1:] if argv is None else argv)
        source = find_source(cfg)
        existing = current_index(cfg, source)
        if existing is not None:
            print("\n".join(summary_lines(existing, source.home, up_to_date=True)), flush=True)
            return
        source.output.check_own()
        with ray_for_build(cfg, source.out) as log:
            manifest = build(cfg, source)
            work.mark()
            print("\n".join(summary_lines(manifest, source.home, up_to_date=False)), flush=True)
        if log is not None:
            print(f"ray log: {keep_log(log, source.home)}", flush=True)

    return run_job(run, (ValueError,), work,
                   interrupted="the index was not replaced; run the same command again to build it")


if __name__ == "__main__":
    sys.exit(main())
