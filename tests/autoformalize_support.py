"""What the autoformalize mode tests share: the job's config and step settings without Ray, a pending row, and a
Lean pool stand-in that applies the real refusal and verdict rules to the Lean simulator's textual answers."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from omegaconf import OmegaConf

from lean_pool import verdict
from lean_pool.lean_source import find_tokens
from lean_pool.session_check import CheckResult
from operators.autoformalize.direct import STAGE as AUTOFORMALIZE
from operators.autoformalize.direct import AutoformalizeSettings
from operators.llm.settings import LLMSettings, settings_from_config
from operators.retrieval.settings import IndexSettings
from operators.rows.formalizations import InputRules, problem_row
from pipelines.jobs.autoformalization import AutoformalizeJob, load_config
from pipelines.runtime.stage_settings import stage_settings

ERROR_MARK = "sim:error"


def job_config(*overrides: str) -> Any:
    """`conf/autoformalize.yaml` as `preset=demo` composes it (simulators), with overrides."""
    return load_config(["preset=demo", *overrides], complete=False)


def autoformalize_settings(cfg: Any) -> AutoformalizeSettings:
    """The autoformalize step's settings as the pipeline builds them, closed-book (no index)."""
    steps = stage_settings(cfg, IndexSettings(dir=None, revision=None, embedding={}), AutoformalizeJob.INPUTS,
                          AutoformalizeJob.PLAN_TABLE)
    return replace(steps.of(AUTOFORMALIZE)["autoformalize"], think=False)


def llm_settings(cfg: Any, base_url: str) -> LLMSettings:
    """The sim backend's settings pointed at a server the test started."""
    return settings_from_config(cfg.llm).with_base_url("sim", base_url)


def sim_block(cfg: Any) -> dict[str, Any]:
    """The `sim:` block of the composed config, with a short fixed latency."""
    sim = OmegaConf.to_container(cfg.llm.sim, resolve=True)
    sim["latency"] = {"median_s": 0.005, "sigma": 0.0}
    return sim


def pending_row(name: str, informal: str, mode: str, header: str = "import Mathlib\n") -> dict[str, Any]:
    """A pending formalization row as the pipeline reads it from an input line."""
    rules = InputRules(max_tokens=4000, chars_per_token=3.5, default_header=header)
    return problem_row({"name": name, "informal": informal, "header": header}, "tests.jsonl", rules, {}, mode)


class TextPool:
    """A Lean pool stand-in: the refusal rules for real (`verdict.precheck`), then the Lean simulator's textual rules
    (an error where the error mark stands, the sorry warning for `sorry`); with `infra`, every check times out."""

    def __init__(self, infra: bool = False) -> None:
        self.infra = infra
        self.checked: list[str] = []

    async def check(self, code: str, timeout: float | None = None, mode: str = "statement",
                    names: list[str] | None = None, statement: str | None = None) -> CheckResult:
        self.checked.append(code)
        if self.infra:
            return CheckResult(status="timeout", ok=False, reasons=["timeout: no answer (scripted)"])
        decided = verdict.precheck(code, mode)
        if decided is not None:
            return CheckResult(status=decided.status, ok=decided.ok, reasons=list(decided.reasons))
        messages = [{"severity": "error", "pos": {"line": 1, "column": 0}, "data": "simulated error"}] \
            if ERROR_MARK in code else []
        if find_tokens(code, ("sorry",)):
            messages.append({"severity": "warning", "pos": {"line": 1, "column": 0},
                             "data": "declaration uses `sorry`"})
        judged = verdict.statement_verdict({"messages": messages})
        return CheckResult(status=judged.status, ok=judged.ok, reasons=list(judged.reasons), messages=messages)
