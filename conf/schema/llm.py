"""The `llm` section: endpoints, the model of each role, sampling per call label, retries, and the engines or the
simulator a job starts.
"""

from __future__ import annotations

from typing import Any, Literal

from conf.schema.fields import section, setting


@section(speed=True)
class LlmCache:
    """speed"""

    enabled: bool = setting("")


@section
class LlmEndpointsEntry:
    """llm.endpoints.*"""

    api_key_env: str | None = setting("")
    base_url: str | None = setting("")
    concurrency: int = setting("", at_least=1)
    max_tokens_param: Literal['max_tokens', 'max_completion_tokens'] = setting("")
    request_timeout_s: float = setting("", at_least=0)


@section
class LlmModelsEntry:
    """llm.models.*"""

    endpoint: str = setting("")
    model: str = setting("")


@section(speed=True)
class LlmProbe:
    """speed"""

    enabled: bool = setting("")
    timeout_s: float = setting("", at_least=0)


@section(speed=True)
class LlmRetry:
    """speed"""

    backoff_base_s: float = setting("first retry waits 0.5-1x this, doubling each retry", at_least=0)
    backoff_max_s: float = setting("", at_least=0)
    max_attempts: int = setting("tries per request, the first included", at_least=1)
    max_consecutive_failures: int = setting("This many tries in a row failing with connection, auth (401/403) or not-found errors (any other answer, success or not, restarts the count) stop the job with one `error:` line naming the endpoint; the rows in flight are not written, so a resumed run redoes them.", at_least=1)
    max_identical_refusals: int = setting("A stage whose first this-many calls to a model (per endpoint client, i.e", at_least=1)
    max_retry_after_s: float = setting("a longer Retry-After is cut to this", at_least=0)
    report_every_s: float = setting("while requests wait to retry: one warning line per endpoint per this many seconds", at_least=0)


@section(open=True)
class LlmSampling:
    """The request fields of one call label (`llm.sampling.<label>`); any other field of the OpenAI API (stop, seed,
    n, reasoning_effort) is passed through as given."""

    max_tokens: int = setting("completion tokens at most per answer", at_least=1)
    temperature: float = setting("sampling temperature", at_least=0, at_most=2)
    top_p: float = setting("nucleus sampling: the share of probability mass sampled from", at_least=0, at_most=1)


@section(open=True)
class LlmAcceleratorConfig:
    """Ray Serve LLM's `accelerator_config` of an engine; keys besides `kind` (a TPU's topology) are passed as given."""

    kind: Literal["cpu", "gpu", "tpu"] = setting("the accelerator the engine runs on")


@section(speed=True)
class LlmServeEnginesReplicas:
    """llm.serve.engines.*.replicas"""

    max: int = setting("", at_least=1)
    min: int = setting("", at_least=0)


@section
class LlmServeEnginesEntry:
    """llm.serve.engines.*"""

    accelerator_config: LlmAcceleratorConfig = setting("Ray Serve LLM's accelerator_config, passed as given", speed=True)
    accelerator_type: str | None = setting("", speed=True)
    engine_kwargs: dict[str, Any] = setting("")
    max_ongoing_requests: int = setting("", at_least=1, speed=True)
    model_source: str = setting("")
    placement_group_config: Any | None = setting("", speed=True)
    replicas: LlmServeEnginesReplicas = setting("", speed=True)
    runtime_env: Any | None = setting("", speed=True)
    tensor_parallel_size: int = setting("", at_least=1, speed=True)
    tool_call_parser: str | None = setting("")


@section
class LlmServe:
    """llm.serve"""

    app_name: str = setting("", speed=True)
    endpoint: str = setting("the endpoint above that gets the application's address", speed=True)
    engines: dict[str, LlmServeEnginesEntry] = setting("the keys are those of conf/llm/engines/gpu.yaml, which says what each does")
    http_host: str = setting("", speed=True)
    http_port: int = setting("", at_least=1, at_most=65535, speed=True)
    mode: Literal['start', 'attach'] = setting("", speed=True)
    placement_timeout_s: float = setting("", at_least=0, speed=True)
    route_prefix: str = setting("", speed=True)


