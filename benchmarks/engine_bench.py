"""What real vLLM engines say about our prompts: how much of what the jobs send they reuse, on one engine and on
several replicas of it, and what the routing between replicas costs.

Run (in the engine's venv): `python benchmarks/engine_bench.py [--replicas N] [--seeds S] [--samples K]
[--statements M] [--max-tokens T]`. N vLLM servers (harness/real_engine.py: SmolLM2-135M on the CPU, its OpenAI
server, a 4096-token context, ENGINE_BLOCK_TOKENS-token KV blocks), started at once, each behind a recording proxy,
serve every run. Each configuration runs a mining run over S files of ../shared/fixtures/mathlib-sample (the
smallest whose discover prompt is at least MIN_SEED_PROMPT_TOKENS and leaves T tokens to answer; K samples per seed,
so a seed's samples send one prompt; the answers held to the shape the pipeline reads by vLLM's structured outputs,
so there are candidates to judge) and an evaluate run over M statements of ../shared/fixtures/mathliblemma-sample
(K=2 repairs, so a chain's later prompts show the attempts before them), both with `lean=sim`, every stage's
`max_tokens` at T and every call seeded (SAMPLING_SEED: configurations draw alike, though the CPU engine's batches still
change a few answers). The configurations: `one` sends everything to the first server alone, `affinity` to all N with
`routing=affinity`, `round_robin` to all N with `routing=round_robin` (no affinity). Every server's prefix cache is
emptied before each run (the servers run in vLLM's dev mode for its `/reset_prefix_cache`), and their Prometheus
counters are read before and after.

Figures, per configuration over its two runs:
- replica_prefill_ratio: prompt tokens the engines computed (`vllm:prompt_tokens` - `vllm:prompt_tokens_cached`,
  summed over the servers) per candidate row written (mining's and evaluate's candidates tables), over the same on
  `one`: what spreading the work over N engines costs in prefill;
- prefix_cache_hit_rate: `vllm:prefix_cache_hits` / `vllm:prefix_cache_queries`, summed over the servers;
- recomputed_prompt_share: prompt tokens the engines computed although an earlier request of the same run had already
  sent them, / prompt tokens, request by request. The requests the proxies forwarded are tokenized with the model's
  chat template, in the order they arrived (over all servers); a request's reusable prefix is the longest prefix it
  shares with any earlier request, in whole KV blocks of the engine (`vllm:cache_config_info`'s block_size: vLLM
  caches full blocks only), and never its last token (which the engine always computes). Its cached tokens are read
  from its answer's `usage.prompt_tokens_details`. The requests of one cache key (`prompt_cache_key`: a seed's
  samples, a repair chain) recomputed max(sum of (reusable - cached), 0) tokens: a key's requests sent together may
  reach the engine in another order than the proxies saw (one computes the prefix the bench credited to another,
  which hits instead), but a key that missed counts in full, whatever other keys hit. An engine that keeps every
  block and sees each prefix before a request that shares it scores 0. The details line also gives the count
  request by request (`recomputed_by_request`), which such reorderings inflate;
- replica_share: each server's share of the requests;
- running_mean: the mean of each server's `vllm:num_requests_running` (its `/metrics`, read every POLL_S), over the
  steady state of each run: its middle half, from a quarter of the way from the first request's arrival to the last
  answer to three quarters of the way (start-up and the tail of stragglers left out);
- output_tokens_per_s: `vllm:generation_tokens` / the seconds from the first request's arrival to the last answer
  (each run's span, summed): the shared machine's speed as much as the runs'.
Printed beside them, per run: every count, computed prompt tokens per candidate (what the prefill cost here), and the
share of prompt tokens an engine with GPU_BLOCK_TOKENS-token blocks would compute at best (1 - its reusable / prompt
tokens). The last line repeats the `affinity` configuration's figures.

The bench stops with status 1 and one line when its tokenization of a run's requests disagrees with the engines'
prompt-token counter: its reusable prefixes would then be counted on other tokens than the engines saw.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl
from omegaconf import DictConfig

from harness.real_engine import CONTEXT_TOKENS, VllmServer, VllmServers, model_dir, openai_overrides
from operators.llm import prompts
from pipelines.jobs.mining import load_config

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared" / "fixtures"
SEEDS_ROOT = SHARED / "mathlib-sample"
BENCHMARK_ROOT = SHARED / "mathliblemma-sample" / "benchmark"
FAST_LEAN = ["lean=sim", "lean.sim.import_s=0.05", "lean.sim.check_s=0.01", "lean.sim.burn_cpu=false"]
JOB_TIMEOUT_S = 1800
POLL_S = 1.0  # how often each server's `vllm:num_requests_running` is read during a run
STEADY_FROM, STEADY_TO = 0.25, 0.75  # the steady state: this part of a run's span, first request to last answer
# Every call is sampled with this seed, so configurations draw alike and the ratio, per candidate, compares routings
# more than sampling luck (a seed's samples then answer alike). Not the same answers: the CPU engine's numerics
# depend on which requests share a batch, and a temperature-1 draw turns on them.
SAMPLING_SEED = 0
GPU_BLOCK_TOKENS = 16  # vLLM's KV block on GPUs, for what a GPU engine could reuse
# The engines' KV block: the smallest vLLM's CPU attention takes (a multiple of 32; 16 is refused at start-up), the
# nearest to a GPU engine's 16. A prefix is cached in whole blocks, so the CPU build's 128 would leave up to 127
# tokens of every shared prefix to compute again, where a user's GPU engine recomputes at most 15.
ENGINE_BLOCK_TOKENS = 32
# A seed is used when its discover prompt is at least this long (the long seed prefills of a night) ...
MIN_SEED_PROMPT_TOKENS = 1000
# ... and leaves the answer's budget free with this many tokens to spare (vLLM counts a few more than the template).
CONTEXT_MARGIN_TOKENS = 64
# vLLM's structured outputs hold the discover answers to the shape the pipeline reads (a little prose, the marker, a
# `lean` block of a few lemmas), so mining has candidates to judge: SmolLM2 left alone never writes the marker.
DISCOVER_PROSE = "[A-Za-z ,.]{10,60}"
DISCOVER_LEMMAS = "(theorem [a-z]{2,10}_[a-z]{2,10} [(]n : Nat[)] : n [+] [0-9] = [0-9] [+] n := sorry\n){2,3}"
# Per configuration: its overrides, sent to every server; `None`: the first server alone.
CONFIGURATIONS: dict[str, list[str] | None] = {
    "one": None,
    "affinity": ["llm.endpoints.main.routing=affinity"],
    "round_robin": ["llm.endpoints.main.routing=round_robin"],
}


@dataclass
class RunFigures:
    """What runs sent the engines (`vllm:` counter deltas summed over the servers, the recorded requests and their
    answers) and what the engines did with it."""

    replicas: int
    prompt_tokens: float = 0.0
    generation_tokens: float = 0.0
    queries: float = 0.0
    hits: float = 0.0
    cached: float = 0.0  # `vllm:prompt_tokens_cached`: prompt tokens taken from the prefix cache, not computed
    sent_tokens: int = 0  # the recorded requests under the chat template (checked against prompt_tokens)
    reusable: int = 0  # the ideal reuse at the engine's block size (`reusable_prefixes`)
    reusable_gpu: int = 0  # the same at GPU_BLOCK_TOKENS
    recomputed: int = 0  # reusable prefix tokens that missed the cache, key by key
    recomputed_by_request: int = 0  # the same, request by request
    candidates: int = 0
    busy_s: float = 0.0
    wall_s: float = 0.0
    requests: list[int] = field(default_factory=list)  # per server
    running_sum: list[float] = field(default_factory=list)  # per server, over the steady state's polls
    steady_polls: int = 0

    def __post_init__(self) -> None:
        self.requests = self.requests or [0] * self.replicas
        self.running_sum = self.running_sum or [0.0] * self.replicas

    def add(self, other: RunFigures) -> None:
        """Accumulate another run's figures (a configuration is its mining run plus its evaluate run)."""
        for name in self.__dataclass_fields__:
            mine, theirs = getattr(self, name), getattr(other, name)
            if name == "replicas":
                continue
            setattr(self, name, [a + b for a, b in zip(mine, theirs, strict=True)] if isinstance(mine, list)
                    else mine + theirs)

    @property
    def computed_per_candidate(self) -> float:
        return (self.prompt_tokens - self.cached) / max(self.candidates, 1)

    def details(self) -> str:
        """Every count, for the per-run lines."""
        return (f"requests={'/'.join(map(str, self.requests))} candidates={self.candidates} "
                f"prompt_tokens={self.prompt_tokens:.0f} cached={self.cached:.0f} reusable={self.reusable} "
                f"recomputed={self.recomputed} recomputed_by_request={self.recomputed_by_request} "
                f"reusable_at_{GPU_BLOCK_TOKENS}={self.reusable_gpu} "
                f"queries={self.queries:.0f} hits={self.hits:.0f} generation_tokens={self.generation_tokens:.0f} "
                f"busy_s={self.busy_s:.1f} wall_s={self.wall_s:.1f}")

    def costs(self) -> str:
        """What the prefill cost: prompt tokens sent and computed per candidate, the share of prompt tokens an engine
        with GPU_BLOCK_TOKENS-token blocks would compute at best, and the output rate."""
        return (f"prompt_tokens_per_candidate={self.prompt_tokens / max(self.candidates, 1):.1f} "
                f"computed_prompt_tokens_per_candidate={self.computed_per_candidate:.1f} "
                f"computed_share_at_{GPU_BLOCK_TOKENS}_best={1 - self.reusable_gpu / max(self.prompt_tokens, 1):.3f} "
                f"output_tokens_per_s={self.generation_tokens / max(self.busy_s, 1e-9):.1f}")

    def line(self, alone: RunFigures) -> str:
        """The figures as the last line shows them; `alone` is the same work on one engine."""
        total = max(sum(self.requests), 1)
        return (f"replica_prefill_ratio={self.computed_per_candidate / max(alone.computed_per_candidate, 1e-9):.3f} "
                f"prefix_cache_hit_rate={self.hits / max(self.queries, 1):.3f} "
                f"recomputed_prompt_share={self.recomputed / max(self.prompt_tokens, 1):.3f} "
                f"replica_share={','.join(f'{n / total:.3f}' for n in self.requests)} "
                f"running_mean={','.join(f'{s / max(self.steady_polls, 1):.2f}' for s in self.running_sum)}")


