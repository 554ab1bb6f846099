"""The mining family of jobs (mine, evaluate, autoformalize, contribute): mining's sections, and each job's keys on top
of them.
"""

from __future__ import annotations

from typing import Literal

from conf.schema.contribution import ContributeSettings, Description, Naming
from conf.schema.fields import section, setting
from conf.schema.lean import Lean, Verify
from conf.schema.llm import Llm
from conf.schema.retrieval import Decontaminate, Dedup, Embedding, Faithfulness, Grounding, Index, Resources


@section
class Agent:
    """Autoformalization by a model with tools under a budget of tool calls (mode=agent, after ALA)."""

    examples: str | None = setting("JSONL/Parquet of informal/formal pairs for the examples tool (null: none)")
    examples_k: int = setting("pairs the examples tool returns per call", at_least=1)
    max_search_k: int = setting("declarations search_declarations returns at most, whatever the model asks",
                                at_least=1)
    max_tool_calls: int = setting("K: tool calls allowed per problem", at_least=1)
    search_k: int = setting("declarations search_declarations returns when the model asks for no number", at_least=1)


@section
class ConceptGraph:
    """Autoformalization through a graph of concepts, missing ones defined bottom-up first (mode=got, after Aria)."""

    ground_k: int = setting("nearest declarations shown for a concept whose name the index lacks", at_least=1)
    max_concepts: int = setting("concepts a graph may hold; a larger graph is refused", at_least=1)
    max_depth: int = setting("concepts on the longest dependency chain; a deeper graph is refused", at_least=1)


@section
class AutoformalizeSettings:
    """The autoformalize stage: informal statements into Lean statements that compile."""

    agent: Agent = setting("settings of mode=agent")
    default_header: str = setting("the Lean header of a row without a `header` column")
    got: ConceptGraph = setting("settings of mode=got")
    max_input_tokens: int = setting("a longer informal statement is bad_input (estimated at seeds.chars_per_token)",
                                    at_least=1)
    mode: Literal['direct', 'got', 'agent'] = setting("direct: think, draft, repair (FORMAL); got: concept graph "
                                                      "first (Aria); agent: tools (ALA)")
    resources: Resources = setting("the stage's Ray Data shape", speed=True)
    retrieve_k: int = setting("declarations nearest to the informal statement shown to the model (needs index.dir)",
                              at_least=1)
    rows_per_block: int = setting("input rows per Ray Data block", at_least=1, speed=True)
    think: bool = setting("mode=direct: ask for the concepts and the statement's shape before the draft (FORMAL)")


@section
class Benchmark:
    """How `evaluate` reads a benchmark's domains and prover roles, and reports its table."""

    default_domain: str = setting("domain of a table row without a `domain` column")
    domains: list[str] = setting("order of the domains in the printed Success@t table")
    prover_template_role: str = setting("the role whose endpoint and settings a prover not in llm.models takes")
    rows_per_block: int = setting("statements per Ray Data block fed to the stages", at_least=1, speed=True)
    seed_root: str = setting("prefix of SEED_PATH in the layout: the seed is <seed_root>/SEED_PATH.lean")


@section
class Discover:
    """The discover stage: a model proposes lemmas missing from each seed file."""

    marker: str = setting("the line in the answer after which its Lean block is read")
    max_lemmas: int = setting("lemmas kept per answer; the rest are dropped and counted in `dropped_lemmas`",
                              at_least=1, introduced=200)
    min_lemmas: int = setting("lemmas the discover prompt asks for, at least (its {min_lemmas})", at_least=1)
    resources: Resources = setting("the stage's Ray Data shape", speed=True)
    samples_per_seed: int = setting("independent discover answers per seed (paper: one long answer each)", at_least=1)


@section
class Formalize:
    """The formalize stage: a statement's compile-repair loop until Lean accepts it."""

    diagnose: bool = setting("FORMAL: a `diagnose` call explains each failure before the repair (one call more)")
    marker: str = setting("the line in the answer after which its Lean block is read")
    max_repairs: int = setting("T: repair rounds after the first check (0: checked once, never repaired)",
                               at_least=0)
    resources: Resources = setting("the stage's Ray Data shape", speed=True)


