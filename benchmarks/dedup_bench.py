"""Dedup quality and index speed on the MathlibLemma sample: `python benchmarks/dedup_bench.py [overrides]`.

Labelled set: every statement of `../shared/fixtures/mathliblemma-sample/benchmark` plays a Mathlib
declaration; each gets a restated copy (new lemma name, `lemma`/`theorem` swapped, bound variables
renamed, binder groups split or merged, another layout) that must match it, and must match none of the
other statements. Pairs are scored with the dedup decision (exact canonical tier, then cosine at the
configured threshold); the figures of the embedding tier alone are printed too. Speed: index build
time per 10k declarations (parse + embed + faiss) and query latency (embed + k-NN search) at a
Mathlib-like size, the real vectors padded with random unit vectors so the faiss kind is the one
`auto` picks at that size.

Overrides (OmegaConf dotlist): `embedding.*` (see conf/embedding/minilm.yaml), `dedup.threshold=...`,
`pad_rows=N`, `queries=N`, `k=N`.
"""

from __future__ import annotations

import re
import sys
import time
from pathlib import Path

import faiss
import numpy as np
from omegaconf import OmegaConf

from operators.declaration_index import Hit, build_faiss
from operators.declarations import canonical_statement, first_theorem, leading_binders, normalize_space
from operators.dedup import MATHLIB, best_match, candidate_statement
from operators.embed import encode_statements, load_encoder

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO.parent / "shared" / "fixtures" / "mathliblemma-sample" / "benchmark"
DEFAULTS = {"pad_rows": 100_000, "queries": 300, "k": 10, "seed": 0, "sweep": [0.96, 0.97, 0.98, 0.99, 0.995]}
_BINDER_NAMES = re.compile(r"[({⦃]\s*((?:[^\W\d][\w'₀-₉]*\s+)*[^\W\d][\w'₀-₉]*)\s*:(?!=)")


def restated(snippet: str, index: int) -> str:
    """A copy of a statement that Lean reads the same way: renamed lemma, other keyword, renamed bound
    variables (all suffixed at once), and binders laid out one per line (even copies) or on one line (odd)."""
    declaration = first_theorem(snippet)
    assert declaration is not None
    bound = sorted({n for m in _BINDER_NAMES.finditer(declaration.signature) for n in m.group(1).split()} - {"_"})
    signature = normalize_space(declaration.signature)
    if bound:
        names = "|".join(re.escape(n) for n in sorted(bound, key=len, reverse=True))
        signature = re.sub(rf"(?<![\w'.])(?:{names})(?![\w'!?₀-₉])", lambda m: m.group() + "_r", signature)
    if index % 2 == 0:
        signature = re.sub(r"\) \(", ")\n    (", signature).replace(" : ", " :\n    ", 1)
    keyword = "theorem" if declaration.kind == "lemma" else "lemma"
    name = f"restated_{index}_{declaration.name.replace('.', '_')}"
    return f"import Mathlib\n\n{keyword} {name}\n    {signature} := by\n  sorry\n"


def curried(snippet: str, index: int) -> str | None:
    """A copy with its last named hypothesis moved into the conclusion (`(h : P) : Q` -> `: P → Q`), which
    the canonical form does not undo: only the embedding tier can match it. None when there is no such hypothesis."""
    declaration = first_theorem(snippet)
    assert declaration is not None
    groups, rest = leading_binders(normalize_space(declaration.signature))
    m = re.fullmatch(r"\((\S+) : (.*)\)", groups[-1]) if groups else None
    if m is None or not rest.startswith(": ") or re.search(rf"(?<![\w'.]){re.escape(m.group(1))}(?![\w'])", rest):
        return None
    signature = " ".join(groups[:-1] + [f": ({m.group(2)}) → {rest[2:]}"])
    return f"import Mathlib\n\ntheorem curried_{index}\n    {signature} := by\n  sorry\n"


def pair_figures(scores: np.ndarray, exact: np.ndarray, threshold: float) -> tuple[int, int, int]:
    """(true, false, missed) positives over all (copy i, statement j) pairs; i == j are the positives."""
    predicted = (scores >= threshold) | exact
    positives = np.eye(*scores.shape, dtype=bool)
    tp = int((predicted & positives).sum())
    return tp, int((predicted & ~positives).sum()), int(positives.sum()) - tp