def reusable_prefixes(prompts: Sequence[Sequence[int]], block: int) -> list[int]:
    """For each prompt, in order, the tokens of its longest prefix that an earlier prompt also began with, in whole
    blocks of `block` tokens and short of its last token: what an ideal prefix cache would not compute again."""
    seen: set[int] = set()
    reusable = []
    for tokens in prompts:
        chain, hashes = 0, []
        for start in range(0, len(tokens) - len(tokens) % block, block):
            chain = hash((chain, tuple(tokens[start:start + block])))
            hashes.append(chain)
        usable = (len(tokens) - 1) // block
        shared = next((k for k in range(usable, 0, -1) if hashes[k - 1] in seen), 0)
        reusable.append(shared * block)
        seen.update(hashes)
    return reusable


def chat_tokens(tokenizer: Any, messages: list[dict[str, Any]]) -> list[int]:
    """A request's prompt as the engine tokenizes it: the model's chat template, ready for the assistant's turn."""
    return list(tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True,
                                              return_dict=True)["input_ids"])


def server_root(engine: VllmServer) -> str:
    return engine.base_url.removesuffix("/v1")


def block_size(engine: VllmServer) -> int:
    """The engine's KV block size, from the labels of `vllm:cache_config_info`."""
    with urllib.request.urlopen(f"{server_root(engine)}/metrics", timeout=10) as reply:
        for line in reply.read().decode().splitlines():
            if line.startswith("vllm:cache_config_info{"):
                labels = dict(part.split("=", 1) for part in line.split("{", 1)[1].split("}", 1)[0].split(","))
                return int(labels["block_size"].strip('"'))
    raise SystemExit("the engine's /metrics has no vllm:cache_config_info")


