"""Bring up what the `llm=` config names (the sim server, a Ray Serve LLM application, or nothing for a
plain OpenAI-compatible URL) for the length of a job, and stop what was started."""

from __future__ import annotations

from typing import Any, Callable

from operators.llm.client import LLMSettings, plain_config, settings_from_config


class LLMBackend:
    """What a job holds while it talks to LLMs: resolved settings, and what it started to stop at the end.

    `llm=sim` starts the sim server (a subprocess on loopback); `llm=vllm` starts a Ray Serve LLM
    application or attaches to a running one by name (modules imported only then); `llm=openai`
    starts nothing. Use as a context manager around the job.
    """

    def __init__(self, cfg: Any) -> None:
        self._cfg = plain_config(cfg)
        self.settings = settings_from_config(self._cfg)
        self._stop: Callable[[], None] | None = None

    def __enter__(self) -> LLMSettings:
        backend = self._cfg["backend"]
        if backend == "sim":
            from operators.llm.simulator import SimProcess

            sim = SimProcess(self._cfg["sim"]).start()
            self._stop = sim.stop
            self.settings = self.settings.with_base_url(self._cfg["sim_endpoint"], sim.base_url)
        elif backend == "vllm":
            from operators.llm.serve import ServeApp

            app = ServeApp(self._cfg["serve"])
            base_url = app.start_or_attach()
            self._stop = app.shutdown
            self.settings = self.settings.with_base_url(self._cfg["serve"]["endpoint"], base_url)
        return self.settings

    def __exit__(self, *exc: object) -> None:
        if self._stop is not None:
            self._stop()
            self._stop = None