def main(argv: list[str]) -> None:
    cfg = OmegaConf.merge(
        {"embedding": OmegaConf.load(REPO / "conf" / "embedding" / "minilm.yaml")},
        {"dedup": OmegaConf.load(REPO / "conf" / "dedup" / "default.yaml")},
        {"faiss": OmegaConf.load(REPO / "conf" / "index.yaml").faiss},
        DEFAULTS,
        OmegaConf.from_dotlist(argv),
    )
    files = sorted(FIXTURES.rglob("*.lean"))
    if not files:
        sys.exit(f"no fixtures under {FIXTURES}")
    encoder = load_encoder(OmegaConf.to_container(cfg.embedding))
    encode_statements(encoder, ["warm up"])

    started = time.perf_counter()
    snippets = [f.read_text() for f in files]
    declarations = [first_theorem(s) for s in snippets]
    canonical = [canonical_statement(d.signature) for d in declarations]
    vectors = encode_statements(encoder, canonical)
    build_faiss(vectors, OmegaConf.to_container(cfg.faiss))
    build_s_per_10k = (time.perf_counter() - started) / len(files) * 10_000

    threshold = float(cfg.dedup.threshold)
    copies = [candidate_statement(restated(s, i)) for i, s in enumerate(snippets)]
    moved = {i: candidate_statement(c) for i, s in enumerate(snippets) if (c := curried(s, i))}
    totals = np.zeros(3, dtype=int)
    sweep = np.zeros((len(cfg.sweep), 3), dtype=int)
    for label, query, rows in (("restated", copies, list(range(len(copies)))),
                               ("curried", list(moved.values()), list(moved))):
        scores = encode_statements(encoder, query) @ vectors.T
        exact = np.array([[q == o for o in canonical] for q in query])
        # Put each copy's own statement on the diagonal: row r of `scores` is the copy of statement rows[r].
        order = rows + [j for j in range(len(canonical)) if j not in set(rows)]
        scores, exact = scores[:, order], exact[:, order]
        tp, fp, fn = pair_figures(scores, exact, threshold)
        totals += (tp, fp, fn)
        sweep += [pair_figures(scores, exact, float(t)) for t in cfg.sweep]
        own = scores[np.eye(*scores.shape, dtype=bool)]
        others = scores[~np.eye(*scores.shape, dtype=bool)]
        print(f"{label}: {len(query)} copies, {int(np.diag(exact).sum())} identical after canonicalization; "
              f"matched={tp} false_matches={fp} missed={fn}; "
              f"own cosine min={own.min():.4f} p5={np.percentile(own, 5):.4f}; "
              f"other cosine max={others.max():.4f} p99.9={np.percentile(others, 99.9):.4f}")
    figures = [f"{t}: precision={a / max(a + b, 1):.4f} recall={a / (a + c):.4f}"
               for t, (a, b, c) in zip(cfg.sweep, sweep, strict=True)]
    print("threshold sweep: " + "; ".join(figures))
    tp, fp, fn = (int(x) for x in totals)
    precision, recall = (tp / (tp + fp) if tp + fp else 1.0), tp / (tp + fn)
    print(f"model={cfg.embedding.model_id} statements={len(files)} threshold={threshold} "
          f"pairs={sum(len(c) for c in (copies, moved)) * len(canonical)}")

    rng = np.random.default_rng(int(cfg.seed))
    padding = rng.standard_normal((max(0, int(cfg.pad_rows) - len(vectors)), vectors.shape[1])).astype(np.float32)
    padding /= np.linalg.norm(padding, axis=1, keepdims=True)
    padded = np.vstack([vectors, padding])
    built = time.perf_counter()
    index, kind = build_faiss(padded, OmegaConf.to_container(cfg.faiss))
    faiss_s_per_10k = (time.perf_counter() - built) / len(padded) * 10_000
    index_bytes = len(faiss.serialize_index(index))
    names = [d.name for d in declarations] + [f"pad{i}" for i in range(len(padding))]
    latencies, found = [], 0
    for i in range(min(int(cfg.queries), len(copies))):
        start = time.perf_counter()
        scores_row, rows = index.search(encode_statements(encoder, [copies[i]]), int(cfg.k))
        latencies.append((time.perf_counter() - start) * 1000)
        hits = [Hit(int(r), names[r], canonical[r] if r < len(canonical) else "", float(s))
                for s, r in zip(scores_row[0], rows[0], strict=True) if r >= 0]
        match = best_match(copies[i], MATHLIB, hits, threshold)
        found += match is not None and match.name == declarations[i].name
    print(f"index of {len(padded)} rows: faiss={kind} faiss_build_s_per_10k={faiss_s_per_10k:.3f} "
          f"memory_mb_per_10k={index_bytes / len(padded) * 10_000 / 2**20:.1f} "
          f"copies found through the index={found}/{len(latencies)}")
    p50, p99 = np.percentile(latencies, [50, 99])
    print(f"precision={precision:.4f} recall={recall:.4f} build_s_per_10k={build_s_per_10k:.2f} "
          f"query_p50_ms={p50:.2f} query_p99_ms={p99:.2f}")


if __name__ == "__main__":
    main(sys.argv[1:])