def reset_prefix_cache(engine: VllmServer) -> None:
    """Empty the engine's prefix cache, so a run reuses only what it sent itself."""
    request = urllib.request.Request(f"{server_root(engine)}/reset_prefix_cache", method="POST")
    with urllib.request.urlopen(request, timeout=60):
        pass


@contextmanager
def running_polls(engines: Sequence[VllmServer]) -> Iterator[list[tuple[float, list[float]]]]:
    """(time.monotonic(), each engine's `vllm:num_requests_running`) every POLL_S while the block runs."""
    polls: list[tuple[float, list[float]]] = []
    done = threading.Event()

    def poll() -> None:
        while not done.wait(POLL_S):
            try:
                running = [e.metrics().get("vllm:num_requests_running", 0.0) for e in engines]
            except OSError:
                return  # an engine is gone: the run fails, and its job's lines say why
            polls.append((time.monotonic(), running))

    poller = threading.Thread(target=poll, daemon=True)
    poller.start()
    try:
        yield polls
    finally:
        done.set()
        poller.join()


def pick_seeds(cfg: DictConfig, tokenizer: Any, count: int, max_tokens: int) -> list[str]:
    """The `count` smallest mathlib-sample files whose discover prompt is long (a night's seeds) yet fits the
    context beside `max_tokens` of answer, by the prompt the mining job `cfg` will send."""
    templates = dict(cfg.prompts)
    room = CONTEXT_TOKENS - max_tokens - CONTEXT_MARGIN_TOKENS
    picked = []
    for path in sorted(SEEDS_ROOT.rglob("*.lean"), key=lambda p: (p.stat().st_size, str(p))):
        messages = prompts.discover_messages(templates, path.read_text(), cfg.discover.marker,
                                             int(cfg.discover.min_lemmas))
        if MIN_SEED_PROMPT_TOKENS <= len(chat_tokens(tokenizer, messages)) <= room:
            picked.append(str(path.relative_to(SEEDS_ROOT)))
            if len(picked) == count:
                return picked
    raise SystemExit(f"only {len(picked)} seed files of {SEEDS_ROOT} fit; asked for {count}")


