"""Chat messages for every LLM call of the mining pipeline, rendered from templates kept in config.

The wording lives in `conf/mine.yaml` (`prompts:`) so it can be changed per run without code; this
module only fills the templates. Code shown to a model always sits in a fenced `lean` block, and the
code to work on is the last such block of the last message, so a repair prompt reads history first
and the current attempt last; answers that held no code are quoted after it, never fenced.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from operators.rows.candidates import LEAN_ERRORS, NO_CODE, NOT_ACCEPTED, REFUSED_CODE, failure_kind

Messages = list[dict[str, str]]
# The template that shows an attempt in a history, by what went wrong with it (`failure_kind`).
ATTEMPT_TEMPLATES = {LEAN_ERRORS: "attempt", REFUSED_CODE: "attempt_refused", NOT_ACCEPTED: "attempt_rejected",
                     NO_CODE: "attempt_no_code"}
# How much of an answer without code a history quotes: its start and its end (where the marker belonged).
EXCERPT_CHARS = 800
_FENCE = re.compile(r"`{3,}")


def _chat(templates: Mapping[str, str], user: str) -> Messages:
    """A system message from the shared template, then the user message."""
    return [{"role": "system", "content": templates["system"]}, {"role": "user", "content": user}]


def format_diagnostics(diagnostics: Sequence[Mapping[str, Any]]) -> str:
    """Lean's diagnostics as one line each (`line L, column C: severity: text`), or a note that there were none."""
    if not diagnostics:
        return "(no diagnostics)"
    return "\n".join(
        f"line {d.get('line')}, column {d.get('column')}: {d.get('severity')}: {d.get('message')}" for d in diagnostics
    )


def format_reasons(reasons: Sequence[str]) -> str:
    """The checker's or the loop's reasons, one `- ` line each."""
    return "\n".join(f"- {reason}" for reason in reasons)


def excerpt(text: str | None, limit: int = EXCERPT_CHARS) -> str:
    """An earlier answer as a prompt quotes it: whole when short, else its start and its end around a note of what
    was left out; each line behind `> ` and fences turned to `'''`, so the code to work on stays the prompt's last
    `lean` block."""
    text = (text or "").strip()
    if len(text) > limit:
        half = limit // 2
        text = f"{text[:half]}\n[... {len(text) - 2 * half} characters left out ...]\n{text[-half:]}"
    return "\n".join(f"> {line}".rstrip() for line in _FENCE.sub("'''", text).split("\n"))


def format_failure(attempt: Mapping[str, Any]) -> str:
    """What went wrong with a failed attempt, as lines: Lean's diagnostics when Lean reported errors, else the
    reasons (a refusal, a verdict that failed without an error, an answer without code)."""
    if failure_kind(attempt) == LEAN_ERRORS:
        return format_diagnostics(attempt["diagnostics"] or [])
    return format_reasons(attempt.get("reasons") or [])


def format_attempt(templates: Mapping[str, str], number: int, attempt: Mapping[str, Any]) -> str:
    """One failed attempt as a history shows it, with the template for what went wrong: Lean's diagnostics, a
    refusal before Lean, a failed verdict, or an answer without code (quoted, so the model sees what it wrote)."""
    return templates[ATTEMPT_TEMPLATES[failure_kind(attempt)]].format(
        number=number, code=attempt["code"], diagnostics=format_diagnostics(attempt["diagnostics"] or []),
        reasons=format_reasons(attempt.get("reasons") or []), answer=excerpt(attempt.get("response")))


def format_history(templates: Mapping[str, str], attempts: Sequence[Mapping[str, Any]]) -> str:
    """Earlier attempts, oldest first, each with its code and what went wrong with it, answers without code
    included, so that no retry is the same request as the one before."""
    return "\n\n".join(format_attempt(templates, number, attempt) for number, attempt in enumerate(attempts, start=1))


def with_retries(templates: Mapping[str, str], messages: Messages, attempts: Sequence[Mapping[str, Any]],
                 marker: str) -> Messages:
    """A first request asked again after answers that held no code: the same messages, then what was wrong with each
    of those answers, so the retry is never the identical call (unchanged when there were none)."""
    if not attempts:
        return messages
    note = templates["retry"].format(history=format_history(templates, attempts), marker=marker)
    last = messages[-1]
    return [*messages[:-1], {**last, "content": f"{last['content']}\n\n{note}"}]


def discover_messages(templates: Mapping[str, str], seed_text: str, marker: str, min_lemmas: int,
                      known: Sequence[str] = ()) -> Messages:
    """Ask for many missing, diverse lemma statements about one seed file, written after the marker; in a later
    round, after the lemmas earlier rounds proved for it (`known`), which it should neither repeat nor ignore."""
    user = templates["discover"].format(seed=seed_text, marker=marker, min_lemmas=min_lemmas)
    if known:
        user += "\n\n" + templates["discover_known"].format(known="\n\n".join(known))
    return _chat(templates, user)


def judge_messages(templates: Mapping[str, str], statement: str) -> Messages:
    """Ask whether a statement is mathematically true, ignoring Lean syntax, verdict on the last line."""
    return _chat(templates, templates["judge"].format(statement=statement))


