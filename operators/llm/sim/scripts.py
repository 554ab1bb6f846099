"""What the sim answers: each call's scripted reply, a deterministic function of the request and the sim seed.

Pure text in, text out, kept from the server so tests check the scripts without HTTP and the server is only about
the wire.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from lean_pool.lean_source import leading_binders, read_commands
from operators.rows.formalizations import MAJOR, MINOR, PERFECT, theorem_name

SIM_MODEL_PREFIX = "sim/"
# Request fields that choose a replica and never the answer: OpenAI's cache key, which the client fills with each
# request's affinity key (operators/llm/client.py).
ROUTING_FIELDS = frozenset({"prompt_cache_key"})

_EMPTY_TRIGGER = "sim:empty"
# Triggers in the informal text of a draft prompt: a refused command before the theorem, or no code at all.
_REFUSE_TRIGGER = "sim:refuse"
_NOCODE_TRIGGER = "sim:nocode"
# Triggers in an autoformalize text: a concept graph with a cycle; an agent that never compiles; an agent whose
# compiles never drop the error mark.
_CYCLE_TRIGGER = "sim:cycle"
_WANDER_TRIGGER = "sim:wander"
_UNFIXABLE_TRIGGER = "sim:unfixable"
# Triggers in a part to label: that label whatever the draw.
_LABEL_TRIGGERS = ((f"sim:{MAJOR}", MAJOR), (f"sim:{MINOR}", MINOR))
# Sentence ends (kept with their sentence) and blank lines: where an informal statement splits into parts.
_SENTENCE_BREAK = re.compile(r"(?<=[.?!])\s+|\n[ \t]*\n")
# Declarations whose names the scripted discover answer builds on.
_SEED_KINDS = frozenset({"theorem", "lemma", "def", "abbrev", "instance", "structure", "class", "inductive"})
# The tag the scripted discover answer puts in its lemma names.
_SIM_NAME_TAG = re.compile(r"_sim_[0-9]+_[0-9]+$")
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_.']*$")


@dataclass(frozen=True)
class RequestMeta:
    """What the client says about a request beyond the OpenAI body: which call, candidate, attempt."""

    call: str
    candidate_id: str
    attempt: int


def message_text(message: Mapping[str, Any]) -> str:
    """The text of one chat message, whether its content is a string or a list of parts."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content if isinstance(part, Mapping))
    return ""


def last_user_text(messages: list[Mapping[str, Any]]) -> str:
    """The last user message: where every call's prompt puts the material to work on."""
    for message in reversed(messages):
        if message.get("role") == "user":
            return message_text(message)
    return ""


def approx_tokens(text: str, chars_per_token: float) -> int:
    """Token count approximated from characters: the sim has no tokenizer and needs none."""
    return math.ceil(len(text) / chars_per_token)


def prompt_tokens(messages: list[Mapping[str, Any]], chars_per_token: float) -> int:
    """Approximate prompt size of a chat request, counted the same way for limits and usage."""
    return sum(approx_tokens(message_text(m), chars_per_token) for m in messages)


