"""Dedup quality and index speed on the MathlibLemma sample: `python benchmarks/dedup_bench.py [overrides]`.

Labelled set: every statement of `../shared/fixtures/mathliblemma-sample/benchmark` plays a Mathlib
declaration; each gets copies that Lean reads as the same statement and that must match it: `restated`
(new lemma name, `lemma`/`theorem` swapped, bound variables renamed, binder groups split or merged,
another layout), `curried` (its last hypothesis moved after the colon as a premise) and `reordered`
(two adjacent independent explicit binders swapped, which the canonical form does not undo: only the
embedding tier can match it). A copy must match none of the other statements, except those whose
canonical statement is identical to its own (the sample repeats a few statements: those are true
duplicates). Pairs are scored with the dedup decision (exact canonical tier, then cosine at the
configured threshold), over a sweep of thresholds too; `show=N` prints N misses and false matches per
variant. Speed: index build time per 10k declarations (parse + embed + faiss, model already loaded)
and query latency (embed + k-NN search) at a Mathlib-like size, the real vectors padded with random
unit vectors so the faiss kind is the one `auto` picks at that size.

Overrides (OmegaConf dotlist): `embedding.*` (see conf/embedding/minilm.yaml), `dedup.threshold=...`,
`pad_rows=N`, `queries=N`, `k=N`, `show=N`.
"""

from __future__ import annotations

import re
import sys
import time
from pathlib import Path

import faiss
import numpy as np
from omegaconf import OmegaConf

from lean_pool.lean_source import canonical_statement, leading_binders, normalize_space
from operators.dedup import MATHLIB, best_match, candidate_statement
from operators.retrieval.declaration_index import Hit, build_faiss
from operators.retrieval.declarations import first_theorem
from operators.retrieval.embeddings import cpu_share, encode_statements, load_encoder

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO.parent / "shared" / "fixtures" / "mathliblemma-sample" / "benchmark"
DEFAULTS = {"pad_rows": 100_000, "queries": 300, "k": 10, "seed": 0, "show": 0,
            "sweep": [0.94, 0.95, 0.96, 0.97, 0.975, 0.98, 0.985, 0.99, 0.995]}
_BINDER_NAMES = re.compile(r"[({⦃]\s*((?:[^\W\d][\w'₀-₉]*\s+)*[^\W\d][\w'₀-₉]*)\s*:(?!=)")
_UNTYPED_BINDER = re.compile(r"[({⦃]\s*((?:[^\W\d][\w'₀-₉]*\s+)*[^\W\d][\w'₀-₉]*)\s*[)}⦄]")


def restated(snippet: str, index: int) -> str:
    """A copy of a statement that Lean reads the same way: renamed lemma, other keyword, renamed bound
    variables (all suffixed at once, `{α}` binders too), and binders laid out one per line (even copies) or on one line
    (odd)."""
    declaration = first_theorem(snippet)
    assert declaration is not None
    signature = normalize_space(declaration.signature)
    untyped = [m for g in leading_binders(signature)[0] if (m := _UNTYPED_BINDER.fullmatch(g))]
    bound = sorted({n for m in [*_BINDER_NAMES.finditer(signature), *untyped] for n in m.group(1).split()} - {"_"})
    if bound:
        names = "|".join(re.escape(n) for n in sorted(bound, key=len, reverse=True))
        signature = re.sub(rf"(?<![\w'.])(?:{names})(?![\w'!?₀-₉])", lambda m: m.group() + "_r", signature)
    if index % 2 == 0:
        signature = re.sub(r"\) \(", ")\n    (", signature).replace(" : ", " :\n    ", 1)
    keyword = "theorem" if declaration.kind == "lemma" else "lemma"
    name = f"restated_{index}_{declaration.name.replace('.', '_')}"
    return f"import Mathlib\n\n{keyword} {name}\n    {signature} := by\n  sorry\n"


def _top_level(text: str) -> str:
    """`text` with what is inside parentheses blanked, so a search sees its outermost connectives only."""
    out, depth = [], 0
    for c in text:
        depth += c in "([{⟨⦃"
        out.append(c if depth == 0 else " ")
        depth -= c in ")]}⟩⦄"
    return "".join(out)


def curried(snippet: str, index: int) -> str | None:
    """A copy with its last named hypothesis moved into the conclusion (`(h : P) : Q` -> `: (P) → Q`, and
    `: (P) → (Q ↔ R)` since `↔` binds looser than `→`). None when there is no such hypothesis (one used
    later, or with a default value, stays)."""
    declaration = first_theorem(snippet)
    assert declaration is not None
    groups, rest = leading_binders(normalize_space(declaration.signature))
    m = re.fullmatch(r"\((\S+) : (.*)\)", groups[-1]) if groups else None
    if (m is None or ":=" in m.group(2) or not rest.startswith(": ")
            or re.search(rf"(?<![\w'.]){re.escape(m.group(1))}(?![\w'])", rest)):
        return None
    conclusion = f"({rest[2:]})" if "↔" in _top_level(rest[2:]) else rest[2:]
    signature = " ".join(groups[:-1] + [f": ({m.group(2)}) → {conclusion}"])
    return f"import Mathlib\n\ntheorem curried_{index}\n    {signature} := by\n  sorry\n"