@section
class Judge:
    """The judge stage: is a candidate statement mathematically true."""

    resources: Resources = setting("the stage's Ray Data shape", speed=True)
    samples: int = setting("judge answers per candidate; accepted on a strict majority of `correct`", at_least=1)


@section(speed=True)
class Lease:
    """The lease that keeps one driver per run directory."""

    renew_s: float = setting("seconds between renewals of the running job's lease", at_least=0)
    stale_s: float = setting("seconds unrenewed after which a lease (its holder killed) is taken over", at_least=0)


@section(speed=True)
class Output:
    """How a run's tables are written and its progress printed."""

    rows_per_file: int = setting("candidates buffered per Parquet file; smaller loses less on a kill", at_least=1)
    status_every_s: float = setting("seconds between prints of the per-status counts", at_least=0)
    writer_num_cpus: float = setting("CPUs Ray reserves per write task (a fraction: writers wait on storage)",
                                     at_least=0)


@section
class Prompts:
    """The templates of every LLM request, each filling the {placeholders} its help names (`{{`: a brace)."""

    agent: str = setting("mode=agent: the agent's task; fills {informal}, {header}, {name}, {budget}")
    attempt: str = setting("a failed attempt with Lean's errors, in a history; fills {number}, {code}, {diagnostics}")
    attempt_no_code: str = setting("an attempt whose answer held no code; fills {number}, {reasons}, {answer}")
    attempt_refused: str = setting("an attempt the checker refused before Lean; fills {number}, {code}, {reasons}")
    attempt_rejected: str = setting("an attempt that failed its check without a Lean error; fills {number}, {code}, "
                                    "{reasons}")
    concept: str = setting("mode=got: the concept a definition's repair must keep; fills {concept}")
    concept_graph: str = setting("mode=got: request for the concept graph; fills {informal}, {related}, "
                                 "{max_concepts}, {max_depth}")
    define: str = setting("mode=got: request for a missing concept's definition; fills {concept}, {informal}, "
                          "{header}, {known}, {marker}")
    definitions: str = setting("mode=got: definitions already in the file, before the draft; fills {definitions}")
    diagnose: str = setting("the diagnose request (formalize.diagnose): explain Lean's errors; fills {code}, "
                            "{diagnostics}")
    diagnosis: str = setting("that explanation, put before the repair request; fills {diagnosis}")
    discover: str = setting("the discover request: lemmas missing from a seed file; fills {seed}, {min_lemmas}, "
                            "{marker}")
    discover_known: str = setting("added to discover after round 1: the lemmas proved for the seed; fills {known}")
    draft: str = setting("the draft request: the Lean statement; fills {informal}, {header}, {name}, {marker}, "
                         "{related}")
    draft_plan: str = setting("the `think` answer, put before the draft request; fills {thought}")
    formalize: str = setting("the formalize request: repair a statement that does not compile; fills {history}, "
                             "{marker}")
    ground: str = setting("mode=got: request for the declaration that is a concept; fills {concept}, {candidates}")
    grounded: str = setting("mode=got: Mathlib names that stand for concepts of the statement; fills {names}")
    informal: str = setting("autoformalize repairs: the statement as asked, put first; fills {informal}")
    judge: str = setting("the judge request: is a statement mathematically true; fills {statement}")
    name: str = setting("contribute: request for a conventional name; fills {statement}, {namespace}, {name}, "
                        "{reasons}, {convention}")
    no_known_definitions: str = setting("mode=got: `define`'s {known} when no definition was written before")
    prove: str = setting("the prove request: a proof of a statement; fills {statement}, {environment}, {marker}")
    prove_repair: str = setting("the proof repair request; fills {first} (the prove request, a shared prefix), "
                                "{history}, {statement}, {environment}, {marker}")
    prove_sketch: str = setting("appended to a proof repair request (subgoals.sketch_prompt); no placeholders")
    related: str = setting("autoformalize: declarations nearest to the statement; fills {declarations}")
    retry: str = setting("appended when earlier answers held no code; fills {history}, {marker}")
    system: str = setting("the system message of every request")
    think: str = setting("the think request (autoformalize.think): a plan before the draft; fills {informal}, "
                         "{related}")
    tool_check_term: str = setting("mode=agent: the description of the `check_term` tool")
    tool_compile: str = setting("mode=agent: the description of the `compile` tool")
    tool_examples: str = setting("mode=agent: the description of the `examples` tool")
    tool_search_declarations: str = setting("mode=agent: the description of the `search_declarations` tool")
    tool_translate: str = setting("mode=agent: the description of the `translate` tool")
    translate: str = setting("mode=agent: the translate tool's request; fills {informal}, {header}, {name}, {marker}")


