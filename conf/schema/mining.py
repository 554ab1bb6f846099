"""The mining family of jobs (mine, evaluate, autoformalize, contribute): mining's sections, and each job's keys on top
of them.
"""

from __future__ import annotations

from typing import Any, Literal

from conf.schema.contribution import ContributeSettings, Description, Naming
from conf.schema.fields import section, setting
from conf.schema.lean import Lean, Verify
from conf.schema.llm import Llm
from conf.schema.retrieval import Decontaminate, Dedup, Embedding, Faithfulness, Grounding, Index


@section
class AutoformalizeAgent:
    """mode=agent (ALA)"""

    examples: str | None = setting("A JSONL or Parquet file of informal/formal pairs (`informal`+`formal`, or ProofNet's `informal_stmt`+ `formal_statement`); a pair whose informal text is the problem's own is never shown")
    examples_k: int = setting("examples: informal/formal pairs returned per call", at_least=1)
    max_search_k: int = setting("... and at most this many whatever it asks", at_least=1)
    max_tool_calls: int = setting("K: the budget of tool calls per problem (ALA's)", at_least=1)
    search_k: int = setting("search_declarations: declarations returned when the model asks for no number", at_least=1)


@section
class AutoformalizeGot:
    """mode=got (Aria)"""

    ground_k: int = setting("nearest declarations shown to the model for a concept whose name the index lacks", at_least=1)
    max_concepts: int = setting("a graph with more concepts is refused (this project's default)", at_least=1)
    max_depth: int = setting("concepts on the longest dependency chain; a deeper graph is refused", at_least=1)


@section
class AutoformalizeSettings:
    """autoformalize"""

    agent: AutoformalizeAgent = setting("mode=agent (ALA)")
    default_header: str = setting("")
    got: AutoformalizeGot = setting("mode=got (Aria)")
    max_input_tokens: int = setting("a longer informal statement is bad_input (estimated at seeds.chars_per_token)", at_least=1)
    mode: Literal['direct', 'got', 'agent'] = setting("direct: retrieve -> think -> draft -> compile-repair (FORMAL); got: Aria's concept graph, missing concepts defined bottom-up before the draft; agent: ALA's model with tools under a budget of tool calls")
    resources: dict[str, Any] = setting("", speed=True)
    retrieve_k: int = setting("declarations nearest to the informal statement shown to the model (needs index.dir)", at_least=1)
    rows_per_block: int = setting("input rows per Ray Data block", at_least=1, speed=True)
    think: bool = setting("FORMAL: name the concepts and the shape of the statement before drafting (mode=direct)")


@section
class Benchmark:
    """benchmark"""

    default_domain: str = setting("domain of a table row without a `domain` column")
    domains: list[Any] = setting("order of the domains in the printed Success@t table")
    prover_template_role: str = setting("")
    rows_per_block: int = setting("statements per Ray Data block fed to the stages", at_least=1, speed=True)
    seed_root: str = setting("SEED_PATH of the layout is a file under this root: Mathlib/SEED_PATH.lean")


@section
class Discover:
    """Each stage's `resources` are its Ray Data shape: actors, rows in flight per actor, rows per batch, and what Ray reserves per actor (num_cpus; num_gpus and custom `resources` too). LLM stages keep many rows in flight on one async actor; Lean stages also wait on the Lean pool, whose own size is in `lean`. They mostly wait on the network, so a fraction of a CPU each keeps CPUs free for the pool and the writers."""

    marker: str = setting("")
    max_lemmas: int = setting("An answer's lemmas past this many are dropped (counted in the discovery's `dropped_lemmas` and `reason`): one runaway answer would otherwise become hundreds of candidates and judge calls", at_least=1,
                          introduced=200)
    min_lemmas: int = setting("the prompt asks for at least this many lemmas", at_least=1)
    resources: dict[str, Any] = setting("", speed=True)
    samples_per_seed: int = setting("independent discover answers per seed (paper: one long answer each)", at_least=1)


@section
class Formalize:
    """formalize"""

    diagnose: bool = setting("FORMAL: explain each Lean error before the repair")
    marker: str = setting("")
    max_repairs: int = setting("", at_least=0)
    resources: dict[str, Any] = setting("", speed=True)


@section
class Judge:
    """judge"""

    resources: dict[str, Any] = setting("", speed=True)
    samples: int = setting("judge answers per candidate; accepted on a strict majority of `correct`", at_least=1)


@section(speed=True)
class Lease:
    """speed"""

    renew_s: float = setting("how often the running job renews its lease", at_least=0)
    stale_s: float = setting("a lease not renewed for this long (its holder was killed) is taken over with a note", at_least=0)