def benchmark_dir(target: Path, count: int) -> Path:
    """A benchmark directory with the first `count` statements of the MathlibLemma sample (sorted paths)."""
    for source in sorted(BENCHMARK_ROOT.rglob("*.lean"))[:count]:
        copy = target / source.relative_to(BENCHMARK_ROOT)
        copy.parent.mkdir(parents=True, exist_ok=True)
        copy.write_text(source.read_text())
    return target


def discover_shape(marker: str) -> str:
    """The `llm.sampling.discover.extra_body` override that holds discover answers to DISCOVER_PROSE, the marker
    line and a `lean` block of DISCOVER_LEMMAS."""
    literal = re.escape(marker).replace("\\ ", " ")  # a space needs no escape, and Hydra would keep the backslash
    shape = f"{DISCOVER_PROSE}\n{literal}\n```lean\nimport Mathlib\n{DISCOVER_LEMMAS}```\n"
    return "++llm.sampling.discover.extra_body={structured_outputs:{regex:" + json.dumps(shape) + "}}"


def run_job(job: str, overrides: Sequence[str], engines: Sequence[VllmServer]) -> float:
    """A job as a user runs it (its own process); its wall seconds. A failed job stops the bench with its output and
    the log tail of every engine that stopped serving (the engines' logs go with the bench's scratch folder)."""
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", f"pipelines.{job}", *overrides], cwd=REPO, capture_output=True,
                          text=True, timeout=JOB_TIMEOUT_S, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    if done.returncode != 0:
        stopped = [f"{engine.log_path.name} (stopped serving):\n{engine.log_tail()}" for engine in engines
                   if not serving(engine)]
        raise SystemExit("\n".join([f"{job} failed ({done.returncode}):", done.stdout[-3000:], done.stderr[-3000:],
                                     *stopped]))
    return time.monotonic() - started


