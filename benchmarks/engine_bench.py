"""What a real vLLM engine says about our prompts: how much of what the jobs send it can reuse, and does.

Run (in the engine's venv): `python benchmarks/engine_bench.py [--seeds N] [--samples S] [--statements M]
[--max-tokens T]` (10-12 minutes on the shared 2-core machine). One vLLM server (harness/real_engine.py: SmolLM2-135M
on the CPU, its OpenAI server, a 4096-token context) serves every run, behind a recording proxy. Each variant
runs a mining run over N files of ../shared/fixtures/mathlib-sample (the smallest whose discover prompt is at least
MIN_SEED_PROMPT_TOKENS and leaves T tokens to answer; S samples per seed, so a seed's samples send one prompt; the
answers held to the shape the pipeline reads by vLLM's structured outputs, so there are candidates to judge) and an
evaluate run over M statements of ../shared/fixtures/mathliblemma-sample (K=2 repairs, so a chain's later prompts
show the attempts before them), both with `lean=sim` and every stage's `max_tokens` at T. vLLM's prefix cache is
emptied before each run (the server runs in vLLM's dev mode for its `/reset_prefix_cache`), and its Prometheus
counters are read before and after. Variant `before` applies VARIANTS' overrides (the layout the change replaced),
`after` is the shipped config.

Figures, per variant over its two runs:
- prompt_tokens_per_candidate: prompt tokens the engine was sent (`vllm:prompt_tokens`) / candidate rows written
  (mining's and evaluate's candidates tables);
- prefix_cache_hit_rate: `vllm:prefix_cache_hits` / `vllm:prefix_cache_queries`;
- recomputed_prompt_share: prompt tokens the engine computed although an earlier request of the same run had already
  sent them, / prompt tokens. The requests the proxy forwarded are tokenized with the model's chat template, in the
  order they arrived; a request's reusable prefix is the longest prefix it shares with any earlier request, in
  whole KV blocks of the engine (`vllm:cache_config_info`'s block_size: vLLM caches full blocks only), and never
  its last token (which the engine always computes). Computed = prompt tokens - `vllm:prompt_tokens_cached`;
  recomputed = computed - (prompt tokens - reusable), i.e. reusable prefix tokens that missed the cache. An
  engine that keeps every block and sees each prefix before a request that shares it scores 0;
- output_tokens_per_s: `vllm:generation_tokens` / the seconds from the first request's arrival at the proxy to the
  last answer (each run's span, summed): the shared machine's speed as much as the runs'.
Printed beside them, per run and per variant: computed prompt tokens per candidate (what the prefill cost here), and
the share of prompt tokens an engine with GPU_BLOCK_TOKENS-token blocks would compute at best (1 - its reusable /
prompt tokens). The last line repeats the `after` variant's four figures.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl
from omegaconf import DictConfig

from harness.real_engine import CONTEXT_TOKENS, RecordingProxy, VllmServer, model_dir, openai_overrides
from operators.llm import prompts
from pipelines.jobs.mining import load_config

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared" / "fixtures"
SEEDS_ROOT = SHARED / "mathlib-sample"
BENCHMARK_ROOT = SHARED / "mathliblemma-sample" / "benchmark"
FAST_LEAN = ["lean=sim", "lean.sim.import_s=0.05", "lean.sim.check_s=0.01", "lean.sim.burn_cpu=false"]
JOB_TIMEOUT_S = 1800
GPU_BLOCK_TOKENS = 16  # vLLM's KV block on GPUs (its CPU backend uses 128), for what a GPU engine could reuse
# A seed is used when its discover prompt is at least this long (the long seed prefills of a night) ...
MIN_SEED_PROMPT_TOKENS = 1000
# ... and leaves the answer's budget free with this many tokens to spare (vLLM counts a few more than the template).
CONTEXT_MARGIN_TOKENS = 64
# vLLM's structured outputs hold the discover answers to the shape the pipeline reads (a little prose, the marker, a
# `lean` block of a few lemmas), so mining has candidates to judge: SmolLM2 left alone never writes the marker.
DISCOVER_PROSE = "[A-Za-z ,.]{10,60}"
DISCOVER_LEMMAS = "(theorem [a-z]{2,10}_[a-z]{2,10} [(]n : Nat[)] : n [+] [0-9] = [0-9] [+] n := sorry\n){2,3}"
# conf/mine.yaml's `prove_repair` before repairs were led by the first request: the statement restated, then the
# attempts.
PROVE_REPAIR_BEFORE = """Prove the Lean 4 lemma below. Your proof will be checked by Lean with Mathlib, in a file that
starts with these lines:

{environment}

```lean
{statement}
```

Earlier attempts failed; here they are, oldest first, each with what went wrong. Learn from
them, keep the name and statement exactly as given, and write a corrected proof: a line
`{marker}` followed by one fenced `lean` code block with the whole proof.

{history}"""
# Overrides per variant: `before` brings back how requests were laid out before the change, `after` is the shipped
# config.
VARIANTS: dict[str, list[str]] = {"before": [f"prompts.prove_repair='{PROVE_REPAIR_BEFORE}'"], "after": []}


@dataclass
class RunFigures:
    """What runs sent the engine (`vllm:` counter deltas, the recorded requests) and what the engine did with it."""

    prompt_tokens: float = 0.0
    generation_tokens: float = 0.0
    queries: float = 0.0
    hits: float = 0.0
    cached: float = 0.0  # `vllm:prompt_tokens_cached`: prompt tokens taken from the prefix cache, not computed
    sent_tokens: int = 0  # the recorded requests under the chat template (checks the tokenization: = prompt_tokens)
    reusable: int = 0  # the ideal reuse at the engine's block size (`reusable_prefixes`)
    reusable_gpu: int = 0  # the same at GPU_BLOCK_TOKENS
    requests: int = 0
    candidates: int = 0
    busy_s: float = 0.0
    wall_s: float = 0.0

    def add(self, other: RunFigures) -> None:
        """Accumulate another run's figures (a variant is its mining run plus its evaluate run)."""
        for name in self.__dataclass_fields__:
            setattr(self, name, getattr(self, name) + getattr(other, name))

    def details(self) -> str:
        """Every count, for the per-run lines."""
        return (f"requests={self.requests} candidates={self.candidates} prompt_tokens={self.prompt_tokens:.0f} "
                f"(chat template: {self.sent_tokens}) cached={self.cached:.0f} reusable={self.reusable} "
                f"reusable_at_{GPU_BLOCK_TOKENS}={self.reusable_gpu} queries={self.queries:.0f} hits={self.hits:.0f} "
                f"generation_tokens={self.generation_tokens:.0f} busy_s={self.busy_s:.1f} wall_s={self.wall_s:.1f}")

    def costs(self) -> str:
        """What the prefill cost: prompt tokens computed per candidate on this engine, and the share of prompt tokens
        an engine with GPU_BLOCK_TOKENS-token blocks would compute at best."""
        computed = self.prompt_tokens - self.cached
        return (f"computed_prompt_tokens_per_candidate={computed / max(self.candidates, 1):.1f} "
                f"computed_share_at_{GPU_BLOCK_TOKENS}_best={1 - self.reusable_gpu / max(self.prompt_tokens, 1):.3f}")

    def line(self) -> str:
        """The four figures as the last line shows them."""
        recomputed = max(self.reusable - self.cached, 0)  # = computed - (prompt tokens - reusable)
        return (f"prefix_cache_hit_rate={self.hits / max(self.queries, 1):.3f} "
                f"prompt_tokens_per_candidate={self.prompt_tokens / max(self.candidates, 1):.1f} "
                f"recomputed_prompt_share={recomputed / max(self.prompt_tokens, 1):.3f} "
                f"output_tokens_per_s={self.generation_tokens / max(self.busy_s, 1e-9):.1f}")


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


def block_size(engine: VllmServer) -> int:
    """The engine's KV block size, from the labels of `vllm:cache_config_info`."""
    with urllib.request.urlopen(f"{engine.base_url.removesuffix('/v1')}/metrics", timeout=10) as reply:
        for line in reply.read().decode().splitlines():
            if line.startswith("vllm:cache_config_info{"):
                labels = dict(part.split("=", 1) for part in line.split("{", 1)[1].split("}", 1)[0].split(","))
                return int(labels["block_size"].strip('"'))
    raise SystemExit("the engine's /metrics has no vllm:cache_config_info")