@section(speed=True)
class Output:
    """speed"""

    rows_per_file: int = setting("candidates buffered per Parquet file; smaller loses less on a kill", at_least=1)
    status_every_s: float = setting("how often the per-status counts are printed while running", at_least=0)
    writer_num_cpus: float = setting("what Ray reserves per write task: they wait on storage, and a whole CPU each would queue them behind the stages' actors until the end of the run", at_least=0)


@section
class Prompts:
    """prompts"""

    agent: str = setting("")
    attempt: str = setting("One failed attempt in a repair history, by what went wrong with it: Lean's errors (`attempt`), code the checker refused before Lean, a check that failed without a Lean error, an answer that held no code.")
    attempt_no_code: str = setting("")
    attempt_refused: str = setting("")
    attempt_rejected: str = setting("")
    concept: str = setting("")
    concept_graph: str = setting("")
    define: str = setting("")
    definitions: str = setting("")
    diagnose: str = setting("")
    diagnosis: str = setting("")
    discover: str = setting("")
    discover_known: str = setting("")
    draft: str = setting("")
    draft_plan: str = setting("")
    formalize: str = setting("")
    ground: str = setting("")
    grounded: str = setting("")
    informal: str = setting("")
    judge: str = setting("")
    name: str = setting("")
    no_known_definitions: str = setting("")
    prove: str = setting("")
    prove_repair: str = setting("A repair starts with the first request word for word ({first}: the `prove` text above), then the attempts, so each request of a chain extends the one before and the engine's prefix cache reuses its prefill")
    prove_sketch: str = setting("")
    related: str = setting("")
    retry: str = setting("")
    system: str = setting("")
    think: str = setting("")
    tool_check_term: str = setting("")
    tool_compile: str = setting("")
    tool_examples: str = setting("")
    tool_search_declarations: str = setting("")
    tool_translate: str = setting("")
    translate: str = setting("")


@section
class Prove:
    """prove"""

    env_lines: list[Any] = setting("Lines the checked proof starts with (the prover models' environment in the paper).")
    include_trivial: bool = setting("trivial statements are kept but not sent to the provers")
    marker: str = setting("")
    max_repairs: int = setting("K: repairs after the first proof attempt (paper: 2)", at_least=0)
    resources: dict[str, Any] = setting("", speed=True)


@section(speed=True)
class Ray:
    """speed"""

    address: Any | None = setting("null starts a local Ray; 'auto' or 'ray://HOST:10001' joins a cluster")
    connect_timeout_s: float = setting("joining the cluster at `address` gives up after this (Ray itself retries for minutes)", at_least=0)
    driver_malloc_arenas: int = setting("malloc arenas of the driver process (glibc)", at_least=1)
    no_progress_timeout_s: float = setting("Ray Data fails an execution in which no operator moves for this long", at_least=-1)
    num_cpus: int | None = setting("logical CPUs for a local Ray (null: Ray's own count)", at_least=1)
    seeds_per_wave: int = setting("Seeds per wave: a run executes its seeds as a sequence of waves, each one Ray Data plan", at_least=1)
    wave_check_s: float = setting("how often the driver looks whether the next wave may start", at_least=0)
    waves_in_flight: int = setting("Waves run at once", at_least=1)


@section(speed=True)
class Resume:
    """speed"""

    accept_changes: list[Any] = setting("deciding settings a restart may change knowingly, e.g. [prove.max_repairs]; run.json records what was accepted. Every setting decides a run's rows (a restart with another value is refused by name) but those tagged `# speed` where they are defined in conf/: they change only speed or placement (conf/speed_tags.py).")
    unused: list[Any] = setting("")


@section
class Seeds:
    """seeds"""

    chars_per_token: float = setting("the estimate's characters per token (Lean + Unicode)", at_least=0.1)
    default_domain: str = setting("Domain of a seed: the longest matching module prefix wins")
    domains: dict[str, str] = setting("")
    exclude: list[Any] = setting("")
    include: list[Any] = setting("globs on paths relative to root (fnmatch: `*` crosses `/`)")
    list: Any | None = setting("or an explicit list of relative paths (overrides include/exclude)")
    max_tokens: int = setting("a seed estimated above this does not fit the discover model's context", at_least=1)
    root: str = setting("a Mathlib checkout's `Mathlib/` parent, or any directory of .lean files")


@section
class Subgoals:
    """Sub-goal lemmas (DeepSeek-Prover-V2, Goedel-Prover-V2): the goals a failed proof left open (its `sorry`s, its `unsolved goals`) become candidates of their own, `origin: subgoal` with a `parent_id`, and go through dedup, judge, formalize, trivial and prove like any other."""

    enabled: bool = setting("")
    max_depth: int = setting("1: goals of sub-goal candidates are not mined", at_least=1)
    max_per_candidate: int = setting("open goals of one parent mined, first found first", at_least=1)
    sketch_prompt: bool = setting("a failed first proof is followed by a request for a sketch with `have ... := by sorry`")


