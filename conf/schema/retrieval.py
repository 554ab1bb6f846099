"""The sections of what compares statements: the embedding model, dedup, grounding, faithfulness, decontamination and
the declaration index a run reads; a stage's resources; and the `decontaminate` job.
"""

from __future__ import annotations

from typing import Literal

from conf.schema.fields import section, setting


@section(open=True)
class Resources:
    """A stage's Ray Data shape: its actors, the rows each keeps in flight, and what Ray reserves per actor."""

    actors: int = setting("actors of the stage's pool", at_least=1)
    max_concurrent_calls_per_actor: int = setting("batches one actor works on at once (async calls in flight)",
                                                  at_least=1)
    batch_size: int | None = setting("rows per batch handed to an actor (null: a whole block)", at_least=1)
    num_cpus: float = setting("CPUs Ray reserves per actor (a fraction for stages that wait on the network)",
                              at_least=0)
    num_gpus: float = setting("GPUs Ray reserves per actor (0 when not given)", at_least=0)
    resources: dict[str, float] = setting("custom Ray resources reserved per actor: name -> amount", at_least=0)


@section
class EmbeddingMatch:
    """The match by embedding: a problem whose statement's vector lies close enough to the corpus statement's."""

    batch_size: int = setting("statements embedded at a time", at_least=1, speed=True)
    enabled: bool = setting("match a problem by the cosine of the statements' embeddings")
    threshold: float = setting("cosine from which the nearest problem is a match (it is kept for review at any value)",
                               at_least=0, at_most=1)


@section
class ExactMatch:
    """The exact match: the same statement once names and layout are set aside."""

    enabled: bool = setting("match the same statement up to names, binder order, layout and theorem/lemma")


@section
class NgramMatch:
    """The n-gram overlap between a statement and a problem: reported for review, never a match by itself."""

    enabled: bool = setting("compute each row's best n-gram overlap with a problem (reported, never decisive)")
    n: int = setting("tokens per n-gram", at_least=1)
    threshold: float = setting("share (0 to 1) of a statement's n-grams found in one problem from which it is flagged",
                               at_least=0, at_most=1)


@section
class NotationMatch:
    """The match up to notation: the same term as Lean reads it, however it is written."""

    enabled: bool = setting("match the same term up to notation (x^2 / x ^ 2, λ/fun, ≥/≤, binders, namespaces)")


@section
class Matches:
    """The ways a corpus statement matches a problem, strongest first; a row is contaminated by the first that fires."""

    embedding: EmbeddingMatch = setting("by the cosine of the statements' embeddings")
    exact: ExactMatch = setting("the same statement up to names, order and layout")
    ngram: NgramMatch = setting("by n-gram overlap (reported, never decisive)")
    notation: NotationMatch = setting("the same statement up to notation")


@section
class BenchmarkColumns:
    """Which columns of a benchmark table hold each problem's statement, header and id."""

    header_columns: list[str] = setting("columns read before the statement, the first one present (its `open` lines "
                                        "count)")
    id_columns: list[str] = setting("columns that name a problem, the first one present")
    statement_columns: list[str] = setting("columns that hold a problem's Lean statement, the first one present")


@section
class BenchmarkSource:
    """One benchmark given as a mapping instead of a bare location."""

    path: str = setting("the benchmark: a directory of .lean files, or JSONL/Parquet (local path or URI)")
    name: str | None = setting("the name rows report (null: the location's last part)")
    revision: str | None = setting("the version recorded (null: the git commit of a checkout, else a hash of the "
                                   "problems)")


@section
class Decontaminate:
    """Decontamination against evaluation benchmarks, as `mine` and `export` run it."""

    embedding: Embedding = setting("export only: the embedding model that matches statements with problems")
    benchmarks: list[str | BenchmarkSource] = setting("benchmarks not to restate: locations or {path, name, revision} "
                                                      "([]: off)")
    matches: Matches = setting("the ways a statement matches a problem, strongest first")
    read: BenchmarkColumns = setting("the columns a benchmark table is read from")
    resources: Resources = setting("the decontaminate stage's Ray Data shape (mine)", speed=True)


