"""The jobs that read a run or build its inputs: report, export, index, plan, and `lean_pool.check`.
"""

from __future__ import annotations

from typing import Any, Literal

from conf.schema.fields import section, setting
from conf.schema.lean import Lean, Verify
from conf.schema.mining import Ray
from conf.schema.retrieval import Decontaminate, Embedding


@section
class ReportFormalizations:
    """Autoformalize runs (a formalizations/ table instead of candidates/)."""

    score_bins: int = setting("the faithfulness_score histogram: equal bins on [0, 1]", at_least=1)
    sr_at_k: list[Any] = setting("mode=agent: SR@K, the share of problems made faithful within K tool calls (ALA's)")


@section
class ReportPlots:
    """plots"""

    dpi: int = setting("", at_least=1)
    size: list[Any] = setting("inches, every figure")


@section
class Report:
    """"""

    domains: list[Any] = setting("Domains first in this order (the MathlibLemma paper's), any others after them alphabetically.")
    formalizations: ReportFormalizations = setting("Autoformalize runs (a formalizations/ table instead of candidates/).")
    out_subdir: str = setting("the export's folder: one directly in run_dir, replaced by each export")
    plots: ReportPlots = setting("")
    run_dir: Any = setting("one run per mode: a restart in another mode is refused", speed=True)
    sim_label: str = setting("")
    top_reasons: int = setting("rejection reason classes listed per place (final status, prover, Lean)", at_least=1)


@section
class ExportCard:
    """card"""

    body: str = setting("")
    decontamination: str = setting("")
    license: str = setting("Mathlib's, whose files seed the run; set what your models' terms allow for their output")
    not_decontaminated: str = setting("")
    pretty_name: str = setting("")
    simulated_notice: str = setting("")
    tags: list[Any] = setting("")


@section
class ExportLeanFiles:
    """lean_files"""

    dropped_prefix: str = setting("")
    header: str = setting("")
    namespace_root: str = setting("namespace of a seed's file: Folklore.<seed module without the prefix below>")


@section
class ExportSplit:
    """split"""

    salt: str = setting("change it to draw another split; keep it to get the same split in every export")
    test_fraction: float = setting("share of seed files whose rows all go to test", at_least=0, at_most=1)


@section
class ExportTrajectories:
    """trajectories"""

    feedback: str = setting("The user turn after a failed attempt, in the conversation rebuilt from a repair loop: Lean's diagnostics, or the reasons when Lean reported no error (a refusal, a failed check, an answer without code).")


@section
class Export:
    """"""

    allow_sim: bool = setting("a simulated run is refused unless this is true (its rows are then marked)")
    card: ExportCard = setting("")
    decontaminate: Decontaminate = setting("")
    format: Literal['parquet', 'jsonl'] = setting("parquet | jsonl")
    lean_files: ExportLeanFiles = setting("")
    out_subdir: str = setting("the export's folder: one directly in run_dir, replaced by each export")
    run_dir: Any = setting("one run per mode: a restart in another mode is refused", speed=True)
    split: ExportSplit = setting("")
    trajectories: ExportTrajectories = setting("")


@section
class IndexEmbed:
    """embed"""

    actors: int = setting("embedding actors (each loads the model once)", at_least=1)
    batch_size: int = setting("declarations handed to an actor at a time", at_least=1)
    num_cpus: float = setting("CPUs Ray reserves per actor", at_least=0)
    num_gpus: float = setting("GPUs per actor (sentence_transformers on a GPU node)", at_least=0)


@section
class IndexFaiss:
    """faiss"""

    flat_max_rows: int = setting("exact search stays under a few ms per query up to about this size", at_least=0)
    hnsw_ef_construction: int = setting("build-time beam: recall vs build time", at_least=1)
    hnsw_ef_search: int = setting("query-time beam: recall vs latency", at_least=1)
    hnsw_m: int = setting("graph degree: recall vs memory", at_least=2)
    kind: Literal['auto', 'flat', 'hnsw'] = setting("auto: flat (exact) up to flat_max_rows, hnsw above; or force flat / hnsw")


@section
class IndexParse:
    """parse"""

    files_per_task: int = setting("Lean files parsed by one Ray task", at_least=1)


@section
class IndexJob:
    """"""

    embed: IndexEmbed = setting("")
    embedding: Embedding = setting("")
    exclude: list[Any] = setting("")
    faiss: IndexFaiss = setting("")
    include: list[Any] = setting("globs on paths relative to mathlib_dir (fnmatch: `*` crosses `/`)")
    mathlib_dir: Any = setting("the Mathlib checkout the patches are made against (null: the run's seeds.root)")
    out: Any = setting("patches and descriptions, in a folder of their own (null: <run_dir>/contribute)", speed=True)
    parse: IndexParse = setting("")
    ray: Ray = setting("", speed=True)
    rebuild: bool = setting("true: build even when `out` already holds this revision's index")


@section
class AssumedCall:
    """What one LLM call of a call label costs, as the plan assumes it."""

    completion_tokens: float = setting("", at_least=0)
    latency_s: float = setting("", at_least=0)
    prompt_tokens: float = setting("", at_least=0)