@section
class Prove:
    """The prove stage: each prover's proof attempts and repairs of a compiled statement."""

    env_lines: list[str] = setting("lines the checked proof file starts with (imports, options, opens)")
    include_trivial: bool = setting("send trivial statements to the provers too")
    marker: str = setting("the line in the answer after which its Lean block is read")
    max_repairs: int = setting("K: repairs after the first proof attempt (paper: 2)", at_least=0)
    resources: Resources = setting("the stage's Ray Data shape", speed=True)


@section(speed=True)
class Ray:
    """Where Ray runs and how a run's seeds are cut into waves."""

    address: str | None = setting("null starts a local Ray; 'auto' or 'ray://HOST:10001' joins a cluster")
    connect_timeout_s: float = setting("seconds to join the cluster at `address` before giving up", at_least=0)
    driver_malloc_arenas: int = setting("glibc malloc arenas of the driver process", at_least=1)
    no_progress_timeout_s: float = setting("seconds with no operator moving before Ray Data fails the wave "
                                           "(-1: never)", at_least=-1)
    metrics_export_port: int | None = setting("port of a local Ray's Prometheus metrics endpoint (null: one Ray picks; "
                                              "a cluster sets it at `ray start`)", at_least=1, at_most=65535)
    num_cpus: int | None = setting("logical CPUs of a local Ray (null: Ray's own count)", at_least=1)
    seeds_per_wave: int = setting("seeds per wave, each wave one Ray Data plan (smaller holds less memory)",
                                  at_least=1)
    wave_check_s: float = setting("seconds between the driver's checks whether the next wave may start", at_least=0)
    waves_in_flight: int = setting("waves run at once", at_least=1)


@section(speed=True)
class Resume:
    """What a resume lets differ from the config the run was recorded with."""

    accept_changes: list[str] = setting("deciding keys a resume may change knowingly (e.g. [prove.max_repairs]); "
                                        "run.json records them")
    unused: list[str] = setting("sections or keys the job does not read, so never compared on resume")


@section
class Seeds:
    """The seed files a run mines and the domain each belongs to."""

    chars_per_token: float = setting("characters per token of the size estimate (Lean and Unicode)", at_least=0.1)
    default_domain: str = setting("domain of a seed no prefix of `domains` matches")
    domains: dict[str, str] = setting("module prefix -> domain; the longest matching prefix wins")
    exclude: list[str] = setting("globs on paths relative to root left out of `include`")
    include: list[str] = setting("globs on paths relative to root (fnmatch: `*` crosses `/`)")
    list: list[str] | None = setting("paths relative to root, mined instead of include/exclude (null: use them)")
    max_tokens: int = setting("a seed estimated above this many tokens is not sent to discover", at_least=1)
    root: str = setting("a Mathlib checkout's `Mathlib/` parent, or any directory of .lean files")


@section
class Subgoals:
    """Sub-goal lemmas: the goals a failed proof left open become candidates of their own (`origin: subgoal`)."""

    enabled: bool = setting("mine the goals failed proofs leave open")
    max_depth: int = setting("generations of sub-goals mined (1: goals of sub-goal candidates are not)", at_least=1)
    max_per_candidate: int = setting("open goals of one parent mined, first found first", at_least=1)
    sketch_prompt: bool = setting("after a failed first proof, ask for a sketch of `have ... := by sorry` steps")


@section
class Trivial:
    """The trivial stage: flags statements one tactic closes."""

    resources: Resources = setting("the stage's Ray Data shape", speed=True)
    tactic: str = setting("the tactic put in place of `sorry`; a statement it closes is flagged trivial")


