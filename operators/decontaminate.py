"""decontaminate: which statements of a corpus restate a problem of an evaluation benchmark, and how surely.

A prover or autoformalizer trained on a benchmark's problems, even renamed or with the hypotheses shuffled, scores
higher on that benchmark for no good reason. Statements are compared in four ways, strongest first, each a switch
of its own (`conf/decontaminate/default.yaml`):
- `exact`: the same `statement_key` (Lean's reading up to theorem, binder and hypothesis names, their order, layout
  and `theorem`/`lemma`);
- `notation`: the same key read up to notation Lean reads as one term (`x^2` and `x ^ 2`, `λ x,` and `fun x =>`,
  `∀ x, ∀ y,` and `∀ x y,`, `a ≥ b` and `b ≤ a`, prefixes of opened namespaces);
- `embedding`: the nearest benchmark statement by the cosine of their embeddings (the declaration index's model) at
  or above a threshold; the nearest one and its cosine are kept for review whatever it is;
- `ngram`: the share of the statement's token n-grams found in one benchmark problem, the curation libraries' test;
  reported, never decisive alone (renamed variables defeat it, and shared boilerplate inflates it).
`BenchmarkSet` is the pure logic (the caller gives the vectors); `StatementJudge` adds the embedding model, and
`DecontaminateOperator` is the Ray Data operator of `mine` that marks candidates restating a problem before any LLM or
Lean time is spent on them.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import faiss
import numpy as np
import pyarrow as pa

from lean_pool.lean_source import (
    THEOREM_KINDS,
    code_tokens,
    opened_namespaces,
    read_commands,
    statement_key,
)
from operators.retrieval.embeddings import Encoder, encode_statements, load_encoder
from operators.rows.candidates import (
    CONTAMINATED,
    DISCOVERED,
    candidates_table,
    is_open,
)
from operators.stage import Config, Shared, Stage

EXACT, NOTATION, EMBEDDING = "exact", "notation", "embedding"
DECISIVE_KINDS = (EXACT, NOTATION, EMBEDDING)
# What a statement is read from: a theorem, a lemma or an example (a corpus may hold unnamed statements).
STATEMENT_KINDS = THEOREM_KINDS | {"example"}
NO_STATEMENT = "no theorem, lemma or example could be read from the text"


@dataclass(frozen=True)
class MatchSettings:
    """The `matches` of the config: which tiers run, the cosine at or above which the nearest benchmark statement is
    a match and how many statements are embedded at a time, and the n-gram length and the overlap at or above which a
    row is flagged."""

    exact: bool
    notation: bool
    embedding: bool
    embedding_threshold: float
    ngram: bool
    ngram_n: int
    ngram_threshold: float
    embed_batch: int

    @classmethod
    def from_config(cls, matches: Mapping[str, Any]) -> MatchSettings:
        """Read from the `matches:` section (`conf/decontaminate/default.yaml`)."""
        return cls(
            exact=bool(matches["exact"]["enabled"]), notation=bool(matches["notation"]["enabled"]),
            embedding=bool(matches["embedding"]["enabled"]),
            embedding_threshold=float(matches["embedding"]["threshold"]),
            ngram=bool(matches["ngram"]["enabled"]), ngram_n=int(matches["ngram"]["n"]),
            ngram_threshold=float(matches["ngram"]["threshold"]), embed_batch=int(matches["embedding"]["batch_size"]),
        )


@dataclass(frozen=True)
class Statement:
    """A statement read for comparison: its signature (None when the text has none) and its keys and n-grams."""

    signature: str | None
    exact: str | None
    notation: str | None
    ngrams: frozenset[tuple[str, ...]]


@dataclass(frozen=True)
class Problem:
    """One benchmark problem: the benchmark it belongs to, its id there and its Lean text."""

    benchmark: str
    problem_id: str
    text: str


@dataclass(frozen=True)
class Verdict:
    """What the comparison found for one corpus statement. `kind` is the strongest match (exact, notation or
    embedding; None when clean) with `benchmark`, `problem` and `score`; the nearest benchmark statement by
    embedding and the best n-gram overlap are reported whether or not they decide; `note` says why a text could not
    be compared."""

    contaminated: bool
    benchmark: str | None = None
    problem: str | None = None
    kind: str | None = None
    score: float | None = None
    nearest_benchmark: str | None = None
    nearest_problem: str | None = None
    nearest_statement: str | None = None
    nearest_similarity: float | None = None
    ngram_benchmark: str | None = None
    ngram_problem: str | None = None
    ngram_overlap: float | None = None
    note: str | None = None

    def reason(self) -> str:
        """One line for an excluded row: which problem of which benchmark it restates, how, how surely."""
        return f"restates {self.benchmark} problem {self.problem} ({self.kind} match, score {self.score:.3f})"


def statement_signatures(text: str) -> list[str]:
    """The signatures of the theorems, lemmas and examples of `text` with balanced brackets, in order."""
    return [command.signature for command in read_commands(text)
            if command.kind in STATEMENT_KINDS and command.balanced and command.signature]


def token_ngrams(signature: str, n: int) -> frozenset[tuple[str, ...]]:
    """The runs of `n` consecutive tokens of a signature (the whole of it when shorter)."""
    tokens = tuple(token.text for token in code_tokens(signature))
    if len(tokens) <= n:
        return frozenset({tokens}) if tokens else frozenset()
    return frozenset(tokens[i : i + n] for i in range(len(tokens) - n + 1))


# What a text without a theorem, lemma or example is read as: its verdict says so (`NO_STATEMENT`).
UNREAD = Statement(None, None, None, frozenset())


def read_statements(text: str, settings: MatchSettings, opened: frozenset[str]) -> list[Statement]:
    """Each theorem, lemma or example of `text` (a Lean snippet or file) read for comparison (a corpus row may hold
    helper lemmas before the one that matters); `opened` are namespaces whose prefix the notation key drops besides
    those the text opens itself (the benchmarks' own, so both sides drop the same)."""
    namespaces = opened | frozenset(opened_namespaces(text))
    return [
        Statement(
            signature,
            statement_key(signature) if settings.exact else None,
            statement_key(signature, notation=True, opened=namespaces) if settings.notation else None,
            token_ngrams(signature, settings.ngram_n) if settings.ngram else frozenset(),
        )
        for signature in statement_signatures(text)
    ]


def read_statement(text: str, settings: MatchSettings, opened: frozenset[str]) -> Statement:
    """The first statement of `text` read for comparison (`UNREAD` when it has none): a benchmark problem's."""
    return next(iter(read_statements(text, settings, opened)), UNREAD)


def strongest(verdicts: Sequence[Verdict]) -> Verdict:
    """Of the verdicts on the statements of one text, the one that says most: a match before none, a stronger kind
    before a weaker, then the higher score, then the nearer problem."""
    rank: dict[str | None, int] = {kind: i for i, kind in enumerate(DECISIVE_KINDS)}
    return min(verdicts, key=lambda v: (not v.contaminated, rank.get(v.kind, len(rank)), -(v.score or 0.0),
                                        -(v.nearest_similarity or 0.0)))


def embedded_text(statement: Statement) -> str:
    """What of a statement is embedded: its most normalized key, so renamings and reorderings embed alike."""
    return statement.notation or statement.exact or statement.signature or ""


def benchmark_namespaces(problems: Sequence[Problem]) -> frozenset[str]:
    """Every namespace some benchmark problem opens: dropped from names on both sides by the notation key."""
    return frozenset(name for problem in problems for name in opened_namespaces(problem.text))


class BenchmarkSet:
    """The benchmarks' problems, indexed by key, by n-gram and (once `add_vectors` gives their embeddings) by
    embedding, so each corpus statement is compared with all of them at once."""

    def __init__(self, problems: Sequence[Problem], settings: MatchSettings) -> None:
        self.problems = list(problems)
        self.settings = settings
        self.opened = benchmark_namespaces(self.problems)
        self.statements = [read_statement(problem.text, settings, self.opened) for problem in self.problems]
        self.exact: dict[str, int] = {}
        self.notation: dict[str, int] = {}
        self.by_ngram: dict[tuple[str, ...], set[int]] = defaultdict(set)
        for i, statement in enumerate(self.statements):
            if statement.exact is not None:
                self.exact.setdefault(statement.exact, i)
            if statement.notation is not None:
                self.notation.setdefault(statement.notation, i)
            for gram in statement.ngrams:
                self.by_ngram[gram].add(i)
        self.index: faiss.Index | None = None

    def add_vectors(self, vectors: np.ndarray) -> None:
        """Index the problems' embeddings (unit vectors of `texts_to_embed`, in order) for the embedding tier."""
        if len(vectors):
            self.index = faiss.IndexFlatIP(vectors.shape[1])
            self.index.add(np.ascontiguousarray(vectors, dtype=np.float32))

    def unread(self) -> list[Problem]:
        """Problems whose text holds no statement to compare with."""
        return [p for p, s in zip(self.problems, self.statements, strict=True) if s.signature is None]

    def texts_to_embed(self) -> list[str]:
        """The text embedded for each problem, in order (for the caller's encoder)."""
        return [embedded_text(statement) for statement in self.statements]

    def judge(self, statements: Sequence[Statement], vectors: np.ndarray | None) -> list[Verdict]:
        """The verdict on each corpus statement (`vectors` aligned with them, or None without the embedding tier)."""
        nearest: list[tuple[int, float] | None] = [None] * len(statements)
        if self.index is not None and vectors is not None and len(statements):
            scores, rows = self.index.search(np.ascontiguousarray(vectors, dtype=np.float32), 1)
            nearest = [(int(r[0]), float(s[0])) if r[0] >= 0 else None for s, r in zip(scores, rows, strict=True)]
        return [self._verdict(statement, near) for statement, near in zip(statements, nearest, strict=True)]

    def _verdict(self, statement: Statement, near: tuple[int, float] | None) -> Verdict:
        if statement.signature is None:
            return Verdict(False, note=NO_STATEMENT)
        match: tuple[int, str, float] | None = None
        if statement.exact is not None and statement.exact in self.exact:
            match = (self.exact[statement.exact], EXACT, 1.0)
        elif statement.notation is not None and statement.notation in self.notation:
            match = (self.notation[statement.notation], NOTATION, 1.0)
        elif near is not None and near[1] >= self.settings.embedding_threshold:
            match = (near[0], EMBEDDING, near[1])
        gram = self._ngram_overlap(statement)
        found = self.problems[match[0]] if match else None
        nearest = self.problems[near[0]] if near else None
        best = self.problems[gram[0]] if gram else None
        return Verdict(
            contaminated=match is not None,
            benchmark=found.benchmark if found else None, problem=found.problem_id if found else None,
            kind=match[1] if match else None, score=match[2] if match else None,
            nearest_benchmark=nearest.benchmark if nearest else None,
            nearest_problem=nearest.problem_id if nearest else None,
            nearest_statement=self.statements[near[0]].signature if near else None,
            nearest_similarity=near[1] if near else None,
            ngram_benchmark=best.benchmark if best else None, ngram_problem=best.problem_id if best else None,
            ngram_overlap=gram[1] if gram else None, note=None,
        )

    def _ngram_overlap(self, statement: Statement) -> tuple[int, float] | None:
        """The problem sharing the largest share of the statement's n-grams, and that share."""
        if not statement.ngrams:
            return None
        shared: dict[int, int] = defaultdict(int)
        for gram in statement.ngrams:
            for i in self.by_ngram.get(gram, ()):
                shared[i] += 1
        if not shared:
            return None
        best = min(shared, key=lambda i: (-shared[i], i))
        return best, shared[best] / len(statement.ngrams)

    def ngram_flagged(self, verdict: Verdict) -> bool:
        """True when the n-gram overlap reaches its threshold (reported, never decisive alone)."""
        return verdict.ngram_overlap is not None and verdict.ngram_overlap >= self.settings.ngram_threshold


class StatementJudge:
    """Benchmark problems indexed with their embeddings: judges Lean texts, each distinct text once."""

    def __init__(self, problems: Sequence[Problem], settings: MatchSettings, encoder: Encoder | None) -> None:
        self.settings = settings
        self.encoder = encoder if settings.embedding else None
        self.index = BenchmarkSet(problems, settings)
        if self.encoder is not None:
            self.index.add_vectors(self._embed(self.encoder, self.index.texts_to_embed()))

    def _embed(self, encoder: Encoder, texts: Sequence[str]) -> np.ndarray:
        batch = self.settings.embed_batch
        parts = [encode_statements(encoder, texts[i : i + batch]) for i in range(0, len(texts), batch)]
        return np.concatenate(parts) if parts else np.zeros((0, 1), np.float32)

    def judge(self, texts: Sequence[str | None]) -> list[Verdict]:
        """A verdict per text, the strongest over its statements (None, or a text without one, is reported as such)."""
        distinct = list(dict.fromkeys(text or "" for text in texts))
        per_text = [read_statements(text, self.settings, self.index.opened) or [UNREAD] for text in distinct]
        statements = [statement for found in per_text for statement in found]
        vectors = None
        if self.encoder is not None:
            readable = [i for i, s in enumerate(statements) if s.signature is not None]
            embedded = self._embed(self.encoder, [embedded_text(statements[i]) for i in readable])
            vectors = np.zeros((len(statements), embedded.shape[1] if readable else 1), np.float32)
            vectors[readable] = embedded
        flat = iter(self.index.judge(statements, vectors))
        verdicts = {text: strongest([next(flat) for _ in found])
                    for text, found in zip(distinct, per_text, strict=True)}
        return [verdicts[text or ""] for text in texts]


@dataclass(frozen=True)
class DecontaminateSettings:
    """`mine`'s decontaminate stage (`decontaminate:` with benchmarks): the problems read on the driver, how to match
    them, and the embedding model's config section."""

    problems: tuple[Problem, ...]
    matches: MatchSettings
    embedding: Mapping[str, Any]


class DecontaminateOperator:
    """Ray Data `map_batches` actor over candidate rows: an open (`discovered`) candidate whose raw statement restates
    a benchmark problem becomes `contaminated`, with the problem, the kind of match and its score as its reason, and
    costs no LLM call or Lean check after; other rows pass untouched."""

    def __init__(self, *, check: DecontaminateSettings) -> None:
        encoder = load_encoder(check.embedding) if check.matches.embedding else None
        self.judge = StatementJudge(check.problems, check.matches, encoder)

    def __call__(self, batch: pa.Table) -> pa.Table:
        rows = batch.to_pylist()
        checked = [row for row in rows if is_open(row, DISCOVERED)]
        for row, verdict in zip(checked, self.judge.judge([row["statement_raw"] for row in checked]), strict=True):
            if verdict.contaminated:
                row.update(status=CONTAMINATED, reason=f"contaminated: {verdict.reason()}")
        return candidates_table(rows)


STAGE = "decontaminate"


def benchmarks_named(cfg: Config) -> bool:
    """`decontaminate.benchmarks` lists a benchmark: candidates are checked against its problems."""
    return bool(cfg["decontaminate"]["benchmarks"])


def decontaminate_arguments(cfg: Config, shared: Shared) -> dict[str, Any]:
    """`decontaminate:` with the benchmarks' problems, which the driver reads before the run starts."""
    section = cfg["decontaminate"]
    return {"check": DecontaminateSettings(tuple(shared.benchmark_problems()),
                                           MatchSettings.from_config(section["matches"]), dict(cfg["embedding"]))}


DECLARATION = Stage(
    name=STAGE, operator=DecontaminateOperator, arguments=decontaminate_arguments, resources=f"{STAGE}.resources",
    takes=frozenset({DISCOVERED}), gives=frozenset({DISCOVERED, CONTAMINATED}), runs=benchmarks_named)