def formalize_messages(templates: Mapping[str, str], attempts: Sequence[Mapping[str, Any]], marker: str) -> Messages:
    """Ask for a statement that compiles, given every (code, diagnostics) pair so far; the last is current."""
    return _chat(templates, templates["formalize"].format(history=format_history(templates, attempts), marker=marker))


def prove_messages(
    templates: Mapping[str, str],
    statement: str,
    env_lines: Sequence[str],
    marker: str,
    attempts: Sequence[Mapping[str, Any]],
    sketch: bool = False,
) -> Messages:
    """Ask for a full proof of the statement; after a failure, for a repair given every attempt so far, and with
    `sketch`, for a proof sketch whose open steps are `have ... := by sorry` if no whole proof comes. The repair
    template gets the first request's text as `{first}`: led by it, every repair prompt extends the one before, which
    an engine's prefix cache then does not compute again."""
    environment = "\n".join(f"    {line}" for line in env_lines)
    first = templates["prove"].format(statement=statement, environment=environment, marker=marker)
    if not attempts:
        return _chat(templates, first)
    user = templates["prove_repair"].format(
        first=first, statement=statement, environment=environment, marker=marker,
        history=format_history(templates, attempts)
    )
    return _chat(templates, user + ("\n\n" + templates["prove_sketch"] if sketch else ""))


def with_preamble(messages: Messages, text: str) -> Messages:
    """The chat messages with `text` put first in the last user message (unchanged if empty): grounding, the
    statement as asked or a diagnosis go before the material, so the code to work on stays the last `lean`
    block of the prompt, where the model and the sim look for it."""
    if not text:
        return messages
    last = messages[-1]
    return [*messages[:-1], {**last, "content": f"{text}\n\n{last['content']}"}]


def think_messages(templates: Mapping[str, str], informal: str, related: str) -> Messages:
    """Ask for the Mathlib concepts and the shape of the statement before any Lean is written (FORMAL)."""
    return _chat(templates, templates["think"].format(informal=informal, related=related))


def draft_messages(templates: Mapping[str, str], informal: str, header: str, name: str, marker: str, related: str,
                   thought: str | None) -> Messages:
    """Ask for the Lean statement of an informal one, under its header, named `name`, proof `sorry`."""
    user = templates["draft"].format(informal=informal, header=header.strip(), name=name, marker=marker,
                                     related=related)
    plan = templates["draft_plan"].format(thought=thought.strip()) if thought else ""
    return with_preamble(_chat(templates, user), plan)


def diagnose_messages(templates: Mapping[str, str], attempt: Mapping[str, Any]) -> Messages:
    """Ask what Lean's errors on the current attempt mean and how to fix them, without writing the fix (FORMAL)."""
    user = templates["diagnose"].format(code=attempt["code"], diagnostics=format_failure(attempt))
    return _chat(templates, user)


def concept_graph_messages(templates: Mapping[str, str], informal: str, related: str, max_concepts: int,
                           max_depth: int) -> Messages:
    """Ask for the concepts a statement needs as a dependency graph in JSON (Aria's Graph-of-Thought)."""
    return _chat(templates, templates["concept_graph"].format(informal=informal, related=related,
                                                              max_concepts=max_concepts, max_depth=max_depth))


def ground_messages(templates: Mapping[str, str], concept: Mapping[str, Any], candidates: str) -> Messages:
    """Ask which of the nearest declarations, if any, is the concept."""
    return _chat(templates, templates["ground"].format(concept=json.dumps(dict(concept), ensure_ascii=False),
                                                       candidates=candidates))


def define_messages(templates: Mapping[str, str], concept: Mapping[str, Any], informal: str, header: str,
                    known: str, marker: str) -> Messages:
    """Ask for a Lean definition of a missing concept, given the file it goes into (header and earlier
    definitions); the concept is the prompt's last block."""
    return _chat(templates, templates["define"].format(
        concept=json.dumps(dict(concept), ensure_ascii=False), informal=informal, header=header.strip(),
        known=known, marker=marker))


def agent_messages(templates: Mapping[str, str], informal: str, header: str, name: str, budget: int) -> Messages:
    """The agent's task: formalize the statement with the tools, at most `budget` tool calls."""
    return _chat(templates, templates["agent"].format(informal=informal, header=header.strip(), name=name,
                                                      budget=budget))


def translate_messages(templates: Mapping[str, str], informal: str, header: str, name: str, marker: str
                       ) -> Messages:
    """The `translate` tool's request to the translator model: one Lean statement of the informal text."""
    return _chat(templates, templates["translate"].format(informal=informal, header=header.strip(), name=name,
                                                          marker=marker))


def name_messages(templates: Mapping[str, str], statement: str, namespace: str, name: str, reasons: Sequence[str],
                  convention: str) -> Messages:
    """Ask for a Mathlib-style name for a proved lemma whose name failed the naming check, the name alone on the
    last line."""
    return _chat(templates, templates["name"].format(statement=statement, namespace=namespace or "(the root)",
                                                     name=name, reasons=format_reasons(reasons),
                                                     convention=convention))
