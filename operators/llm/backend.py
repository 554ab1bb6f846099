"""Bring up what the `llm=` config names (the sim server, a Ray Serve LLM application, or nothing for a
plain OpenAI-compatible URL) for the length of a job, check that its endpoints can serve the run, and stop
what was started."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from operators.llm.answers import AnswerShape
from operators.llm.cache import cache_dir
from operators.llm.client import LLMClients, probe_endpoints, refused_answer_formats
from operators.llm.errors import LLMConfigError
from operators.llm.settings import LLMSettings, plain_config, settings_from_config


class LLMBackend:
    """What a job holds while it talks to LLMs: resolved settings, and what it started to stop at the end.

    `llm=sim` starts the sim server (a subprocess on loopback) serving the roles' models; `llm=vllm` starts a
    Ray Serve LLM application or attaches to a running one by name (modules imported only then); `llm=openai`
    starts nothing. Then every endpoint's key variable must be set and, with `probe.enabled`, every endpoint must
    pass `probe_endpoints`, else `LLMConfigError` (after stopping what was started): a dead URL, a wrong key, a
    misspelt model or a `max_tokens` the model's context cannot hold is one error line within seconds, not hours
    of failing rows. Use as a context manager.
    """

    def __init__(self, cfg: Any, call_roles: Mapping[str, Sequence[str]],
                 answer_shapes: Mapping[str, AnswerShape | None] | None = None) -> None:
        self._cfg = plain_config(cfg)
        self._call_roles = call_roles
        self.settings = settings_from_config(self._cfg).with_answer_shapes(answer_shapes or {})
        self._stop: Callable[[], None] | None = None

    @property
    def needs_ray(self) -> bool:
        """Whether starting this backend needs Ray running (`llm=vllm` deploys on Ray Serve); the others start and
        are probed before Ray, so an endpoint that cannot serve the run costs no Ray start."""
        return self._cfg["backend"] == "vllm"

    def __enter__(self) -> LLMSettings:
        backend = self._cfg["backend"]
        if backend == "sim":
            from operators.llm.sim.server import SimProcess

            endpoint = self._cfg["sim_endpoint"]
            sim = dict(self._cfg["sim"])
            sim["models"] = sim.get("models") or sorted(
                {role.model for role in self.settings.roles.values() if role.endpoint == endpoint})
            process = SimProcess(sim).start()
            self._stop = process.stop
            self.settings = self.settings.with_base_url(endpoint, process.base_url)
        elif backend == "vllm":
            from operators.llm.serve import ServeApp, engines_without_tool_calling

            models = [self.settings.roles[role].model
                      for role in self._cfg["tool_roles"] if role in self.settings.roles]
            unable = engines_without_tool_calling(self._cfg["serve"], models)
            if unable:
                raise LLMConfigError(f"llm=vllm: roles {list(self._cfg['tool_roles'])} call tools, but the engines of "
                                     f"{unable} have no tool_call_parser "
                                     "(set llm.serve.engines.<model>.tool_call_parser)")
            app = ServeApp(self._cfg["serve"])
            base_url = app.start_or_attach()
            self._stop = app.shutdown
            self.settings = self.settings.with_base_url(self._cfg["serve"]["endpoint"], base_url)
        try:
            self._check()
        except BaseException:
            self.__exit__()
            raise
        return self.settings

    def _check(self) -> None:
        """Raise `LLMConfigError` naming every endpoint that cannot serve the run."""
        LLMClients(self.settings)  # an unset key variable is an LLMConfigError
        probe = self._cfg["probe"]
        problems = (probe_endpoints(self.settings, float(probe["timeout_s"]), self._call_roles)
                    if probe["enabled"] else [])
        if probe["enabled"] and not problems:
            problems = refused_answer_formats(self.settings, float(probe["timeout_s"]), self._call_roles,
                                              int(probe["structured_max_tokens"]))
        if problems:
            raise LLMConfigError(f"{'; '.join(problems)} (checked before the run; llm.probe.enabled=false skips this)")

    def cache_dir(self, run_uri: str) -> str | None:
        """Where the LLM operators keep and replay answers for a run living at `run_uri` (None: no cache)."""
        return cache_dir(run_uri, bool(self._cfg["cache"]["enabled"]))

    def __exit__(self, *exc: object) -> None:
        if self._stop is not None:
            self._stop()
            self._stop = None