@section
class PlanPlanAssumed:
    """Stated per-call costs when `from_run` is null: rough figures for a 32B-class open model and real Lean with Mathlib. Measure them on a few seeds (`from_run`) before planning a night on them."""

    candidates_per_lemma_asked: float = setting("a discover answer holds discover.min_lemmas times this many candidates", at_least=0)
    compiled_share: float = setting("share of accepted candidates that compile within the repair rounds", at_least=0, at_most=1)
    duplicate_share: float = setting("share of candidates dedup drops (when dedup.enabled)", at_least=0, at_most=1)
    faithful_share: float = setting("share of compiled statements the faithfulness check keeps (when enabled)", at_least=0, at_most=1)
    judge_accept_share: float = setting("share of judged candidates the judge accepts", at_least=0, at_most=1)
    lean_check_s: float = setting("seconds of one check in a warm REPL (a statement or a proof under Mathlib)", at_least=0)
    llm: dict[str, AssumedCall] = setting("subgoals.max_per_candidate): a sketch's `have ..", at_least=0)
    proof_attempts_per_statement: float = setting("mean proof attempts per statement and prover (at most prove.max_repairs + 1)", at_least=0)
    proved_share: float = setting("share of statements a prover proves; each proof is replayed (verify.replay)", at_least=0, at_most=1)
    repairs_per_statement: float = setting("mean formalize repair rounds per accepted candidate (at most formalize.max_repairs)", at_least=0)
    replay_s: float = setting("seconds of one replay: a fresh Lean imports Mathlib, compiles, kernel-checks", at_least=0)
    startup_s: float = setting("seconds from the start to the first LLM request: Ray, the Lean pool, the actors", at_least=0)
    subgoals_per_failed_proof: float = setting("goals a failed proof's attempts leave open (subgoals.enabled; at most subgoals.max_per_candidate): a sketch's `have ... := by sorry` steps", at_least=0)
    trivial_share: float = setting("share of compiled statements `trivial.tactic` closes", at_least=0, at_most=1)


@section
class PlanPlanCluster:
    """The cluster the run is planned for: Lean nodes (the Lean pool's workers spread over them; on a cluster, the nodes labelled with lean.node_resource) and GPU nodes that only serve the LLM engines (llm=vllm), as in examples/cluster/. Nodes that do both: give the Lean nodes their GPUs in gpus_per_node and set gpu_nodes: 0."""

    cpus_per_node: int = setting("per Lean node", at_least=1)
    gpu_nodes: int = setting("", at_least=0)
    gpus_per_gpu_node: int = setting("", at_least=0)
    gpus_per_node: int = setting("per Lean node", at_least=0)
    memory_gb_per_node: float = setting("per Lean node", at_least=0)
    nodes: int = setting("Lean nodes", at_least=1)


@section
class PlanPlanGpu:
    """What one GPU serves with continuous batching (vLLM, a 32B model): prompt tokens are read far faster than completion tokens are written. GPU-hours are printed for every backend; they bound the wall time only for llm=vllm, whose engines run on this cluster."""

    completion_tokens_per_s: float = setting("", at_least=1)
    prompt_tokens_per_s: float = setting("", at_least=1)


@section
class PlanPlan:
    """`python -m pipelines.plan [mine overrides] [plan.key=value ...]`: a capacity plan for a mining run before it starts. Every override that does not start with `plan.` goes to conf/mine.yaml exactly as `python -m pipelines.mine` takes it (preset, seeds, lean, llm, stages ...); the ones that start with `plan.` set this file."""

    assumed: PlanPlanAssumed = setting("Stated per-call costs when `from_run` is null: rough figures for a 32B-class open model and real Lean with Mathlib")
    cluster: PlanPlanCluster = setting("The cluster the run is planned for: Lean nodes (the Lean pool's workers spread over them; on a cluster, the nodes labelled with lean.node_resource) and GPU nodes that only serve the LLM engines (llm=vllm), as in examples/cluster/")
    from_run: Any | None = setting("An earlier run directory (a local path or a pyarrow URI): per-call costs are measured from its candidates/ and discoveries/ tables instead of `assumed` (tokens and latency per call, calls and Lean checks per row of each stage, the share of candidates each stage takes in, seconds per Lean check and per replay)")
    gpu: PlanPlanGpu = setting("What one GPU serves with continuous batching (vLLM, a 32B model): prompt tokens are read far faster than completion tokens are written")
    lean_import_s: float = setting("seconds a REPL takes to import the header (`import Mathlib`: 5-60 s) at start and recycle", at_least=0)
    node_overhead_gb: float = setting("RAM per node besides the REPLs: Ray's raylet and object store, stage actors, writers", at_least=0)


@section
class Plan:
    """"""

    plan: PlanPlan = setting("`python -m pipelines.plan [mine overrides] [plan.key=value ...]`: a capacity plan for a mining run before it starts")


@section
class Check:
    """"""

    lean: Lean = setting("")
    max_file_bytes: int = setting("a larger file is one `error` line, never read (neither is anything but a regular file)", at_least=1)
    mode: Literal['proof', 'statement'] = setting("proof: exit 0 when every file is verified; statement: when every file compiles (sorry allowed)")
    ray: Ray = setting("", speed=True)
    replay: bool = setting("true: replay each file in a fresh Lean process too (how: verify.replay); `verified` needs both")
    statement: Any | None = setting("mode=proof: the statement each proof must prove unchanged, in an unchanged context: a .lean file")
    timeout_s: Any | None = setting("per-check limit; null uses lean.timeout_s", at_least=0)
    verify: Verify = setting("How `replay=true` replays a verified file (same section as in conf/mine.yaml; docs/checking-lean.md, 'Replay'): a Lean process started for it alone compiles the whole file and the kernel replays its declarations.")
