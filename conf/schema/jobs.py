"""The jobs that read a run or build its inputs: report, status, export, index, plan, and `lean_pool.check`.
"""

from __future__ import annotations

from typing import Literal

from conf.schema.fields import section, setting
from conf.schema.lean import Lean, Verify
from conf.schema.mining import Ray
from conf.schema.retrieval import Decontaminate, Embedding

RUN_DIR_HELP = "the run directory to read (local path or pyarrow filesystem URI)"


@section
class FormalizationReport:
    """What the report shows of an autoformalize run (a formalizations/ table instead of candidates/)."""

    score_bins: int = setting("bins of the faithfulness score histogram, of equal width on [0, 1]", at_least=1)
    sr_at_k: list[int] = setting("mode=agent: the K of SR@K, the share of problems made faithful within K tool calls")


@section
class Plots:
    """The report's figures."""

    dpi: int = setting("dots per inch of each PNG figure", at_least=1)
    size: list[float] = setting("width and height of every figure, in inches")


@section
class Report:
    """`folklore report`: a run's tables and plots, written as report.md, PNGs and CSVs into the run directory."""

    domains: list[str] = setting("domains shown first, in this order; any others follow alphabetically")
    formalizations: FormalizationReport = setting("what the report shows of an autoformalize run")
    out_subdir: str = setting("the report's folder directly in run_dir, replaced by each report")
    plots: Plots = setting("the figures' resolution and size")
    run_dir: str = setting(RUN_DIR_HELP, speed=True)
    sim_label: str = setting("the warning on a simulated run's plots and at the top and bottom of its report")
    top_reasons: int = setting("rejection reason classes listed per place (final status, prover, Lean)", at_least=1)


@section
class Status:
    """`folklore status`: how far a run is (running, finished or stopped), read without its lease."""

    run_dir: str = setting(RUN_DIR_HELP, speed=True)


@section
class DatasetCard:
    """The export's README.md: a Hugging Face dataset card with a config per corpus."""

    body: str = setting("the card's text; {counts}, {splits}, {decontamination}, {simulated} and more are "
                         "filled in")
    decontamination: str = setting("the card's paragraph when decontaminate.benchmarks were checked")
    license: str = setting("the corpora's license; set what your models' terms allow for their output")
    not_decontaminated: str = setting("the card's paragraph when no benchmark was checked")
    pretty_name: str = setting("the dataset's name on the card; {run_id} is the run's id")
    simulated_notice: str = setting("the warning put at the top of a simulated run's card")
    tags: list[str] = setting("the card's tags (`simulated` is added for a simulated run)")


@section
class LeanFiles:
    """The export's lean/ folder: one readable Lean file of proved lemmas per seed file."""

    dropped_prefix: str = setting("the prefix taken off a seed's module before namespace_root is put in front")
    header: str = setting("the comment heading each file; {seed_id}, {count}, {run_id}, {toolchain}, {mathlib_rev}")
    namespace_root: str = setting("the namespace of a seed's lemmas: <namespace_root>.<seed module without the prefix>")


@section
class Split:
    """How rows go to train or test: by a salted hash of their seed file, so no seed is on both sides."""

    salt: str = setting("the hash's salt: another salt draws another split, the same one the same split")
    test_fraction: float = setting("share (0 to 1) of seed files whose rows all go to test", at_least=0, at_most=1)


@section
class Trajectories:
    """The trajectories corpus: each repair loop rebuilt as a chat conversation."""

    feedback: str = setting("the user turn after a failed attempt; {number}, {status} and {failure} (Lean's "
                            "diagnostics or the reasons) are filled in")


@section
class Export:
    """`folklore export`: a run's training corpora (statement-proof pairs, repair trajectories, judge verdicts)."""

    allow_sim: bool = setting("export a simulated run too (its rows are marked); false refuses it")
    card: DatasetCard = setting("the dataset card written as the export's README.md")
    decontaminate: Decontaminate = setting("benchmarks whose restatements go to excluded/ instead of the corpora")
    format: Literal["parquet", "jsonl"] = setting("the corpora's file format")
    lean_files: LeanFiles = setting("the lean/ folder: one readable file of proved lemmas per seed")
    out_subdir: str = setting("the export's folder directly in run_dir, replaced by each export")
    run_dir: str = setting(RUN_DIR_HELP, speed=True)
    split: Split = setting("how rows go to train or test by seed file")
    trajectories: Trajectories = setting("how repair loops are rebuilt as conversations")


