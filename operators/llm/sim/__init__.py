"""A simulated OpenAI-compatible chat-completions server on loopback, for tests, benchmarks and dry runs.

It is a real HTTP server (the stdlib's threading `http.server`, HTTP/1.1 keep-alive) so the
client, retries, timeouts and Ray Data operators run exactly as they would against vLLM or a
paid API. Its "model" decides nothing: answers are scripted per call (discover, judge,
formalize, prove; think, draft, diagnose, decompose, faithfulness for autoformalize; concept_graph, ground,
define for its concept graph mode; translate, and tool calls for a request that offers tools, for its agent mode)
and are a deterministic function of the request content and the sim seed.
Latency, capacity (requests served at once; the rest queue), injected 429/500/timeouts and a
context limit come from the `sim:` block of conf/llm/sim.yaml. Every answer is marked
simulated: the model name is prefixed `sim/` and `system_fingerprint` names the sim. Like vLLM it
lists the models it serves at `GET /v1/models` (`sim.models`; the job's backend fills in the roles'
models), each card with its `max_model_len` (`sim.max_context_tokens`), and answers another model name with
404, a `max_tokens` above the context with vLLM's 400, an answer longer than `max_tokens` cut there with
`finish_reason` `length`; `require_api_key` guards both routes.

What it answers is `scripts`, the failures and delays it injects `faults`, and the HTTP server that puts them
on the wire `server`. Run standalone: `python -m operators.llm.sim.server --config JSON` prints one JSON line
with its base URL, then serves until stdin closes or it is terminated.
"""
