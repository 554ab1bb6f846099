"""The sections of what compares statements: the embedding model, dedup, grounding, faithfulness, decontamination and
the declaration index a run reads; and the `decontaminate` job.
"""

from __future__ import annotations

from typing import Any, Literal

from conf.schema.fields import section, setting


@section
class DecontaminateMatchesEmbedding:
    """a ≥ b / b ≤ a, implicit or explicit binders, prefixes of opened namespaces)"""

    batch_size: int = setting("statements embedded at a time", at_least=1, speed=True)
    enabled: bool = setting("")
    threshold: float = setting("Cosine (embedding model of `embedding:`) at or above which the nearest problem is a match", at_least=0, at_most=1)


@section
class DecontaminateMatchesExact:
    """decontaminate.matches.exact"""

    enabled: bool = setting("same statement up to theorem, binder and hypothesis names, their order, layout, theorem/lemma")


@section
class DecontaminateMatchesNgram:
    """decontaminate.matches.ngram"""

    enabled: bool = setting("reported, never decisive alone")
    n: int = setting("tokens per n-gram (Lean statements are short: 13 words, the text libraries' length, is most of one)", at_least=1)
    threshold: float = setting("share of a statement's n-grams found in one problem at or above which the row is counted as flagged", at_least=0, at_most=1)


@section
class DecontaminateMatchesNotation:
    """decontaminate.matches.notation"""

    enabled: bool = setting("same up to notation Lean reads as one term (x^2 / x ^ 2, \u03bb x, / fun x =>, \u2200 x, \u2200 y / \u2200 x y, a \u2265 b / b \u2264 a, implicit or explicit binders, prefixes of opened namespaces)")


@section
class DecontaminateMatches:
    """The ways a corpus statement matches a problem, strongest first; a row is contaminated by the first that fires."""

    embedding: DecontaminateMatchesEmbedding = setting("a \u2265 b / b \u2264 a, implicit or explicit binders, prefixes of opened namespaces)")
    exact: DecontaminateMatchesExact = setting("")
    ngram: DecontaminateMatchesNgram = setting("")
    notation: DecontaminateMatchesNotation = setting("")


@section
class DecontaminateRead:
    """decontaminate.read"""

    header_columns: list[Any] = setting("read before the statement (its `open` lines count)")
    id_columns: list[Any] = setting("the first one present names a problem")
    statement_columns: list[Any] = setting("the first one a benchmark table has holds its problems")


@section
class Decontaminate:
    """decontaminate"""

    embedding: Embedding = setting("export only: the embedding model that matches statements with problems")
    benchmarks: list[Any] = setting("Benchmark decontamination: the benchmarks a corpus must not hold, and how a corpus statement is matched with their problems")
    matches: DecontaminateMatches = setting("The ways a corpus statement matches a problem, strongest first; a row is contaminated by the first that fires.")
    read: DecontaminateRead = setting("")
    resources: dict[str, Any] = setting("", speed=True)


@section
class Dedup:
    """The resources of the optional stages, whose other settings are their groups' (conf/dedup, conf/decontaminate, conf/faithfulness)."""

    enabled: bool = setting("dedup stage of `mine` (after split, before judge): a candidate restating a Mathlib declaration of the index (`index.dir`), or an earlier candidate of its seed, gets status `duplicate` with the match and its score, and costs no LLM call or Lean check")
    k: int = setting("Mathlib declarations compared with each candidate", at_least=1)
    resources: dict[str, Any] = setting("", speed=True)
    threshold: float = setting("cosine at or above which two statements are the same (exact restatements score 1); benchmarks/dedup_bench.py prints precision and recall for other values", at_least=0, at_most=1)


@section
class Embedding:
    """embedding"""

    backend: Literal['onnx', 'sentence_transformers'] = setting("The embedding model of the declaration index, dedup and grounding")
    batch_size: int = setting("statements per forward pass, padded to the longest (on CPU a larger batch gains nothing and pads more: 64 ran 1.4x slower per statement than 8)", at_least=1, speed=True)
    device: Any | None = setting("sentence_transformers only: null picks cuda when present, else cpu", speed=True)
    max_length: int = setting("tokens kept per statement (the model was trained with 256)", at_least=1)
    model: str = setting("")
    model_id: str = setting("")
    threads: Any | None = setting("onnxruntime threads; null: the CPUs of this process (a Ray actor's num_cpus)", speed=True)
    tokenizer: str = setting("")


@section
class Faithfulness:
    """Always on here (and grounding of the repairs is on whenever index.dir is set); alpha, the penalty and the prompts are conf/faithfulness/default.yaml's."""

    alpha: float = setting("faithful iff score >= alpha (Aria's high-precision setting)", at_least=0, at_most=1)
    decompose: str = setting("")
    enabled: bool = setting("")
    label: str = setting("")
    max_terms: int = setting("constants of a statement looked up and shown at most", at_least=1)
    minor_penalty: float = setting("the score drops by this for each `minor` part; any `major` makes it 0", at_least=0, at_most=1)
    no_definitions: str = setting("")
    prove_unfaithful: bool = setting("mine: prove candidates whose statement drifted (they keep status compiled)")
    resources: dict[str, Any] = setting("", speed=True)


@section
class Grounding:
    """grounding"""

    enabled: bool = setting("Retrieval grounding of the formalize and prove prompts from the declaration index (`index.dir`)")
    header: str = setting("")
    k: int = setting("related declarations shown with a statement", at_least=1)
    k_missing: int = setting("nearest real names shown for each unknown identifier or constant", at_least=1)
    max_missing: int = setting("unknown names looked up per attempt", at_least=1)
    missing_header: str = setting("")


@section
class Index:
    """The declaration index that dedup and grounding read: the `out` of `python -m pipelines.index mathlib_dir=... out=...`, a directory every node can read. Built once per Mathlib revision and reused; a run refuses an index of another revision (the one its Lean uses) or of another embedding model."""

    dir: Any | None = setting("")


@section
class DecontaminateJob:
    """"""

    benchmarks: list[Any] = setting("")
    corpus: Any = setting("A Folklore run directory (its candidates/), a Folklore export (each of pairs/, judge/, trajectories/), or a Parquet or JSONL file or directory of them")
    corpus_column: Any | None = setting("The corpus column holding each row's Lean statement; null: `statement` (a run's compiled statement, else its raw one), else `formal_statement`")
    embedding: Embedding = setting("")
    matches: DecontaminateMatches = setting("")
    out: Any = setting("patches and descriptions, in a folder of their own (null: <run_dir>/contribute)", speed=True)
    read: DecontaminateRead = setting("")