@section
class Embed:
    """The Ray actors that embed the declarations' statements."""

    actors: int = setting("embedding actors; each loads the model once", at_least=1)
    batch_size: int = setting("declarations handed to an actor at a time", at_least=1)
    num_cpus: float = setting("CPUs Ray reserves per actor", at_least=0)
    num_gpus: float = setting("GPUs Ray reserves per actor (0: the model runs on CPUs)", at_least=0)


@section
class Faiss:
    """The faiss index of the statements' vectors: exact (flat) or a graph (HNSW)."""

    flat_max_rows: int = setting("kind=auto: an index of at most this many declarations is flat, a larger one HNSW",
                                 at_least=0)
    hnsw_ef_construction: int = setting("HNSW's beam when building: higher gives recall for build time", at_least=1)
    hnsw_ef_search: int = setting("HNSW's beam when searching: higher gives recall for latency", at_least=1)
    hnsw_m: int = setting("HNSW's graph degree: higher gives recall for memory", at_least=2)
    kind: Literal["auto", "flat", "hnsw"] = setting("flat: exact search; hnsw: a graph; auto: by flat_max_rows")


@section
class Parse:
    """How the Lean files are cut into Ray tasks for parsing."""

    files_per_task: int = setting("Lean files parsed by one Ray task", at_least=1)


@section
class IndexJob:
    """`folklore index`: a Lean source tree's declarations parsed, their statements embedded, a faiss index saved."""

    embed: Embed = setting("the Ray actors that embed the statements")
    embedding: Embedding = setting("the embedding model (conf/embedding)")
    exclude: list[str] = setting("globs of paths relative to mathlib_dir left out, even when included")
    faiss: Faiss = setting("the kind of faiss index and its parameters")
    include: list[str] = setting("globs of paths relative to mathlib_dir to index (fnmatch: `*` crosses `/`)")
    mathlib_dir: str = setting("the Lean source tree to index: a Mathlib checkout or any Lake project")
    out: str = setting("the index's own folder: new, empty or an earlier build's", speed=True)
    parse: Parse = setting("how the files are cut into Ray tasks")
    ray: Ray = setting("where Ray runs", speed=True)
    rebuild: bool = setting("build even when `out` already holds this revision's index for this model")


@section
class AssumedCall:
    """What one LLM call of a call label costs, as the plan assumes it."""

    completion_tokens: float = setting("tokens the model writes per call", at_least=0)
    latency_s: float = setting("seconds from request to answer", at_least=0)
    prompt_tokens: float = setting("tokens of the prompt per call", at_least=0)


@section
class AssumedCosts:
    """The per-call costs and stage shares a plan assumes when `from_run` is null: rough figures for a 32B-class
    model and Lean with Mathlib."""

    candidates_per_lemma_asked: float = setting("candidates a discover answer holds per lemma it is asked "
                                                "for (discover.min_lemmas)", at_least=0)
    compiled_share: float = setting("share (0 to 1) of accepted candidates that compile within the repairs",
                                    at_least=0, at_most=1)
    duplicate_share: float = setting("share (0 to 1) of candidates dedup drops, when dedup.enabled",
                                     at_least=0, at_most=1)
    faithful_share: float = setting("share (0 to 1) of compiled statements the faithfulness check keeps",
                                    at_least=0, at_most=1)
    judge_accept_share: float = setting("share (0 to 1) of judged candidates the judge accepts", at_least=0, at_most=1)
    lean_check_s: float = setting("seconds of one check in a warm REPL (a statement or a proof under Mathlib)",
                                  at_least=0)
    llm: dict[str, AssumedCall] = setting("call label -> its cost per call; `other` for a label not named")
    proof_attempts_per_statement: float = setting("mean proof attempts per statement and prover (capped at "
                                                  "prove.max_repairs + 1)", at_least=0)
    proved_share: float = setting("share (0 to 1) of statements a prover proves", at_least=0, at_most=1)
    repairs_per_statement: float = setting("mean formalize repair rounds per accepted candidate (capped at "
                                           "formalize.max_repairs)", at_least=0)
    replay_s: float = setting("seconds of one replay: a fresh Lean imports Mathlib, compiles and kernel-checks",
                              at_least=0)
    startup_s: float = setting("seconds from the start to the first LLM request: Ray, the Lean pool, the actors",
                               at_least=0)
    subgoals_per_failed_proof: float = setting("goals a failed proof leaves open, when subgoals.enabled (capped at "
                                               "subgoals.max_per_candidate)", at_least=0)
    trivial_share: float = setting("share (0 to 1) of compiled statements `trivial.tactic` closes",
                                   at_least=0, at_most=1)


