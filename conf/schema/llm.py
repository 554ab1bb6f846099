"""The `llm` section: endpoints, the model of each role, sampling per call label, retries, and the engines or the
simulator a job starts.
"""

from __future__ import annotations

from typing import Any, Literal

from conf.schema.fields import section, setting


@section(speed=True)
class AnswerCache:
    """The cache of successful answers under RUN_DIR/llm_cache/, which a resumed run replays instead of paying again."""

    enabled: bool = setting("keep each successful answer so a resume replays the rows a killed run had in flight")


@section
class Endpoint:
    """One OpenAI-compatible URL (`llm.endpoints.<name>`) and how to talk to it."""

    api_key_env: str | None = setting("environment variable holding the API key (never the key itself); null: no key")
    base_url: str | None = setting("the API root, e.g. https://api.openai.com/v1; null: set at start (sim, vllm), "
                                   "or the replicas of base_urls")
    base_urls: list[str] | None = setting("several replicas of one endpoint (their API roots), each request sent to "
                                          "one; null: base_url alone")
    concurrency: int = setting("requests in flight to this endpoint from one operator, shared by its actors",
                               at_least=1)
    max_tokens_param: Literal['max_tokens', 'max_completion_tokens'] = setting(
        "request field carrying sampling.max_tokens: max_completion_tokens for OpenAI, else max_tokens")
    request_timeout_s: float = setting("seconds one request may take before it fails as a timeout (and is retried)",
                                       at_least=0)
    load_bound: float = setting("base_urls: a replica holding this times its even share of the requests in flight "
                                "passes new keys to the next replica on the ring", at_least=1)
    routing: Literal['affinity', 'round_robin'] = setting(
        "base_urls: affinity keeps a cache key's requests on one replica (consistent hashing); round_robin: in turn")
    structured_form: Literal['structured_outputs', 'response_format'] = setting(
        "how a structured call's answer shape is sent: vLLM's structured_outputs regex, or OpenAI's response_format")


@section
class RoleModel:
    """The model a role (`llm.models.<role>`) calls and the endpoint that serves it."""

    endpoint: str = setting("a key of llm.endpoints")
    model: str = setting("the model name sent in each request (llm=vllm: a key of llm.serve.engines)")


@section(speed=True)
class Probe:
    """The check of every endpoint a role uses (one `GET /models`, no tokens) before the job starts."""

    enabled: bool = setting("probe the endpoints first; a wrong key, model or max_tokens then stops the job at once")
    structured_max_tokens: int = setting(
        "completion tokens of the one constrained request per structured call and model (answer_format=structured)",
        at_least=1)
    timeout_s: float = setting("seconds to wait for each endpoint's model list (and each constrained request)",
                               at_least=0)


@section(speed=True)
class Retry:
    """How patiently transient failures (429, 5xx, timeouts, dropped connections) are retried."""

    backoff_base_s: float = setting("seconds: the first retry waits 0.5-1x this, doubling each retry", at_least=0)
    backoff_max_s: float = setting("seconds: the longest wait the doubling reaches", at_least=0)
    max_attempts: int = setting("tries per request, the first included", at_least=1)
    max_consecutive_failures: int = setting(
        "the job stops after this many tries in a row fail with connection, auth or not-found errors", at_least=1)
    max_identical_refusals: int = setting(
        "the job stops when a stage's first this-many calls to a model are all refused alike", at_least=1)
    max_retry_after_s: float = setting("seconds: a longer Retry-After from the server is cut to this", at_least=0)
    report_every_s: float = setting(
        "seconds between two warning lines per endpoint while requests wait to retry", at_least=0)


@section(open=True)
class Sampling:
    """The request fields of one call label (`llm.sampling.<label>`); stop, seed, n, reasoning_effort and
    extra_body (server-specific fields) may be added and are sent as given."""

    answer_format: Literal['free', 'structured'] = setting(
        "structured: the endpoint holds the answer to the shape its parser reads (marker and lean fence, or verdict "
        "word); free: not held; on the calls that have a shape", introduced="free")
    max_tokens: int = setting("completion tokens at most per answer (below the model's context)", at_least=1)
    temperature: float = setting("sampling temperature; 0: always the likeliest token", at_least=0, at_most=2)
    thinking_chars: int = setting(
        "structured: characters of free text allowed before the held part (a plan)", at_least=0, introduced=0)
    top_p: float = setting("nucleus sampling: the share of probability mass sampled from, 0 to 1", at_least=0,
                           at_most=1)