@section
class Trivial:
    """trivial"""

    resources: dict[str, Any] = setting("", speed=True)
    tactic: str = setting("replaces `sorry`; a statement it closes is flagged trivial")


@section
class Mine:
    """`folklore mine`: seed files in, candidates discovered, judged, formalized and proved out."""

    llm: Llm = setting("")
    lean: Lean = setting("")
    dedup: Dedup = setting("The resources of the optional stages, whose other settings are their groups' (conf/dedup, conf/decontaminate, conf/faithfulness).")
    grounding: Grounding = setting("")
    faithfulness: Faithfulness = setting("Always on here (and grounding of the repairs is on whenever index.dir is set); alpha, the penalty and the prompts are conf/faithfulness/default.yaml's.")
    embedding: Embedding = setting("")
    decontaminate: Decontaminate = setting("")
    pipeline: list[str] = setting(
        "the stages run, in order (docs/stages.md); a stage of your own as package.module:NAME",
        introduced=["discover", "split", "decontaminate", "judge", "formalize", "faithfulness", "trivial", "prove"])
    run_dir: str = setting("one run per mode: a restart in another mode is refused", speed=True)
    ray: Ray = setting("", speed=True)
    seeds: Seeds = setting("")
    index: Index = setting("The declaration index that dedup and grounding read: the `out` of `python -m pipelines.index mathlib_dir=..")
    discover: Discover = setting("Each stage's `resources` are its Ray Data shape: actors, rows in flight per actor, rows per batch, and what Ray reserves per actor (num_cpus; num_gpus and custom `resources` too)")
    rounds: int = setting("", at_least=1, speed=True)
    subgoals: Subgoals = setting("Sub-goal lemmas (DeepSeek-Prover-V2, Goedel-Prover-V2): the goals a failed proof left open (its `sorry`s, its `unsolved goals`) become candidates of their own, `origin: subgoal` with a `parent_id`, and go through dedup, judge, formalize, trivial and prove like any other.")
    judge: Judge = setting("")
    formalize: Formalize = setting("")
    trivial: Trivial = setting("")
    prove: Prove = setting("")
    verify: Verify = setting("How `replay=true` replays a verified file (same section as in conf/mine.yaml; docs/checking-lean.md, 'Replay'): a Lean process started for it alone compiles the whole file and the kernel replays its declarations.")
    lease: Lease = setting("", speed=True)
    resume: Resume = setting("", speed=True)
    output: Output = setting("", speed=True)
    prompts: Prompts = setting("")


@section
class Evaluate(Mine):
    """`folklore evaluate`: a benchmark's statements proved by each prover role, Success@t per prover and domain."""

    pipeline: list[str] = setting("the statement stages run on the benchmark, in order (docs/stages.md)",
                                  introduced=["formalize", "faithfulness", "trivial", "prove"])
    benchmark_dir: str = setting("A directory in the MathlibLemma layout DOMAIN/SEED_PATH/N.lean (one statement ending in `sorry` per file), or a Parquet file or directory of Parquet files with a `statement` column (optional columns: candidate_id or id, seed_id, seed_path, domain), e.g")
    provers: list[Any] = setting("Prover roles")
    benchmark: Benchmark = setting("")


@section
class Autoformalize(Mine):
    """`folklore autoformalize`: informal statements into Lean, checked for compiling and for faithfulness."""

    pipeline: list[str] = setting("the stages run on the informal statements, in order (docs/stages.md)",
                                  introduced=["autoformalize", "faithfulness"])
    input: str = setting("A JSONL or Parquet file, or a directory of them: one informal statement a row, in a column `informal` or in ProofNet's layout (`name`, `informal_stmt`, `header`, `formal_statement` as a reference)")
    autoformalize: AutoformalizeSettings = setting("")


@section
class Contribute(Mine):
    """`folklore contribute`: a mining run's proved lemmas as Mathlib patches with pull-request descriptions."""

    pipeline: list[str] = setting("the stages run on the proved lemmas, in order (docs/stages.md)",
                                  introduced=["name", "shorten"])
    naming: Naming = setting("")
    mathlib_dir: Any | None = setting("the Mathlib checkout the patches are made against (null: the run's seeds.root)")
    out: Any | None = setting("patches and descriptions, in a folder of their own (null: <run_dir>/contribute)", speed=True)
    contribute: ContributeSettings = setting("")
    description: Description = setting("")