def request_digest(body: Mapping[str, Any], meta: RequestMeta) -> str:
    """A stable fingerprint of a request: identical retries share it, any change of content does not. Fields that
    only route a request (`ROUTING_FIELDS`) are left out: they choose a replica, never the answer."""
    content = {key: value for key, value in body.items() if key not in ROUTING_FIELDS}
    canonical = json.dumps([content, meta.call, meta.candidate_id, meta.attempt], sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


def unit(*parts: object) -> float:
    """A deterministic number in [0, 1) from its parts: the sim's only source of randomness."""
    digest = hashlib.sha256("\x1f".join(str(p) for p in parts).encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def success_attempt(weights: list[float], u: float) -> int | None:
    """The attempt (1-based) at which a scripted repair or proof succeeds; None when it never does.

    `weights[i]` is the probability of succeeding first at attempt i + 1; what is left is "never".
    """
    total = 0.0
    for index, weight in enumerate(weights):
        total += weight
        if u < total:
            return index + 1
    return None


def seed_identifiers(text: str) -> list[str]:
    """Names declared in the seed text, in order, without repeats: the discover script builds on them."""
    names = [
        command.written_name
        for command in read_commands(text)
        if command.kind in _SEED_KINDS and _first_on_its_line(text, command.start)
    ]
    return list(dict.fromkeys(name for name in names if _IDENTIFIER.match(name)))


def _first_on_its_line(text: str, offset: int) -> bool:
    """Prose around the seed in a prompt may say `lemma` mid-sentence; declarations open their line."""
    return not text[text.rfind("\n", 0, offset) + 1 : offset].strip()


def last_block(text: str, language: str) -> str:
    """The body of the last fenced block opened with ```language in a prompt, or an empty string: prompts put the
    material to work on last, after any examples."""
    blocks = re.findall(rf"```{re.escape(language)}[^\n]*\n(.*?)```", text, re.DOTALL)
    return blocks[-1].strip("\n") if blocks else ""


def last_lean_block(text: str) -> str:
    """The body of the last ```lean block in a prompt, or an empty string."""
    return last_block(text, "lean")


def statement_sentences(text: str) -> list[str]:
    """An informal statement cut into sentences (at `.`, `?`, `!` before a space or the end, and at blank lines),
    the sim's stand-in for a model splitting it into parts."""
    return [sentence.strip() for sentence in _SENTENCE_BREAK.split(text) if sentence.strip()]


def discover_reply(prompt: str, key: str, script: Mapping[str, Any], error_mark: str) -> str:
    """A plan paragraph, the marker line, then a lean block of `sorry` lemmas named after the seed's names, each
    stating one of the scripted statements (drawn per lemma, so a seed's lemmas sometimes restate each other)."""
    names = seed_identifiers(prompt) or [script["fallback_name"]]
    statements = script["statements"]
    count = script["lemmas_per_response"]
    lines = ["import Mathlib", ""]
    for index in range(count):
        base = names[int(unit(key, "name", index) * len(names))]
        name = f"{base}_sim_{key[:6]}_{index}"
        statement = statements[int(unit(key, "statement", index) * len(statements))]
        line = f"theorem {name} {statement} := by sorry"
        if unit(key, "broken", index) < script["broken_rate"]:
            line += f"  -- {error_mark}"
        lines += [line, ""]
    plan = (
        f"Plan (simulated): the seed file is about {', '.join(names[:3])}; "
        f"the {count} statements below are small facts around them that a user would expect to find."
    )
    return f"{plan}\n\n{script['marker']}\n\n```lean\n" + "\n".join(lines).rstrip() + "\n```\n"


def judge_reply(statement: str, u: float, script: Mapping[str, Any]) -> str:
    """Simulated reasoning, then the verdict alone on the last line: `correct` for a statement the script's
    `accept_pattern` matches (so a run can make sure some candidates go on, e.g. the demo's trivial ones), else
    when the candidate's draw `u` is under `correct_rate`."""
    pattern = script["accept_pattern"]
    accepts = (pattern is not None and re.search(pattern, statement) is not None) or u < script["correct_rate"]
    verdict = "correct" if accepts else "wrong"
    return f"Reasoning (simulated): the verdict below is scripted, not a judgement of the mathematics.\n{verdict}\n"


def strip_error_mark(code: str, error_mark: str) -> str:
    """The code with every occurrence of the Lean simulator's error pattern (and its comment dashes) removed."""
    code = re.sub(r"[ \t]*--[ \t]*" + re.escape(error_mark), "", code)
    return code.replace(error_mark, "")


def formalize_reply(code: str, fixed: bool, script: Mapping[str, Any], error_mark: str) -> str:
    """A repair answer: the marker then a lean block, fixed (error pattern dropped) or still broken."""
    repaired = strip_error_mark(code, error_mark) if fixed else code
    return f"Repair (simulated).\n{script['marker']}\n```lean\n{repaired}\n```\n"


def prove_reply(code: str, proved: bool, script: Mapping[str, Any], sketch_step: str | None = None) -> str:
    """A proof answer: the marker then the statement, with `sorry` replaced by a proof once it "succeeds", else
    (asked for a sketch) by a `have` stating `sketch_step` (a signature) left as `sorry` and a proof from it."""
    body = code
    if proved:
        body = code.replace("sorry", script["proof"])
    elif sketch_step is not None:
        body = code.replace("sorry", f"\n  have sketch_step : {sketch_proposition(sketch_step)} := by sorry\n"
                                     f"  {script['proof']} [sketch_step]", 1)
    return f"Proof attempt (simulated).\n{script['marker']}\n```lean\n{body}\n```\n"


def sketch_proposition(signature: str) -> str:
    """A scripted signature (`(n : ℕ) : n + 0 = n`) as one proposition (`∀ (n : ℕ), n + 0 = n`)."""
    binders, rest = leading_binders(signature)
    conclusion = rest.removeprefix(":").strip()
    return f"∀ {' '.join(binders)}, {conclusion}" if binders else conclusion


def think_reply(informal: str) -> str:
    """Notes before a draft; scripted, so they name no concept a later step could mistake for insight."""
    count = len(statement_sentences(informal))
    return (
        f"Concepts (simulated): the statement has {count} sentence(s); these notes are scripted and name no "
        "mathematics.\n"
    )


def draft_reply(informal: str, name: str, statement_u: float, broken_u: float, script: Mapping[str, Any]) -> str:
    """A first formalization: a note, the marker, then one `sorry` theorem named as asked, stating a scripted
    statement. Triggers in the informal text: the error mark (broken, also drawn), `sim:refuse`, `sim:nocode`."""
    note = "Draft (simulated): the statement below is drawn from a fixed list, not read from the informal text."
    if _NOCODE_TRIGGER in informal:
        return f"{note}\n"
    statements = script["discover"]["statements"]
    error_mark = script["error_mark"]
    line = f"theorem {name} {statements[int(statement_u * len(statements))]} := sorry"
    if error_mark in informal or broken_u < script["draft"]["broken_rate"]:
        line += f"  -- {error_mark}"
    lines = ["#eval 0", line] if _REFUSE_TRIGGER in informal else [line]
    return f"{note}\n{script['formalize']['marker']}\n```lean\n" + "\n".join(lines) + "\n```\n"


def diagnose_reply(attempt: int) -> str:
    """An explanation before a repair. It repeats neither the code nor the error, since the repair prompt it is
    pasted into must keep the code as its last lean block."""
    return f"Diagnosis (simulated): before repair {attempt}, scripted; it names no real cause of the error.\n"


def decompose_reply(informal: str) -> str:
    """The informal statement's parts as the decompose call answers them: its last sentence is the conclusion,
    every sentence before it an assumption."""
    sentences = statement_sentences(informal)
    parts = {"assumptions": sentences[:-1], "conclusions": sentences[-1:]}
    return f"Parts (simulated).\n```json\n{json.dumps(parts, ensure_ascii=False)}\n```\n"


def faithfulness_reply(parts_block: str, key: tuple[object, ...], script: Mapping[str, Any]) -> str:
    """One label per part given, in order: a `sim:major` / `sim:minor` trigger in the part wins, else a draw on
    `unit(*key, index)` at the configured rates. Parts that are not readable get an empty list."""
    try:
        parts = json.loads(parts_block)
    except json.JSONDecodeError:
        parts = None
    readable = isinstance(parts, list) and all(isinstance(p, Mapping) and isinstance(p.get("part"), str) for p in parts)
    labels = []
    for index, part in enumerate(parts if readable else []):
        text = part["part"]
        label = next((label for trigger, label in _LABEL_TRIGGERS if trigger in text), None)
        if label is not None:
            reason = f"the part carries the sim:{label} trigger (simulated)"
        else:
            u = unit(*key, index)
            major, minor = script["major_rate"], script["minor_rate"]
            label = MAJOR if u < major else MINOR if u < major + minor else PERFECT
            reason = "drawn at the configured rates, not a reading of the statement (simulated)"
        labels.append({"part": text, "label": label, "reason": reason})
    return f"Labels (simulated).\n```json\n{json.dumps(labels, ensure_ascii=False)}\n```\n"


def concept_graph_reply(informal: str, related: str, name: str, script: Mapping[str, Any]) -> str:
    """A concept graph as JSON: the first `grounded` declarations of the prompt's related block as leaves (their
    names exist in the index, so they ground exactly), and one new notion named after the row that depends on
    them and carries the informal text in its description (so its triggers reach the definition). `sim:cycle`
    adds a second notion and makes the two depend on each other."""
    known = [line.split()[0] for line in related.splitlines() if line.strip()][: script["grounded"]]
    nodes = [{"name": known_name, "description": f"the declaration {known_name} (simulated)", "depends_on": []}
             for known_name in known]
    notion: dict[str, Any] = {"name": name, "description": f"a notion the statement needs (simulated): {informal}",
                              "depends_on": list(known)}
    nodes.append(notion)
    if _CYCLE_TRIGGER in informal:
        helper = f"{name}_helper"
        notion["depends_on"].append(helper)
        nodes.append({"name": helper, "description": "a helper notion (simulated)", "depends_on": [name]})
    return f"Concept graph (simulated, not a reading of the text).\n```json\n{json.dumps({'concepts': nodes})}\n```\n"


def ground_reply(candidates: str, u: float, script: Mapping[str, Any]) -> str:
    """Which candidate declaration is the concept: the first one when the draw `u` is under `confirm_rate`,
    else none."""
    names = [line.split()[0] for line in candidates.splitlines() if line.strip()]
    match = names[0] if names and u < script["confirm_rate"] else None
    return f"Grounding (simulated).\n```json\n{json.dumps({'match': match})}\n```\n"


def define_reply(concept_block: str, broken_u: float, script: Mapping[str, Any]) -> str:
    """A Lean definition of the concept named in the prompt's json block: a scripted predicate that means nothing,
    or an `axiom` for `sim:refuse` in its description; the error mark for `sim:error` there or at `broken_rate`."""
    try:
        concept = json.loads(concept_block)
    except json.JSONDecodeError:
        concept = {}
    name = str(concept.get("name") or "sim_concept")
    description = str(concept.get("description") or "")
    error_mark = script["error_mark"]
    line = f"axiom {name} : Prop" if _REFUSE_TRIGGER in description else f"def {name} (n : ℕ) : Prop := n = n"
    if error_mark in description or broken_u < script["define"]["broken_rate"]:
        line += f"  -- {error_mark}"
    return f"Definition (simulated, it states nothing).\n{script['formalize']['marker']}\n```lean\n{line}\n```\n"


def agent_tool_call(messages: list[Mapping[str, Any]], key: tuple[object, ...], script: Mapping[str, Any]
                    ) -> tuple[str, dict[str, Any]]:
    """The agent's next tool call, read off the conversation so far: the scripted opening tools in order, then
    `compile` of the translator's code, which drops the error mark from the compile the draw picks on
    (`agent.fixed_at_compile`). `sim:wander` searches for ever; `sim:unfixable` never drops the mark."""
    agent = script["agent"]
    informal = last_block(last_user_text(messages), "text")
    names = {call["id"]: call["function"]["name"] for message in messages if message.get("role") == "assistant"
             for call in message.get("tool_calls") or []}
    made = list(names.values())
    translated = [message_text(message) for message in messages
                  if message.get("role") == "tool" and names.get(message.get("tool_call_id")) == "translate"]
    opening = agent["opening"]
    if _WANDER_TRIGGER in informal:
        name, arguments = "search_declarations", {"query": informal, "k": agent["search_k"]}
    elif len(made) < len(opening):
        name = opening[len(made)]
        arguments = {"search_declarations": {"query": informal, "k": agent["search_k"]},
                     "examples": {"query": informal}, "translate": {"informal": informal},
                     "check_term": {"expr": agent["term"]}}[name]
    else:
        code = last_lean_block(translated[-1]) if translated else ""
        fixed_at = success_attempt(agent["fixed_at_compile"], unit(*key))
        compiles = made.count("compile") + 1
        if fixed_at is not None and compiles >= fixed_at and _UNFIXABLE_TRIGGER not in informal:
            code = strip_error_mark(code, script["error_mark"])
        name, arguments = "compile", {"code": code}
    call = {"id": f"call_{len(made) + 1}", "type": "function",
            "function": {"name": name, "arguments": json.dumps(arguments, ensure_ascii=False)}}
    return f"Next step (simulated): {name}.", call


def name_reply(statement: str) -> str:
    """A scripted name proposal: the statement's theorem name without the sim's `_sim_<digits>_<index>` tag (the sim
    knows no naming convention, so the checker often refuses these and falls back to its own suggestion)."""
    theorem = next((c for c in read_commands(statement) if c.kind in ("theorem", "lemma")), None)
    name = _SIM_NAME_TAG.sub("", theorem.written_name) if theorem is not None else ""
    return f"A name by the conventions (simulated):\n\n`{name or 'folklore'}`\n"


def scripted_reply(
    messages: list[Mapping[str, Any]], meta: RequestMeta, model: str, digest: str, sim: Mapping[str, Any]
) -> str:
    """The scripted answer for one choice of a request: deterministic in (content, model, meta, seed)."""
    script = sim["script"]
    seed = sim["seed"]
    prompt = last_user_text(messages)
    subject = meta.candidate_id or digest
    if meta.call == "discover":
        return discover_reply(prompt, f"{unit(seed, digest):.17f}"[2:], script["discover"], script["error_mark"])
    if meta.call == "judge":
        return judge_reply(last_lean_block(prompt), unit(seed, model, "judge", subject), script["judge"])
    if meta.call == "formalize":
        k = success_attempt(script["formalize"]["fixed_at_attempt"], unit(seed, model, "formalize", subject))
        fixed = k is not None and meta.attempt >= k
        return formalize_reply(last_lean_block(prompt), fixed, script["formalize"], script["error_mark"])
    if meta.call == "prove":
        k = success_attempt(script["prove"]["proved_at_attempt"], unit(seed, model, "prove", subject))
        proved = k is not None and meta.attempt >= k
        statements = script["discover"]["statements"]
        sketch = statements[int(unit(seed, model, "sketch", subject, meta.attempt) * len(statements))] \
            if script["prove"]["sketch_cue"] in prompt else None
        return prove_reply(last_lean_block(prompt), proved, script["prove"], sketch)
    if meta.call == "think":
        return think_reply(last_block(prompt, "text"))
    if meta.call in ("draft", "translate"):
        draws = unit(seed, model, "draft", subject), unit(seed, model, "draft", subject, "broken")
        return draft_reply(last_block(prompt, "text"), theorem_name(meta.candidate_id), *draws, script)
    if meta.call == "diagnose":
        return diagnose_reply(meta.attempt)
    if meta.call == "concept_graph":
        return concept_graph_reply(last_block(prompt, "text"), last_lean_block(prompt),
                                   f"{theorem_name(meta.candidate_id)}_notion", script["concept_graph"])
    if meta.call == "ground":
        return ground_reply(last_lean_block(prompt), unit(seed, model, "ground", subject, digest),
                            script["concept_graph"])
    if meta.call == "define":
        return define_reply(last_block(prompt, "json"), unit(seed, model, "define", subject, digest), script)
    if meta.call == "name":
        return name_reply(last_lean_block(prompt))
    if meta.call == "decompose":
        return decompose_reply(last_block(prompt, "text"))
    if meta.call == "faithfulness":
        key = (seed, model, "faithfulness", subject)
        return faithfulness_reply(last_block(prompt, "json"), key, script["faithfulness"])
    return f"Simulated answer {digest[:16]}.\n"


def completion_body(
    body: Mapping[str, Any], meta: RequestMeta, digest: str, sim: Mapping[str, Any]
) -> dict[str, Any]:
    """The full chat-completion answer: scripted choices, truncation at max tokens, usage, sim markings."""
    messages = body["messages"]
    model = str(body.get("model", ""))
    cpt = sim["chars_per_token"]
    limit = body.get("max_completion_tokens") or body.get("max_tokens") or sim["default_max_tokens"]
    empty = any(_EMPTY_TRIGGER in message_text(m) for m in messages)
    choices = []
    completion_tokens = 0
    for index in range(int(body.get("n") or 1)):
        calls = None
        if body.get("tools"):
            text, call = agent_tool_call(messages, (sim["seed"], model, "agent", meta.candidate_id or digest),
                                         sim["script"])
            calls = [call]
        else:
            text = scripted_reply(messages, meta, model, f"{digest}:{index}" if index else digest, sim)
        finish = "tool_calls" if calls else "stop"
        if approx_tokens(text, cpt) > limit:
            text, finish = text[: int(limit * cpt)], "length"
        completion_tokens += 0 if empty else approx_tokens(text, cpt)
        message: dict[str, Any] = {"role": "assistant", "content": "" if empty else text}
        if calls:
            message["tool_calls"] = calls
        choices.append(
            {
                "index": index,
                "message": message,
                "finish_reason": finish,
                "logprobs": None,
            }
        )
    prompt = prompt_tokens(messages, cpt)
    return {
        "id": f"chatcmpl-sim-{digest[:24]}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": SIM_MODEL_PREFIX + model,
        "system_fingerprint": f"folklore-sim-seed-{sim['seed']}",
        "choices": choices,
        "usage": {
            "prompt_tokens": prompt,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt + completion_tokens,
        },
    }