@section(open=True)
class AcceleratorConfig:
    """Ray Serve LLM's `accelerator_config` of an engine; keys besides `kind` (a TPU's topology) are passed as given."""

    kind: Literal["cpu", "gpu", "tpu"] = setting("the accelerator the engine runs on")


@section(speed=True)
class Replicas:
    """How many replicas of an engine Serve keeps; it autoscales between the two."""

    max: int = setting("replicas at most", at_least=1)
    min: int = setting("replicas at least (0: none while idle)", at_least=0)


@section
class Engine:
    """One vLLM engine deployment (`llm.serve.engines.<model id>`, Ray Serve LLM's LLMConfig)."""

    accelerator_config: AcceleratorConfig = setting("Ray Serve LLM's accelerator_config (kind: gpu, cpu or tpu)",
                                                    speed=True)
    accelerator_type: str | None = setting("the GPU model a replica needs, e.g. H100; null: any (and with kind cpu)",
                                           speed=True)
    engine_kwargs: dict[str, Any] = setting("vLLM's engine arguments (max_model_len, ...), passed to vLLM unread")
    max_ongoing_requests: int = setting("requests one replica takes at once before Serve queues them", at_least=1,
                                        speed=True)
    model_source: str = setting("the weights: a Hugging Face repo id, a local folder, or s3:// / gs://")
    placement_group_config: dict[str, Any] | None = setting(
        "null, or Ray Serve LLM's placement_group_config (bundles, strategy), passed on unread", speed=True)
    replicas: Replicas = setting("how many replicas Serve autoscales between", speed=True)
    runtime_env: dict[str, Any] | None = setting(
        "null, or Ray's runtime_env for a replica and its engine processes (env_vars, ...), passed on unread",
        speed=True)
    tensor_parallel_size: int = setting("GPUs (CPU workers with kind cpu) a replica shards the model over",
                                        at_least=1, speed=True)
    tool_call_parser: str | None = setting("vLLM's parser of the model's tool calls, e.g. hermes; null: no tools")


@section(speed=True)
class Router:
    """How the replicas of an engine with `replicas.max` above 1 share its requests (Ray Serve's request router)."""

    fallback_replicas: int = setting(
        "affinity: the next replicas on the ring a request tries when its own holds max_ongoing_requests", at_least=0)
    routing: Literal['affinity', 'round_robin'] = setting(
        "affinity: a cache key's requests go to one replica (consistent hashing); round_robin: to each in turn")
    virtual_nodes: int = setting("affinity: points per replica on the hash ring (more: keys spread more evenly)",
                                 at_least=1)


@section
class Serve:
    """The Ray Serve LLM application of `llm=vllm`: where it listens and which engines it deploys."""

    app_name: str = setting("the Serve application's name, to start or attach to", speed=True)
    endpoint: str = setting("the key of llm.endpoints that gets the application's address", speed=True)
    engines: dict[str, Engine] = setting("model id (what llm.models names) -> its engine; see conf/llm/engines/")
    http_host: str = setting("where the Serve proxy listens: 127.0.0.1 on one machine, 0.0.0.0 on a cluster",
                             speed=True)
    http_port: int = setting("the Serve proxy's port", at_least=1, at_most=65535, speed=True)
    mode: Literal['start', 'attach'] = setting(
        "start: deploy the application (or use a running one); attach: only use a running one", speed=True)
    placement_timeout_s: float = setting("seconds to wait for Ray to place the engines' replicas before giving up",
                                         at_least=0, speed=True)
    route_prefix: str = setting("the URL path the application's OpenAI route is served under", speed=True)
    router: Router = setting("how an engine's replicas share its requests (one replica: no router is set)")