@section
class Cluster:
    """The cluster a run is planned for: Lean nodes that hold the Lean pool, and GPU nodes that only serve the
    LLM engines (llm=vllm)."""

    cpus_per_node: int = setting("CPUs of each Lean node", at_least=1)
    gpu_nodes: int = setting("nodes that only serve the LLM engines (0: none, or the Lean nodes serve them)",
                             at_least=0)
    gpus_per_gpu_node: int = setting("GPUs of each GPU node", at_least=0)
    gpus_per_node: int = setting("GPUs of each Lean node (for nodes that also serve the engines)", at_least=0)
    memory_gb_per_node: float = setting("RAM of each Lean node, in GB", at_least=0)
    nodes: int = setting("Lean nodes", at_least=1)


@section
class GpuThroughput:
    """What one GPU serves with continuous batching (vLLM, a 32B model), in tokens per second."""

    completion_tokens_per_s: float = setting("completion tokens one GPU writes per second", at_least=1)
    prompt_tokens_per_s: float = setting("prompt tokens one GPU reads per second", at_least=1)


@section
class PlanSettings:
    """The plan's own keys (`plan.`); every other override goes to the mining config being planned."""

    assumed: AssumedCosts = setting("the costs assumed when from_run is null; measure them with from_run first")
    cluster: Cluster = setting("the cluster the run is planned for")
    from_run: str | None = setting("an earlier run (path or URI) whose tables give the costs (null: `assumed`)")
    gpu: GpuThroughput = setting("what one GPU serves per second; it bounds the wall time only for llm=vllm")
    lean_import_s: float = setting("seconds a REPL takes to import the header (`import Mathlib`: 5-60) at start "
                                   "and recycle", at_least=0)
    node_overhead_gb: float = setting("RAM per node besides the REPLs, in GB: Ray, stage actors, writers",
                                      at_least=0)


@section
class Plan:
    """`folklore plan`: the wall time, GPU-hours and memory a mining run would take, before it starts."""

    plan: PlanSettings = setting("the plan's keys; every other override configures the mining run planned")


@section
class Check:
    """`folklore check`: Lean files checked through the Lean pool, each one compiling or its proof verified."""

    lean: Lean = setting("the Lean backend and its pool of REPLs (conf/lean)")
    max_file_bytes: int = setting("bytes a file may have; a larger one is one `error` line, never read",
                                  at_least=1)
    mode: Literal["proof", "statement"] = setting("proof: exit 0 when every file is verified; statement: when every "
                                                  "file compiles (sorry allowed)")
    ray: Ray = setting("where Ray runs", speed=True)
    replay: bool = setting("also replay each verified file in a fresh Lean process (verify); `verified` needs both")
    statement: str | None = setting("mode=proof: a .lean file, or a directory of same-named files, holding the "
                                    "statement each proof must prove (null: the file's own)")
    timeout_s: float | None = setting("seconds per check (null: lean.timeout_s)", at_least=0)
    verify: Verify = setting("how replay=true replays a verified file, as in conf/mine.yaml")