@section
class Dedup:
    """The dedup stage of `mine`: candidates restating a Mathlib declaration or an earlier sibling are dropped."""

    enabled: bool = setting("mark candidates restating an index declaration or an earlier sibling `duplicate` "
                            "(no LLM call, no Lean)")
    k: int = setting("nearest Mathlib declarations compared with each candidate", at_least=1)
    resources: Resources = setting("the dedup stage's Ray Data shape: a batch is whole seeds, CPU-bound",
                                   speed=True)
    threshold: float = setting("cosine from which two statements are the same (an exact restatement scores 1)",
                               at_least=0, at_most=1)


@section
class Embedding:
    """The embedding model of the declaration index, dedup, grounding and decontamination."""

    backend: Literal['onnx', 'sentence_transformers'] = setting("onnx: an ONNX file on onnxruntime (no PyTorch); "
                                                                "sentence_transformers: a model directory")
    batch_size: int = setting("statements per forward pass, padded to the longest (on CPU, larger is no faster)",
                              at_least=1, speed=True)
    device: str | None = setting("sentence_transformers only: torch device (null: cuda when present, else cpu)",
                                 speed=True)
    max_length: int = setting("tokens kept per statement; the rest is cut", at_least=1)
    model: str = setting("the ONNX file, or the model directory for sentence_transformers (a path or package:path)")
    model_id: str = setting("the model's name recorded in an index; an index made with another is refused")
    threads: int | None = setting("onnxruntime threads (null: the CPUs of this process, a Ray actor's num_cpus)",
                                  at_least=1, speed=True)
    tokenizer: str = setting("onnx only: the model's tokenizer.json (a path or package:path)")


@section
class Faithfulness:
    """The faithfulness check: does a compiled Lean statement say what was asked (Aria's term-grounded check)."""

    alpha: float = setting("a statement is faithful when its score is at least this (0 to 1)", at_least=0, at_most=1)
    decompose: str = setting("prompt splitting the statement as asked into assumptions and conclusions; fills "
                             "{informal}")
    enabled: bool = setting("mine: check each compiled statement against the judged one (autoformalize: always on)")
    label: str = setting("prompt labelling each part perfect/minor/major; fills {definitions}, {parts}, {statement}")
    max_terms: int = setting("constants of a statement looked up in the index and shown, at most", at_least=1)
    minor_penalty: float = setting("score lost per `minor` part, from 0 to 1; any `major` part makes it 0",
                                   at_least=0, at_most=1)
    no_definitions: str = setting("text in `label`'s {definitions} when no constant was found in the index")
    prove_unfaithful: bool = setting("mine: prove candidates whose statement drifted too (they keep status compiled)")
    resources: Resources = setting("the faithfulness stage's Ray Data shape", speed=True)


@section
class Grounding:
    """Retrieval grounding of the formalize and prove prompts from the declaration index (`index.dir`)."""

    enabled: bool = setting("show related and near-miss Mathlib declarations in the prompts (needs index.dir)")
    header: str = setting("text before the related declarations shown with a statement")
    k: int = setting("related declarations shown with a statement", at_least=1)
    k_missing: int = setting("nearest real names shown for each unknown identifier or constant", at_least=1)
    max_missing: int = setting("unknown names looked up per attempt", at_least=1)
    missing_header: str = setting("text before the real names near an unknown one; fills {name}")


@section
class Index:
    """The declaration index that dedup, grounding and faithfulness read (built by `python -m pipelines.index`)."""

    dir: str | None = setting("the index's directory, readable by every node (null: none; dedup compares siblings "
                              "only)")


@section
class DecontaminateJob:
    """`folklore decontaminate`: the rows of a corpus of Lean statements that restate a benchmark's problem."""

    benchmarks: list[str | BenchmarkSource] = setting("benchmarks to match the corpus with: locations or "
                                                      "{path, name, revision}")
    corpus: str = setting("a run directory, an export, or JSONL/Parquet files of statements (local path or URI)")
    corpus_column: str | None = setting("the corpus column holding the Lean statement (null: `statement`, else "
                                        "`formal_statement`)")
    embedding: Embedding = setting("the embedding model that matches statements with problems")
    matches: Matches = setting("the ways a statement matches a problem, strongest first")
    out: str = setting("the folder of the result: the marked corpus, a summary and a manifest", speed=True)
    read: BenchmarkColumns = setting("the columns a benchmark table is read from")