@section(speed=True)
class LlmSimulatorFaults:
    """Faults the LLM simulator injects, drawn per delivery, so a retry of the same request draws again."""

    hang_s: float = setting("seconds the server holds a timed-out request before dropping it", at_least=0)
    rate_429: float = setting("share of deliveries answered 429", at_least=0, at_most=1)
    rate_500: float = setting("share of deliveries answered 500", at_least=0, at_most=1)
    rate_timeout: float = setting("share of deliveries the server holds hang_s seconds and drops", at_least=0,
                                  at_most=1)
    retry_after_s: float = setting("seconds of the Retry-After header sent with a 429", at_least=0)


@section(speed=True)
class SimLatency:
    """The LLM simulator's service time: log-normal around a median."""

    by_call: dict[str, float] = setting("call -> its own median in seconds, e.g. {discover: 2.0}; others: median_s",
                                         at_least=0)
    median_s: float = setting("median service time of a request, in seconds", at_least=0)
    sigma: float = setting("spread of the log-normal service time; 0: always the median", at_least=0)


@section
class AgentScript:
    """The simulator's tool-calling agent (autoformalize mode=agent): its opening tools, then `compile` calls."""

    fixed_at_compile: list[float] = setting(
        "P(first compile without the error mark is compile 1, 2, 3...); the rest never")
    opening: list[Literal['search_declarations', 'examples', 'translate', 'check_term']] = setting(
        "the tools called first, in order, before the compiles")
    search_k: int = setting("declarations search_declarations asks for", at_least=1)
    term: str = setting("the Lean term check_term asks about")


@section
class ConceptGraphScript:
    """The simulator's concept graph (autoformalize mode=got): grounded leaves plus one new notion per row."""

    confirm_rate: float = setting("share of `ground` calls that confirm the first candidate", at_least=0, at_most=1)
    grounded: int = setting("declarations of the prompt's list taken as the graph's grounded leaves", at_least=0)


@section
class DefineScript:
    """The simulator's `define` answers: a predicate that states nothing, repaired like formalize."""

    broken_rate: float = setting("share of definitions carrying the error mark, for the repair loop", at_least=0,
                                 at_most=1)


@section
class DiscoverScript:
    """The simulator's discover answers: a lean block of `sorry` lemmas named after the seed."""

    broken_rate: float = setting("share of lemmas carrying the error mark, for formalize to repair", at_least=0,
                                 at_most=1)
    fallback_name: str = setting("lemma name stem when the seed text declares nothing")
    lemmas_per_response: int = setting("lemmas in each answer", at_least=0)
    marker: str = setting("the line before the lean block (discover.marker, for the answer to parse)")
    statements: list[str] = setting("the statements lemmas draw from; some restate others, for dedup to find")


@section
class DraftScript:
    """The simulator's autoformalize drafts: one `sorry` theorem stating one of discover.statements."""

    broken_rate: float = setting("share of drafts carrying the error mark, for the repair loop", at_least=0,
                                 at_most=1)


@section
class FaithfulnessScript:
    """The simulator's faithfulness labels: major below major_rate, minor below the sum, else perfect."""

    major_rate: float = setting("share of parts labelled major", at_least=0, at_most=1)
    minor_rate: float = setting("share of parts labelled minor", at_least=0, at_most=1)


@section
class FormalizeScript:
    """The simulator's formalize answers: the repaired file, fixed at a drawn repair."""

    fixed_at_attempt: list[float] = setting("P(first fixed at repair 1, 2, 3...); the rest never")
    marker: str = setting("the line before the lean block (formalize.marker, for the answer to parse)")


@section
class JudgeScript:
    """The simulator's judge verdicts."""

    accept_pattern: str | None = setting("a regex: a statement it matches is judged correct whatever the draw; "
                                         "null: none")
    correct_rate: float = setting("share of candidates whose verdict line is `correct`", at_least=0, at_most=1)


@section
class ProveScript:
    """The simulator's proof attempts: the statement with `sorry` replaced once a drawn attempt succeeds."""

    marker: str = setting("the line before the lean block (prove.marker, for the answer to parse)")
    proof: str = setting("the proof that replaces `sorry` once an attempt succeeds")
    proved_at_attempt: list[float] = setting("P(first proved at attempt 1, 2, 3...); the rest never")
    sketch_cue: str = setting("words of a repair prompt that asks for a sketch (a `have ... := by sorry` then a proof)")