def reordered(snippet: str, index: int) -> str | None:
    """A copy with the last two adjacent explicit binders swapped (`(a : A) (h : P) : Q` -> `(h : P) (a : A) : Q`)
    where the second does not mention the first; None when there is no such pair."""
    declaration = first_theorem(snippet)
    assert declaration is not None
    groups, rest = leading_binders(normalize_space(declaration.signature))
    for i in range(len(groups) - 2, -1, -1):
        first = re.fullmatch(r"\((\S+) : .*\)", groups[i])
        if first and groups[i + 1].startswith("(") and not re.search(
            rf"(?<![\w'.]){re.escape(first.group(1))}(?![\w'])", groups[i + 1]
        ):
            swapped = groups[:i] + [groups[i + 1], groups[i]] + groups[i + 2 :]
            return f"import Mathlib\n\ntheorem reordered_{index}\n    {' '.join(swapped + [rest])} := by\n  sorry\n"
    return None


def pair_figures(predicted: np.ndarray, positives: np.ndarray) -> tuple[int, int, int]:
    """(true, false, missed) positives over all (copy, statement) pairs."""
    tp = int((predicted & positives).sum())
    return tp, int((predicted & ~positives).sum()), int(positives.sum()) - tp


def show_errors(label: str, query: list[str], canonical: list[str], scores: np.ndarray, predicted: np.ndarray,
                positives: np.ndarray, count: int) -> None:
    """The first `count` missed and falsely matched pairs of one variant, with their cosine."""
    for kind, mask in (("missed", positives & ~predicted), ("false match", predicted & ~positives)):
        for r, j in list(zip(*np.nonzero(mask), strict=True))[:count]:
            print(f"  {label} {kind} cos={scores[r, j]:.4f}\n    copy: {query[r]}\n    stmt: {canonical[j]}")


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
    totals, pairs = np.zeros(3, dtype=int), 0
    sweep = np.zeros((len(cfg.sweep), 3), dtype=int)
    same = np.array([[a == b for b in canonical] for a in canonical])
    variants = {
        make.__name__: {i: candidate_statement(c) for i, s in enumerate(snippets) if (c := make(s, i))}
        for make in (restated, curried, reordered)
    }
    for label, made in variants.items():
        query, rows = list(made.values()), list(made)
        scores = encode_statements(encoder, query) @ vectors.T
        exact = np.array([[q == o for o in canonical] for q in query])
        # A copy must match its own statement and the sample's exact repeats of it, nothing else.
        positives = same[rows]
        pairs += positives.size
        for t, row in zip(cfg.sweep, sweep, strict=True):
            row += pair_figures((scores >= float(t)) | exact, positives)
        predicted = (scores >= threshold) | exact
        tp, fp, fn = pair_figures(predicted, positives)
        totals += (tp, fp, fn)
        own = scores[np.arange(len(rows)), rows]
        others = scores[~positives]
        print(f"{label}: {len(query)} copies, {int(exact[np.arange(len(rows)), rows].sum())} identical after "
              f"canonicalization; matched={tp} false_matches={fp} missed={fn}; "
              f"own cosine min={own.min():.4f} p5={np.percentile(own, 5):.4f}; "
              f"other cosine max={others.max():.4f} p99.9={np.percentile(others, 99.9):.4f}")
        show_errors(label, query, canonical, scores, predicted, positives, int(cfg.show))
    figures = [f"{t}: precision={a / max(a + b, 1):.4f} recall={a / (a + c):.4f}"
               for t, (a, b, c) in zip(cfg.sweep, sweep, strict=True)]
    print("threshold sweep: " + "; ".join(figures))
    tp, fp, fn = (int(x) for x in totals)
    precision, recall = (tp / (tp + fp) if tp + fp else 1.0), tp / (tp + fn)
    threads = cpu_share() if cfg.embedding.threads is None else cfg.embedding.threads
    print(f"model={cfg.embedding.model_id} threads={threads} batch_size={cfg.embedding.batch_size} "
          f"statements={len(files)} threshold={threshold} pairs={pairs}")

    rng = np.random.default_rng(int(cfg.seed))
    padding = rng.standard_normal((max(0, int(cfg.pad_rows) - len(vectors)), vectors.shape[1])).astype(np.float32)
    padding /= np.linalg.norm(padding, axis=1, keepdims=True)
    padded = np.vstack([vectors, padding])
    built = time.perf_counter()
    index, kind = build_faiss(padded, OmegaConf.to_container(cfg.faiss))
    faiss_s_per_10k = (time.perf_counter() - built) / len(padded) * 10_000
    index_bytes = len(faiss.serialize_index(index))
    names = [d.name for d in declarations] + [f"pad{i}" for i in range(len(padding))]
    copies = list(variants["restated"].values())
    latencies, found = [], 0
    for i in range(min(int(cfg.queries), len(copies))):
        start = time.perf_counter()
        scores_row, ids = index.search(encode_statements(encoder, [copies[i]]), int(cfg.k))
        latencies.append((time.perf_counter() - start) * 1000)
        hits = [Hit(int(r), names[r], canonical[r] if r < len(canonical) else "", float(s))
                for s, r in zip(scores_row[0], ids[0], strict=True) if r >= 0]
        match = best_match(copies[i], MATHLIB, hits, threshold)
        found += match is not None and match.name in {names[j] for j in np.flatnonzero(same[i])}
    print(f"index of {len(padded)} rows: faiss={kind} faiss_build_s_per_10k={faiss_s_per_10k:.3f} "
          f"memory_mb_per_10k={index_bytes / len(padded) * 10_000 / 2**20:.1f} "
          f"copies found through the index={found}/{len(latencies)}")
    p50, p99 = np.percentile(latencies, [50, 99])
    print(f"precision={precision:.4f} recall={recall:.4f} build_s_per_10k={build_s_per_10k:.2f} "
          f"query_p50_ms={p50:.2f} query_p99_ms={p99:.2f}")


if __name__ == "__main__":
    main(sys.argv[1:])