def serving(engine: VllmServer) -> bool:
    """Whether the engine still answers `/v1/models`."""
    try:
        with urllib.request.urlopen(f"{engine.base_url}/models", timeout=10):
            return True
    except OSError:
        return False


def steady_mean_sums(polls: Sequence[tuple[float, list[float]]], start: float, end: float) -> tuple[list[float], int]:
    """Each server's `vllm:num_requests_running` summed over the polls of the steady state between `start` and `end`,
    and how many polls that was."""
    span = end - start
    steady = [running for at, running in polls if start + STEADY_FROM * span <= at <= start + STEADY_TO * span]
    return [sum(column) for column in zip(*steady, strict=True)] if steady else [0.0] * len(polls[0][1]), len(steady)


def measured(servers: VllmServers, replicas: int, tokenizer: Any, block: int, job: str, overrides: Sequence[str],
             run_dir: Path, max_tokens: int) -> RunFigures:
    """Run one job against emptied prefix caches on the first `replicas` servers, and read what it cost. Stops the
    bench when the engines counted other prompt tokens than the bench's tokenization of what they were sent."""
    engines, proxies = servers.servers[:replicas], servers.proxies[:replicas]
    for engine in engines:
        reset_prefix_cache(engine)
    before = [engine.metrics() for engine in engines]
    first = [len(proxy.requests) for proxy in proxies]
    urls = [proxy.base_url for proxy in proxies]
    with running_polls(engines) as polls:
        wall = run_job(job, [*openai_overrides(urls[0] if replicas == 1 else urls, max_tokens), *overrides],
                       engines)
    delta: dict[str, float] = {}
    for engine, counted in zip(engines, before, strict=True):
        for name, value in engine.metrics().items():
            delta[name] = delta.get(name, 0.0) + value - counted.get(name, 0.0)
    records = sorted((r for proxy, start in zip(proxies, first, strict=True) for r in proxy.requests[start:]
                      if r.get("usage")), key=lambda r: r["sent_at"])
    if not records:
        raise SystemExit(f"error: {job}: the engines answered none of its requests; the bench has nothing to measure")
    sent = [chat_tokens(tokenizer, r["body"]["messages"]) for r in records]
    reusable = reusable_prefixes(sent, block)
    cached = [(r["usage"].get("prompt_tokens_details") or {}).get("cached_tokens") or 0 for r in records]
    counted_tokens, sent_tokens = delta["vllm:prompt_tokens_total"], sum(len(tokens) for tokens in sent)
    if sent_tokens != counted_tokens:
        raise SystemExit(f"error: {job}: the bench's tokenization of the {len(records)} requests gives {sent_tokens} "
                         f"prompt tokens, the engines' vllm:prompt_tokens counted {counted_tokens:.0f} "
                         f"(off by {sent_tokens - counted_tokens:+.0f})")
    start, end = min(r["sent_at"] for r in records), max(r["answered_at"] for r in records)
    running_sum, steady_polls = steady_mean_sums(polls, start, end)
    by_key: dict[str, int] = {}
    for record, usable, hit in zip(records, reusable, cached, strict=True):
        key = record["body"].get("prompt_cache_key", "")
        by_key[key] = by_key.get(key, 0) + usable - hit
    written = list((run_dir / "candidates").glob("*.parquet"))
    idle = [0] * (len(servers.servers) - replicas)
    return RunFigures(
        replicas=len(servers.servers), prompt_tokens=counted_tokens,
        generation_tokens=delta["vllm:generation_tokens_total"], queries=delta["vllm:prefix_cache_queries_total"],
        hits=delta["vllm:prefix_cache_hits_total"], cached=delta["vllm:prompt_tokens_cached_total"],
        sent_tokens=sent_tokens, reusable=sum(reusable), reusable_gpu=sum(reusable_prefixes(sent, GPU_BLOCK_TOKENS)),
        recomputed=sum(max(missed, 0) for missed in by_key.values()),
        recomputed_by_request=sum(max(r - c, 0) for r, c in zip(reusable, cached, strict=True)),
        candidates=pl.read_parquet(written).height if written else 0, busy_s=end - start, wall_s=wall,
        requests=[len(proxy.requests) - start for proxy, start in zip(proxies, first, strict=True)] + idle,
        running_sum=running_sum + [0.0] * len(idle), steady_polls=steady_polls)