@section
class Mine:
    """`folklore mine`: seed files in, candidates discovered, judged, formalized and proved out."""

    llm: Llm = setting("the LLM backend, its models, roles and sampling (conf/llm)")
    lean: Lean = setting("the Lean backend and its pool of REPLs (conf/lean)")
    dedup: Dedup = setting("the dedup stage (conf/dedup)")
    grounding: Grounding = setting("retrieval grounding of the formalize and prove prompts (conf/grounding)")
    faithfulness: Faithfulness = setting("the faithfulness stage (conf/faithfulness)")
    embedding: Embedding = setting("the embedding model of the index, dedup and decontamination (conf/embedding)")
    decontaminate: Decontaminate = setting("the decontaminate stage: benchmarks candidates must not restate")
    pipeline: list[str] = setting(
        "the stages run, in order (docs/stages.md); a stage of your own as package.module:NAME",
        introduced=["discover", "split", "decontaminate", "judge", "formalize", "faithfulness", "trivial", "prove"])
    run_dir: str = setting("the run's directory (local path or URI); the same run_dir again resumes it", speed=True)
    ray: Ray = setting("where Ray runs and how seeds are cut into waves", speed=True)
    seeds: Seeds = setting("the seed files mined and their domains")
    index: Index = setting("the declaration index dedup, grounding and faithfulness read")
    discover: Discover = setting("the discover stage")
    rounds: int = setting("discover rounds per seed; each later round is shown what earlier ones proved", at_least=1,
                          speed=True)
    subgoals: Subgoals = setting("goals left open by failed proofs, mined as candidates")
    judge: Judge = setting("the judge stage")
    formalize: Formalize = setting("the formalize stage")
    trivial: Trivial = setting("the trivial stage")
    prove: Prove = setting("the prove stage")
    verify: Verify = setting("how an accepted proof is replayed apart from the warm REPL before it is `proved`")
    lease: Lease = setting("the lease that keeps one driver per run", speed=True)
    resume: Resume = setting("what a resume may change", speed=True)
    output: Output = setting("how the tables are written and progress printed", speed=True)
    prompts: Prompts = setting("the templates of every LLM request")


@section
class Evaluate(Mine):
    """`folklore evaluate`: a benchmark's statements proved by each prover role, Success@t per prover and domain."""

    pipeline: list[str] = setting("the statement stages run on the benchmark, in order (docs/stages.md)",
                                  introduced=["formalize", "faithfulness", "trivial", "prove"])
    benchmark_dir: str = setting("DOMAIN/SEED_PATH/N.lean files, or Parquet with a `statement` column (path or URI)")
    provers: list[str] = setting("prover roles; a name not in llm.models is that model on the template role's "
                                 "endpoint")
    benchmark: Benchmark = setting("how the benchmark is read and its table printed")


@section
class Autoformalize(Mine):
    """`folklore autoformalize`: informal statements into Lean, checked for compiling and for faithfulness."""

    pipeline: list[str] = setting("the stages run on the informal statements, in order (docs/stages.md)",
                                  introduced=["autoformalize", "faithfulness"])
    input: str = setting("JSONL or Parquet of informal statements (`informal`, or ProofNet's columns); path or URI")
    autoformalize: AutoformalizeSettings = setting("the autoformalize stage and its modes")


@section
class Contribute(Mine):
    """`folklore contribute`: a mining run's proved lemmas as Mathlib patches with pull-request descriptions."""

    pipeline: list[str] = setting("the stages run on the proved lemmas, in order (docs/stages.md)",
                                  introduced=["name", "shorten"])
    naming: Naming = setting("Mathlib's naming conventions, as the name check reads them (conf/naming)")
    mathlib_dir: str | None = setting("the Mathlib checkout the patches are made against (null: the run's seeds.root)")
    out: str | None = setting("folder of the patches and descriptions (null: <run_dir>/contribute)", speed=True)
    contribute: ContributeSettings = setting("which lemmas are offered, and how they are named and shortened")
    description: Description = setting("the pull-request description templates")
