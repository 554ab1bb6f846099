"""Whether each call's `max_tokens` fits the context of the models that call asks, given the contexts the
endpoints' model listings declare.

The client's probe reads the listings before a job starts; this decides, from the settings alone, which budgets
cannot fit.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from operators.llm.settings import LLMSettings


@dataclass(frozen=True)
class ModelContext:
    """The context (prompt and completion, in tokens) an endpoint's listing declares for one of its models, and the
    card field that says so."""

    endpoint: str
    url: str
    model: str
    tokens: int
    field: str


def card_context(card: Any) -> tuple[int, str] | None:
    """The context a `GET /models` card declares and its field: vLLM's `max_model_len`, Ray Serve LLM's
    `metadata.max_request_context_length` (its engine's `max_model_len`); None when the card says nothing (OpenAI)."""
    declared = getattr(card, "max_model_len", None)
    if isinstance(declared, int) and declared > 0:
        return declared, "max_model_len"
    metadata = getattr(card, "metadata", None)
    declared = metadata.get("max_request_context_length") if isinstance(metadata, Mapping) else None
    if isinstance(declared, int) and declared > 0:
        return declared, "metadata.max_request_context_length"
    return None


def roles_of_call(settings: LLMSettings, call: str, call_roles: Mapping[str, Sequence[str]]) -> list[str]:
    """The configured roles asked with the sampling of call `call` (`call_roles`, from the stages'
    declarations; every role for a call no stage declares)."""
    return [role for role in call_roles.get(call, tuple(settings.roles)) if role in settings.roles]


def unfit_budgets(settings: LLMSettings, contexts: Mapping[tuple[str, str], ModelContext],
                  call_roles: Mapping[str, Sequence[str]]) -> list[str]:
    """One line per call whose `max_tokens` cannot fit the context of a model that call asks (`roles_of_call`,
    given the roles each call is asked with), given the contexts the endpoints declared, keyed by
    (endpoint, model). A budget as large as the context leaves
    no token for the prompt, and vLLM refuses every such request (`400 max_tokens=... cannot be greater than
    max_model_len=...`). A call is held to the smallest declared context among its models; models whose listing
    declares none are not checked. Every configured call is checked, whether the job makes it or not: the settings
    do not say which stages a job runs, and a budget no model of its roles can hold is wrong in any job."""
    problems = []
    for call, sampling in settings.sampling.items():
        if sampling.max_tokens is None:
            continue
        bound = [settings.roles[role] for role in roles_of_call(settings, call, call_roles)]
        declared = [contexts[(role.endpoint, role.model)] for role in bound if (role.endpoint, role.model) in contexts]
        if not declared:
            continue
        smallest = min(declared, key=lambda context: context.tokens)
        if sampling.max_tokens >= smallest.tokens:
            problems.append(
                f"llm.sampling.{call}.max_tokens={sampling.max_tokens} cannot fit model {smallest.model}'s context "
                f"of {smallest.tokens} tokens ({smallest.field} at endpoint {smallest.endpoint}, {smallest.url}); "
                f"lower it below {smallest.tokens}")
    return problems