def main() -> None:
    """Start the servers once, run every configuration's mining and evaluate runs against them, print their
    figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replicas", type=int, default=2)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--samples", type=int, default=4)
    parser.add_argument("--statements", type=int, default=6)
    parser.add_argument("--max-tokens", type=int, default=160)
    args = parser.parse_args()

    from transformers import AutoTokenizer

    os.environ["VLLM_SERVER_DEV_MODE"] = "1"  # the engines serve /reset_prefix_cache
    tokenizer = AutoTokenizer.from_pretrained(model_dir())
    cfg = load_config(["preset=demo"])
    seeds = pick_seeds(cfg, tokenizer, args.seeds, args.max_tokens)
    seeded = [f"++llm.sampling.{call}.seed={SAMPLING_SEED}"
              for call in load_config(["llm=openai"], complete=False).llm.sampling]
    started = time.monotonic()
    with (tempfile.TemporaryDirectory() as scratch,
          VllmServers(Path(scratch) / "logs", args.replicas, ENGINE_BLOCK_TOKENS) as servers):
        block = block_size(servers.servers[0])
        benchmark = benchmark_dir(Path(scratch) / "benchmark", args.statements)
        print(f"engines: replicas={args.replicas} block_size={block} seeds={len(seeds)} samples={args.samples} "
              f"statements={args.statements} max_tokens={args.max_tokens} start_s={time.monotonic() - started:.0f}",
              flush=True)
        totals: dict[str, RunFigures] = {}
        for name, overrides in CONFIGURATIONS.items():
            replicas = 1 if overrides is None else args.replicas
            total = totals[name] = RunFigures(replicas=args.replicas)
            for job, job_overrides in (
                ("mine", ["preset=demo", f"seeds.root={SEEDS_ROOT}", f"seeds.list={json.dumps(seeds)}",
                          f"discover.samples_per_seed={args.samples}", discover_shape(str(cfg.discover.marker))]),
                ("evaluate", [f"benchmark_dir={benchmark}"]),
            ):
                run_dir = Path(scratch) / name / job
                figures = measured(servers, replicas, tokenizer, block, job,
                                   [*job_overrides, f"run_dir={run_dir}", *FAST_LEAN, *seeded, *(overrides or [])],
                                   run_dir,
                                   args.max_tokens)
                print(f"{name} {job}: {figures.details()}", flush=True)
                print(f"{name} {job}: {figures.costs()}", flush=True)
                total.add(figures)
            print(f"{name}: {total.costs()}", flush=True)
            print(f"{name}: {total.line(totals['one'])}", flush=True)
    print(f"wall_s={time.monotonic() - started:.0f}")
    print(totals["affinity"].line(totals["one"]))


if __name__ == "__main__":
    main()