@section
class SimScript:
    """The LLM simulator's scripted answers, per call (the X-Folklore-Call header); prompts may carry triggers
    (`sim:fail=429x2`, `sim:empty`, `sim:error`, ...) for tests."""

    agent: AgentScript = setting("autoformalize mode=agent: the opening tools, then compiles of the translator's code")
    concept_graph: ConceptGraphScript = setting("autoformalize mode=got: the concept graph, grounding and definitions")
    define: DefineScript = setting("mode=got's definitions of new notions")
    discover: DiscoverScript = setting("discover's lemmas")
    draft: DraftScript = setting("autoformalize's drafts (think, diagnose and decompose answers are fixed notes)")
    error_mark: str = setting("the text that makes the Lean simulator fail a check (a rule of lean.sim.error_rules)")
    faithfulness: FaithfulnessScript = setting("the labels of a statement's parts (faithfulness)")
    formalize: FormalizeScript = setting("formalize's repairs")
    judge: JudgeScript = setting("the judge's verdicts")
    prove: ProveScript = setting("the provers' attempts")


@section
class LlmSimulator:
    """The LLM simulator (`llm=sim`): an OpenAI-compatible server the job starts, deterministic in (request, seed)."""

    busy_log: str | None = setting("file each request's wall-clock span is appended to (benchmarks); null: none",
                                   speed=True)
    capacity: int = setting("requests served at once; the others queue", at_least=1, speed=True)
    chars_per_token: float = setting("the sim's token count: characters / this", at_least=0.1)
    default_max_tokens: int = setting("completion budget when a request names none", at_least=1)
    faults: LlmSimulatorFaults = setting("429s, 500s and hangs injected at random", speed=True)
    host: str = setting("address the server listens on", speed=True)
    latency: SimLatency = setting("log-normal service time of a request", speed=True)
    max_context_tokens: int = setting("the model's context in tokens; a request that cannot fit gets vLLM's 400",
                                      at_least=1)
    models: list[str] | None = setting("the model names served (others get 404); null: every model a role names")
    port: int = setting("the server's port; 0: any free port", at_least=0, at_most=65535, speed=True)
    prompt_log: str | None = setting("file each request's stage, candidate, attempt and prompt go to; null: none",
                                     speed=True)
    require_api_key: str | None = setting("the key requests must send as `Authorization: Bearer`; null: none",
                                          speed=True)
    script: SimScript = setting("the scripted answers per stage")
    seed: int = setting("the seed every scripted draw derives from", unranged="the simulator's random seed")
    stop_timeout_s: float = setting("seconds to wait for the server to exit at the end of the job", at_least=0,
                                    speed=True)


@section
class Llm:
    """The language models a job calls: where, which model for each role, how to sample, and how to retry."""

    backend: Literal['openai', 'sim', 'vllm'] = setting(
        "openai: any OpenAI-compatible endpoint; sim: the simulator; vllm: engines on Ray Serve LLM")
    cache: AnswerCache = setting("answers kept for a resumed run", speed=True)
    endpoints: dict[str, Endpoint] = setting("endpoint name -> its URL, key variable, concurrency and timeout",
                                             speed=True)
    models: dict[str, RoleModel] = setting("role (discover, judge, prover, ...) -> its model and endpoint")
    probe: Probe = setting("the check of the endpoints before the job starts", speed=True)
    provers: list[str] = setting("the roles (keys of llm.models) that run the prove stage; their union is reported")
    retry: Retry = setting("how transient failures are retried", speed=True)
    sampling: dict[str, Sampling] = setting("call label (discover, judge, prove, ...) -> its sampling fields")
    serve: Serve = setting("llm=vllm: the Ray Serve LLM application and its engines")
    sim: LlmSimulator = setting("llm=sim: the simulator's own behaviour")
    sim_endpoint: str = setting("the key of llm.endpoints that gets the sim server's address at start", speed=True)
    simulated: bool = setting("whether answers are simulated; recorded in every row's provenance")
    tool_roles: list[str] = setting("roles whose requests offer tools (llm=vllm: their engines need tool_call_parser)")