@section(speed=True)
class LlmSimFaults:
    """speed: drawn per delivery, so a retry of the same request draws again"""

    hang_s: float = setting("", at_least=0)
    rate_429: float = setting("share of deliveries answered 429", at_least=0, at_most=1)
    rate_500: float = setting("share of deliveries answered 500", at_least=0, at_most=1)
    rate_timeout: float = setting("share of deliveries the server holds hang_s seconds and drops", at_least=0, at_most=1)
    retry_after_s: float = setting("Retry-After header sent with 429", at_least=0)


@section(speed=True)
class LlmSimLatency:
    """speed: log-normal service time; sigma 0: always the median"""

    by_stage: dict[str, Any] = setting("stage (the X-Folklore-Stage header) -> its own median_s, e.g. {discover: 2.0, prove: 1.0}")
    median_s: float = setting("", at_least=0)
    sigma: float = setting("spread of the log-normal service time; 0: always the median", at_least=0)


@section
class LlmSimScriptAgent:
    """autoformalize mode=agent: the opening tools in order, then `compile` of the translator's code (a draft, as above), the error mark dropped from the compile drawn here. `sim:wander` in the text: it only searches; `sim:unfixable`: the mark is never dropped."""

    fixed_at_compile: list[Any] = setting("P(first compile without the mark is compile 1, 2, 3); the rest never")
    opening: list[Any] = setting("")
    search_k: int = setting("", at_least=1)
    term: str = setting("")


@section
class LlmSimScriptConceptGraph:
    """autoformalize mode=got: the graph's leaves are the first `grounded` declarations the prompt lists (they exist in the index), plus one new notion named after the row that depends on them (`sim:cycle` in the text: two notions depending on each other); `ground` confirms the first candidate at confirm_rate; `define` writes a predicate that states nothing (`sim:refuse` in the text: an `axiom`), repaired like formalize."""

    confirm_rate: float = setting("", at_least=0, at_most=1)
    grounded: int = setting("", at_least=0)


@section
class LlmSimScriptDefine:
    """llm.sim.script.define"""

    broken_rate: float = setting("share of definitions carrying the error mark, for the repair loop", at_least=0, at_most=1)


@section
class LlmSimScriptDiscover:
    """llm.sim.script.discover"""

    broken_rate: float = setting("share of lemmas carrying the error mark, for formalize to repair", at_least=0, at_most=1)
    fallback_name: str = setting("lemma name stem when the seed text declares nothing")
    lemmas_per_response: int = setting("", at_least=0)
    marker: str = setting("")
    statements: list[Any] = setting("Each lemma draws one of these; `(x y ...)` restates `(a b ...)` with other names, so seeds get sibling restatements for dedup to find")


@section
class LlmSimScriptDraft:
    """autoformalize: think and diagnose are fixed notes, decompose splits the informal text into sentences (the last one the conclusion); a draft is one `sorry` theorem named after the row, stating one of discover.statements under formalize.marker; its repairs are formalize answers."""

    broken_rate: float = setting("share of drafts carrying the error mark, for the repair loop", at_least=0, at_most=1)


@section
class LlmSimScriptFaithfulness:
    """a part's label is drawn: major below major_rate, minor below the sum, else perfect"""

    major_rate: float = setting("share of parts labelled major", at_least=0, at_most=1)
    minor_rate: float = setting("share of parts labelled minor", at_least=0, at_most=1)


@section
class LlmSimScriptFormalize:
    """llm.sim.script.formalize"""

    fixed_at_attempt: list[Any] = setting("P(first fixed at repair 1, 2, 3); the rest never")
    marker: str = setting("")


@section
class LlmSimScriptJudge:
    """llm.sim.script.judge"""

    accept_pattern: str | None = setting("a regex: a statement it matches is judged `correct` whatever the draw (demo: lemma 0)")
    correct_rate: float = setting("share of candidates whose verdict line is `correct`", at_least=0, at_most=1)


@section
class LlmSimScriptProve:
    """llm.sim.script.prove"""

    marker: str = setting("")
    proof: str = setting("")
    proved_at_attempt: list[Any] = setting("P(first proved at attempt 1, 2, 3); the rest never")
    sketch_cue: str = setting("A repair prompt with these words (prompts.prove_sketch) that does not 'succeed' gets a sketch: one `have sketch_step : \u2200 ..., P := by sorry` stating a discover statement, then the proof from it.")


