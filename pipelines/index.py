"""`python -m pipelines.index mathlib_dir=PATH out=DIR`: the declaration index that dedup and grounding read.

Ray tasks parse the Lean files (pure text, no toolchain), a pool of embedding actors turns the
statements into vectors, and the driver writes the Parquet table, the faiss index and the manifest.
The index is keyed by the tree's Mathlib revision and the embedding model: run again on the same
ones, it does nothing; on another revision, it rebuilds.
"""

from __future__ import annotations

import sys
import time
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime, timezone
from fnmatch import fnmatch
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import ray
from omegaconf import DictConfig, OmegaConf

from conf import ray_init_options
from lean_pool.lean_source import canonical_statement
from operators.retrieval.declaration_index import (
    DECLARATION_SCHEMA,
    build_faiss,
    read_manifest,
    source_revision,
    stale_reasons,
    write_index,
)
from operators.retrieval.declarations import parse_declarations
from operators.retrieval.embeddings import EmbedOperator
from pipelines.runtime.cli import compose_config, run_job


def load_config(overrides: Sequence[str]) -> DictConfig:
    """Compose `conf/index.yaml` with command-line overrides."""
    return compose_config("index", overrides)


def lean_files(root: Path, include: Sequence[str], exclude: Sequence[str]) -> list[str]:
    """The tree's `.lean` files (paths relative to `root`, sorted) chosen by the include/exclude globs."""
    relative = sorted(str(p.relative_to(root)) for p in root.rglob("*.lean") if p.is_file())
    return [r for r in relative if any(fnmatch(r, g) for g in include) and not any(fnmatch(r, g) for g in exclude)]


def parse_file(root: Path, relative: str) -> tuple[list[dict[str, Any]], Counter[str]]:
    """One file's declaration rows and skip counts; a file that cannot be read or parsed is one count, never a crash."""
    try:
        source = (root / relative).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return [], Counter({"unreadable_file": 1})
    try:
        parsed = parse_declarations(source)
    except Exception:  # a parser bug on one file must not cost the index of the others; it is counted
        return [], Counter({"parser_error": 1})
    rows = [
        {
            "name": d.name, "kind": d.kind, "signature": d.signature, "canonical": canonical_statement(d.signature),
            "docstring": d.docstring, "file": relative, "line": d.line,
        }
        for d in parsed.declarations
    ]
    return rows, parsed.skipped


@ray.remote
def _parse_files(root: str, relatives: list[str]) -> tuple[pa.Table, Counter[str]]:
    rows, skipped = [], Counter()
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
    rows = int(cfg.embed.rows_per_batch)
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


def build(cfg: DictConfig) -> dict[str, Any]:
    """Parse, embed and write the index of `cfg.mathlib_dir` into `cfg.out`; the manifest written (or
    the existing one, with `up_to_date` set, when nothing had to be done)."""
    root = Path(cfg.mathlib_dir).expanduser().resolve()
    out = Path(cfg.out).expanduser().resolve()
    if not root.is_dir():
        raise FileNotFoundError(f"mathlib_dir={cfg.mathlib_dir} is not a directory (point it at a Mathlib checkout)")
    relatives = lean_files(root, list(cfg.include), list(cfg.exclude))
    revision, revision_source = source_revision(root, _file_bytes(root, relatives))
    existing = read_manifest(out)
    if not cfg.rebuild and existing and not stale_reasons(existing, revision, cfg.embedding.model_id):
        return {**existing, "up_to_date": True}
    started = time.perf_counter()
    chunk = int(cfg.parse.files_per_task)
    parts = ray.get([_parse_files.remote(str(root), relatives[i : i + chunk]) for i in range(0, len(relatives), chunk)])
    skipped: Counter[str] = sum((counts for _, counts in parts), Counter())
    declarations = pa.concat_tables([table for table, _ in parts]) if parts else DECLARATION_SCHEMA.empty_table()
    parsed_at = time.perf_counter()
    if declarations.num_rows == 0:
        raise ValueError(f"no declarations found under {root} ({len(relatives)} .lean files chosen)")
    embedded = embed_table(declarations, cfg)
    vectors = np.asarray(embedded.column("vector").combine_chunks().flatten(), dtype=np.float32).reshape(
        embedded.num_rows, -1
    )
    index, kind = build_faiss(vectors, OmegaConf.to_container(cfg.faiss, resolve=True))
    manifest = {
        "mathlib_rev": revision,
        "revision_source": revision_source,
        "source_dir": str(root),
        "model_id": cfg.embedding.model_id,
        "dim": int(vectors.shape[1]),
        "faiss_kind": kind,
        "files": len(relatives),
        "declarations": embedded.num_rows,
        "skipped": dict(sorted(skipped.items())),
        "parse_seconds": round(parsed_at - started, 3),
        "embed_seconds": round(time.perf_counter() - parsed_at, 3),
        "project_version": metadata.version("folklore"),
        "created_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }
    write_index(out, embedded.drop_columns(["vector"]), index, manifest)
    return {**manifest, "up_to_date": False}


def summary_lines(manifest: Mapping[str, Any], out: str) -> list[str]:
    """What the user reads at the end: where the index is, of what, and what was skipped."""
    state = "up to date, nothing rebuilt" if manifest["up_to_date"] else "built"
    skipped = ", ".join(f"{reason}={count}" for reason, count in manifest["skipped"].items()) or "none"
    return [
        f"index: {out} ({state})",
        f"  mathlib_rev: {manifest['mathlib_rev']} (from {manifest['revision_source']})",
        f"  declarations: {manifest['declarations']} from {manifest['files']} files; skipped: {skipped}",
        f"  model: {manifest['model_id']} (dim {manifest['dim']}), faiss: {manifest['faiss_kind']}",
    ]


def main(argv: Sequence[str] | None = None) -> int:
    """Build or confirm the index; exit 0 when it is there, 2 when it could not be built as configured."""

    def run() -> None:
        cfg = load_config(sys.argv[1:] if argv is None else argv)
        if not ray.is_initialized():
            options, note = ray_init_options(cfg.ray)
            if note:
                print(note, file=sys.stderr, flush=True)
            ray.init(include_dashboard=False, **options)
        manifest = build(cfg)
        print("\n".join(summary_lines(manifest, str(cfg.out))), flush=True)

    return run_job(run, (FileNotFoundError, ValueError))


if __name__ == "__main__":
    sys.exit(main())
