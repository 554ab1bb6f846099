"""The declaration index on disk: Parquet rows, a faiss index of their vectors, and a manifest.

Indexing all of Mathlib is done once and reused by many runs, so the three files travel together in
one directory and the manifest says which Mathlib revision and which embedding model made them. An
index is refused (not silently used) when either differs from what the run expects: vectors of
another model are meaningless, and declarations of another Mathlib are not the ones Lean will see.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import tempfile
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypedDict

import faiss
import numpy as np
import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from operators.retrieval.embeddings import Encoder, encode_statements, load_encoder
from operators.storage import is_uri, resolve, without_options

TABLE_FILE = "declarations.parquet"
FAISS_FILE = "declarations.faiss"
MANIFEST_FILE = "manifest.json"
# Node-local copies of indexes kept on object storage: under the temporary directory, named by a digest this long.
NODE_COPY_DIR = "folklore-index"
NODE_COPY_DIGEST_CHARS = 16
# Bumped when the files' layout or the canonical statements they store change, so an index of an older
# format is rebuilt, not misread (2: hypotheses before or after the colon, universes, parentheses).
FORMAT = 2

DECLARATION_SCHEMA = pa.schema(
    [
        ("name", pa.string()),
        ("kind", pa.string()),
        ("signature", pa.string()),
        ("canonical", pa.string()),
        ("docstring", pa.string()),
        ("file", pa.string()),
        ("line", pa.int32()),
    ]
)


class DeclarationRow(TypedDict):
    """One row of the index's table (tests/test_row_shapes.py holds it equal to the schema): a declaration as
    `operators.retrieval.declarations` reads it ("" for no docstring), its canonical statement, file and line."""

    name: str
    kind: str
    signature: str
    canonical: str
    docstring: str
    file: str
    line: int


class StaleIndex(RuntimeError):
    """The index on disk was made from another Mathlib revision, another model, or an older layout."""


@dataclass(frozen=True)
class Hit:
    """One declaration found for a query: its row id, full name, canonical statement and cosine score."""

    row: int
    name: str
    canonical: str
    score: float


def git_head(root: Path) -> str | None:
    """The commit a git checkout has out (a detached HEAD, a loose ref or a packed ref), read from `.git`."""
    git = root / ".git"
    head_file = git / "HEAD"
    if not head_file.is_file():
        return None
    head = head_file.read_text().strip()
    if not head.startswith("ref: "):
        return head
    ref = head[len("ref: ") :]
    if (git / ref).is_file():
        return (git / ref).read_text().strip()
    packed = git / "packed-refs"
    for line in packed.read_text().splitlines() if packed.is_file() else []:
        sha, _, name = line.partition(" ")
        if name == ref:
            return sha
    return None


def manifest_mathlib_rev(root: Path) -> str | None:
    """The Mathlib commit a Lake project pins in its `lake-manifest.json`, if any."""
    manifest = root / "lake-manifest.json"
    if not manifest.is_file():
        return None
    packages = json.loads(manifest.read_text()).get("packages", [])
    return next((p.get("rev") for p in packages if str(p.get("name", "")).lower() == "mathlib"), None)


def content_hash(files: Iterable[tuple[str, bytes]]) -> str:
    """A revision for a tree with no git and no manifest: the hash of its (relative path, content) pairs."""
    digest = hashlib.sha256()
    for path, data in sorted(files):
        digest.update(path.encode() + b"\0" + hashlib.sha256(data).digest())
    return "sha256:" + digest.hexdigest()


def source_revision(root: Path, files: Iterable[tuple[str, bytes]]) -> tuple[str, str]:
    """(revision, where it came from) of a source tree: git HEAD, else the lake manifest's Mathlib, else a
    content hash."""
    head = git_head(root)
    if head:
        return head, "git"
    pinned = manifest_mathlib_rev(root)
    if pinned:
        return pinned, "lake-manifest"
    return content_hash(files), "content"


def build_faiss(vectors: np.ndarray, settings: Mapping[str, Any]) -> tuple[faiss.Index, str]:
    """An inner-product faiss index of unit vectors (so scores are cosines): exact `flat` up to
    `flat_max_rows` rows, graph-based `hnsw` above (or as `settings.kind` forces)."""
    kind = settings["kind"]
    if kind == "auto":
        kind = "flat" if len(vectors) <= int(settings["flat_max_rows"]) else "hnsw"
    dim = vectors.shape[1]
    index: faiss.Index
    if kind == "flat":
        index = faiss.IndexFlatIP(dim)
    elif kind == "hnsw":
        index = graph = faiss.IndexHNSWFlat(dim, int(settings["hnsw_m"]), faiss.METRIC_INNER_PRODUCT)
        graph.hnsw.efConstruction = int(settings["hnsw_ef_construction"])
        graph.hnsw.efSearch = int(settings["hnsw_ef_search"])
    else:
        raise ValueError(f"unknown faiss index kind {kind!r} (expected auto, flat or hnsw)")
    index.add(np.ascontiguousarray(vectors, dtype=np.float32))
    return index, kind


def write_index(out_dir: Path, table: pa.Table, index: faiss.Index, manifest: Mapping[str, Any]) -> None:
    """Write the three files into `out_dir`, the old manifest removed first and the new one written last, each file
    under a hidden name and then renamed: a reader finds the whole index or none (a clear `StaleIndex`), never half
    of one, and nothing else in the folder is touched or removed."""
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / MANIFEST_FILE).unlink(missing_ok=True)
    _write_whole(out_dir / TABLE_FILE, lambda path: pq.write_table(table.cast(DECLARATION_SCHEMA), path))
    _write_whole(out_dir / FAISS_FILE, lambda path: faiss.write_index(index, str(path)))
    _write_whole(out_dir / MANIFEST_FILE, lambda path: path.write_text(
        json.dumps({"format": FORMAT, **manifest}, indent=2, sort_keys=True)))


def _write_whole(path: Path, write: Callable[[Path], object]) -> None:
    """Have `write` write `path` under a hidden name beside it, then rename it over `path` (a link there is replaced,
    not followed); a failed write leaves no hidden file behind."""
    temporary = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    try:
        write(temporary)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    temporary.replace(path)


def node_local(location: str | Path) -> Path:
    """The index at `location` as a directory on this node: a local path as it is; an index on object storage
    (`s3://...`) copied once per node and index build into the temporary directory, since faiss reads only local
    files. The copy is named after the location and its manifest, so a rebuilt index is copied anew, and it is
    swapped in whole, so actors starting together on one node never read half a copy."""
    if not is_uri(str(location)):
        return Path(location).expanduser().resolve()
    filesystem, path = resolve(str(location))
    manifest_path = f"{path}/{MANIFEST_FILE}"
    if filesystem.get_file_info(manifest_path).type != pafs.FileType.File:
        raise StaleIndex(f"declaration index {without_options(str(location))}: no {MANIFEST_FILE} there "
                         f"(build it with `folklore index`)")
    with filesystem.open_input_stream(manifest_path) as stream:
        manifest = stream.read()
    digest = hashlib.sha256(str(location).encode() + manifest).hexdigest()[:NODE_COPY_DIGEST_CHARS]
    local = Path(tempfile.gettempdir()) / NODE_COPY_DIR / digest
    if not (local / MANIFEST_FILE).is_file():
        staging = local.with_name(f"{digest}.{uuid.uuid4().hex}.partial")
        staging.mkdir(parents=True)
        for name in (TABLE_FILE, FAISS_FILE, MANIFEST_FILE):
            pafs.copy_files(f"{path}/{name}", str(staging / name), source_filesystem=filesystem,
                            destination_filesystem=pafs.LocalFileSystem())
        try:
            staging.rename(local)
        except OSError:  # another process on this node swapped its copy in first
            shutil.rmtree(staging, ignore_errors=True)
    return local


def upload_index(local: Path, location: str) -> None:
    """Copy the index built in `local` to `location` on object storage. The old manifest goes first and the new one
    last, so a reader (`node_local`) finds either no index there (a clear `StaleIndex`) or the whole new one."""
    filesystem, path = resolve(location)
    filesystem.create_dir(path, recursive=True)
    if filesystem.get_file_info(f"{path}/{MANIFEST_FILE}").type == pafs.FileType.File:
        filesystem.delete_file(f"{path}/{MANIFEST_FILE}")
    for name in (TABLE_FILE, FAISS_FILE, MANIFEST_FILE):
        pafs.copy_files(str(local / name), f"{path}/{name}", source_filesystem=pafs.LocalFileSystem(),
                        destination_filesystem=filesystem)


def stored_manifest(location: str) -> dict[str, Any] | None:
    """The manifest of the index kept at `location` (a local directory or object storage), None when there is none."""
    if not is_uri(location):
        return read_manifest(Path(location))
    filesystem, path = resolve(location)
    if filesystem.get_file_info(f"{path}/{MANIFEST_FILE}").type != pafs.FileType.File:
        return None
    with filesystem.open_input_stream(f"{path}/{MANIFEST_FILE}") as stream:
        return json.loads(stream.read().decode())


def read_manifest(out_dir: Path) -> dict[str, Any] | None:
    """The manifest of an index directory, or None when there is no complete index there."""
    path = out_dir / MANIFEST_FILE
    return json.loads(path.read_text()) if path.is_file() else None


def stale_reasons(manifest: Mapping[str, Any] | None, revision: str | None, model_id: str) -> list[str]:
    """Why an index cannot serve a run that expects `revision` (None: any) and embeds with `model_id`."""
    if manifest is None:
        return ["no index there (build it with `folklore index`)"]
    reasons = []
    if manifest.get("format") != FORMAT:
        reasons.append(f"layout {manifest.get('format')} is not the current {FORMAT}")
    if revision is not None and manifest.get("mathlib_rev") != revision:
        reasons.append(f"built from Mathlib {manifest.get('mathlib_rev')}, the run uses {revision}")
    if manifest.get("model_id") != model_id:
        reasons.append(f"embedded with {manifest.get('model_id')}, the run embeds with {model_id}")
    return reasons


class DeclarationIndex:
    """An opened index: the declarations table, their faiss index and the encoder that made the vectors."""

    def __init__(self, location: str | Path, embedding: Mapping[str, Any], revision: str | None) -> None:
        out_dir = node_local(location)
        self.manifest = read_manifest(out_dir)
        reasons = stale_reasons(self.manifest, revision, embedding["model_id"])
        if reasons:
            raise StaleIndex(f"declaration index {out_dir} cannot be used: " + "; ".join(reasons))
        self.table = pq.read_table(out_dir / TABLE_FILE)
        self.names: list[str] = self.table.column("name").to_pylist()
        self.canonical: list[str] = self.table.column("canonical").to_pylist()
        self.faiss = faiss.read_index(str(out_dir / FAISS_FILE))
        self.encoder: Encoder = load_encoder(embedding)
        self._row_of: dict[str, int] | None = None  # name -> first row, built on the first `find`

    def search_vectors(self, vectors: np.ndarray, k: int) -> list[list[Hit]]:
        """The k nearest declarations of each query vector, best first."""
        scores, rows = self.faiss.search(np.ascontiguousarray(vectors, dtype=np.float32), k)
        return [
            [
                Hit(int(r), self.names[r], self.canonical[r], float(s))
                for s, r in zip(score_row, row_ids, strict=True)
                if r >= 0
            ]
            for score_row, row_ids in zip(scores, rows, strict=True)
        ]

    def search(self, statements: Sequence[str], k: int) -> list[list[Hit]]:
        """The k nearest declarations of each statement (canonical signature text), best first."""
        if not statements:
            return []
        return self.search_vectors(encode_statements(self.encoder, statements), k)

    def rows(self, ids: Sequence[int]) -> list[dict[str, Any]]:
        """The declarations at these row ids, as dicts."""
        return self.table.take(pa.array(ids, pa.int64())).to_pylist()

    def find(self, names: Sequence[str]) -> dict[str, dict[str, Any]]:
        """The declarations named exactly so (the first of each name), by name; names the index lacks are absent."""
        if self._row_of is None:
            self._row_of = {}
            for row, name in enumerate(self.names):
                self._row_of.setdefault(name, row)
        found = [name for name in dict.fromkeys(names) if name in self._row_of]
        return dict(zip(found, self.rows([self._row_of[name] for name in found]), strict=True))