@section
class LlmSimScript:
    """Scripted answers per stage (the X-Folklore-Stage header). Prompt triggers for tests: `sim:fail=429x2` (first two deliveries get 429; also 500, hang), `sim:empty` (an empty answer). In a draft's informal text (its last ```text block): `sim:error` (the theorem carries the error mark), `sim:refuse` (`#eval 0` before the theorem), `sim:nocode` (no marker, no lean block). In a part to label (faithfulness): `sim:major`, `sim:minor` (that label)."""

    agent: LlmSimScriptAgent = setting("autoformalize mode=agent: the opening tools in order, then `compile` of the translator's code (a draft, as above), the error mark dropped from the compile drawn here")
    concept_graph: LlmSimScriptConceptGraph = setting("autoformalize mode=got: the graph's leaves are the first `grounded` declarations the prompt lists (they exist in the index), plus one new notion named after the row that depends on them (`sim:cycle` in the text: two notions depending on each other); `ground` confirms the first candidate at confirm_rate; `define` writes a predicate that states nothing (`sim:refuse` in the text: an `axiom`), repaired like formalize.")
    define: LlmSimScriptDefine = setting("")
    discover: LlmSimScriptDiscover = setting("")
    draft: LlmSimScriptDraft = setting("autoformalize: think and diagnose are fixed notes, decompose splits the informal text into sentences (the last one the conclusion); a draft is one `sorry` theorem named after the row, stating one of discover.statements under formalize.marker; its repairs are formalize answers.")
    error_mark: str = setting("")
    faithfulness: LlmSimScriptFaithfulness = setting("a part's label is drawn: major below major_rate, minor below the sum, else perfect")
    formalize: LlmSimScriptFormalize = setting("")
    judge: LlmSimScriptJudge = setting("")
    prove: LlmSimScriptProve = setting("")


@section
class LlmSim:
    """The sim server's own behaviour."""

    busy_log: Any | None = setting("", speed=True)
    capacity: int = setting("requests served at once; the others queue", at_least=1, speed=True)
    chars_per_token: float = setting("the sim's token count: characters / this", at_least=0.1)
    default_max_tokens: int = setting("completion budget when a request names none", at_least=1)
    faults: LlmSimFaults = setting("drawn per delivery, so a retry of the same request draws again", speed=True)
    host: str = setting("", speed=True)
    latency: LlmSimLatency = setting("log-normal service time; sigma 0: always the median", speed=True)
    max_context_tokens: int = setting("The model's context, listed as each card's max_model_len like vLLM: a max_tokens above it, or prompt + requested completion above it, gets vLLM's 400.", at_least=1)
    models: Any | None = setting("Model names the server lists at GET /v1/models and answers; another name gets 404 like vLLM")
    port: int = setting("0: any free port", at_least=0, at_most=65535, speed=True)
    prompt_log: Any | None = setting("", speed=True)
    require_api_key: Any | None = setting("", speed=True)
    script: LlmSimScript = setting("Scripted answers per stage (the X-Folklore-Stage header)")
    seed: int = setting("", unranged="the simulator's random seed")
    stop_timeout_s: float = setting("", at_least=0, speed=True)


@section
class Llm:
    """llm"""

    backend: Literal['openai', 'sim', 'vllm'] = setting("Any OpenAI-compatible endpoint: OpenAI, a `vllm serve` process, another provider, a local server on a laptop")
    cache: LlmCache = setting("", speed=True)
    endpoints: dict[str, LlmEndpointsEntry] = setting("", speed=True)
    models: dict[str, LlmModelsEntry] = setting("@package llm `llm=vllm llm/engines=cpu`: one small instruct model (SmolLM2-135M-Instruct, 4096 tokens of context) served by vLLM's CPU build (the `engine` extra) through Ray Serve LLM on a machine without a GPU: a real model end to end, to try the `llm=vllm` path and the prompts, not to mine (it writes prose, rarely Lean)")
    probe: LlmProbe = setting("", speed=True)
    provers: list[Any] = setting("")
    retry: LlmRetry = setting("", speed=True)
    sampling: dict[str, LlmSampling] = setting("")
    serve: LlmServe = setting("")
    sim: LlmSim = setting("The sim server's own behaviour.")
    sim_endpoint: str = setting("the endpoint below that gets the sim server's address at start", speed=True)
    simulated: bool = setting("")
    tool_roles: list[Any] = setting("Roles whose requests offer tools: their models' engines need a tool_call_parser (checked before the job starts).")