def reset_prefix_cache(engine: VllmServer) -> None:
    """Empty the engine's prefix cache, so a run reuses only what it sent itself."""
    request = urllib.request.Request(f"{engine.base_url.removesuffix('/v1')}/reset_prefix_cache", method="POST")
    with urllib.request.urlopen(request, timeout=60):
        pass


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


def run_job(job: str, overrides: Sequence[str]) -> float:
    """A job as a user runs it (its own process); its wall seconds. A failed job stops the bench with its output."""
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", f"pipelines.{job}", *overrides], cwd=REPO, capture_output=True,
                          text=True, timeout=JOB_TIMEOUT_S, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    if done.returncode != 0:
        raise SystemExit(f"{job} failed ({done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return time.monotonic() - started


def measured(engine: VllmServer, tokenizer: Any, block: int, job: str, overrides: Sequence[str], run_dir: Path,
             max_tokens: int) -> RunFigures:
    """Run one job against an emptied prefix cache, through a fresh recording proxy, and read what it cost."""
    reset_prefix_cache(engine)
    before = engine.metrics()
    with RecordingProxy(engine.base_url) as proxy:
        wall = run_job(job, [*openai_overrides(proxy.base_url, max_tokens), *overrides])
    after = engine.metrics()
    delta = {name: after.get(name, 0.0) - before.get(name, 0.0) for name in after}
    sent = [chat_tokens(tokenizer, r["body"]["messages"]) for r in proxy.requests]
    written = list((run_dir / "candidates").glob("*.parquet"))
    return RunFigures(
        prompt_tokens=delta["vllm:prompt_tokens_total"], generation_tokens=delta["vllm:generation_tokens_total"],
        queries=delta["vllm:prefix_cache_queries_total"], hits=delta["vllm:prefix_cache_hits_total"],
        cached=delta["vllm:prompt_tokens_cached_total"], sent_tokens=sum(len(tokens) for tokens in sent),
        reusable=sum(reusable_prefixes(sent, block)), reusable_gpu=sum(reusable_prefixes(sent, GPU_BLOCK_TOKENS)),
        requests=len(proxy.requests), candidates=pl.read_parquet(written).height if written else 0,
        busy_s=max(r["answered_at"] for r in proxy.requests) - min(r["sent_at"] for r in proxy.requests),
        wall_s=wall)


def main() -> None:
    """Start the engine once, run every variant's mining and evaluate runs against it, print their figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--samples", type=int, default=4)
    parser.add_argument("--statements", type=int, default=6)
    parser.add_argument("--max-tokens", type=int, default=160)
    args = parser.parse_args()

    from transformers import AutoTokenizer

    os.environ["VLLM_SERVER_DEV_MODE"] = "1"  # the engine serves /reset_prefix_cache
    tokenizer = AutoTokenizer.from_pretrained(model_dir())
    cfg = load_config(["preset=demo"])
    seeds = pick_seeds(cfg, tokenizer, args.seeds, args.max_tokens)
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as scratch, VllmServer(Path(scratch) / "vllm.log") as engine:
        block = block_size(engine)
        benchmark = benchmark_dir(Path(scratch) / "benchmark", args.statements)
        print(f"engine: block_size={block} seeds={len(seeds)} samples={args.samples} "
              f"statements={args.statements} max_tokens={args.max_tokens}", flush=True)
        lines = {}
        for variant, overrides in VARIANTS.items():
            total = RunFigures()
            for job, job_overrides in (
                ("mine", ["preset=demo", f"seeds.root={SEEDS_ROOT}", f"seeds.list={json.dumps(seeds)}",
                          f"discover.samples_per_seed={args.samples}",
                          discover_shape(str(cfg.discover.marker))]),
                ("evaluate", [f"benchmark_dir={benchmark}"]),
            ):
                run_dir = Path(scratch) / variant / job
                figures = measured(engine, tokenizer, block, job,
                                   [*job_overrides, f"run_dir={run_dir}", *FAST_LEAN, *overrides], run_dir,
                                   args.max_tokens)
                print(f"{variant} {job}: {figures.details()}", flush=True)
                print(f"{variant} {job}: {figures.costs()}", flush=True)
                total.add(figures)
            lines[variant] = total.line()
            print(f"{variant}: {total.costs()}", flush=True)
            print(f"{variant}: {lines[variant]}", flush=True)
    print(f"wall_s={time.monotonic() - started:.0f}")
    print(lines["after"])


if __name__ == "__main__":
    main()
