"""The rules that decide whether Lean code is verified or failed, and `precheck`, which applies them with the
refusals (`lean_pool.refusals`) before Lean is asked.

"Verified" means: the Lean kernel accepted a sorry-free proof of exactly the statement asked,
using no axiom beyond the standard three. These functions are pure (text and answer dicts in,
verdicts out) so that the rules can be read and tested apart from the processes that run Lean.

Checks happen in two phases. Before Lean: `refusal_reasons` rejects code that could run programs
or change the checker, and in proof mode `precheck` also rejects textual `sorry`/`admit`, a
missing target, a changed statement and a changed context (`context_reasons`). After Lean:
`statement_verdict` / `proof_verdict` read the REPL's answer and the answers to `#print axioms NAME`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from lean_pool.lean_source import (
    DECLARATION_KINDS,
    NOTATION_KINDS,
    THEOREM_KINDS,
    Command,
    code_only,
    identifiers,
    layout_free,
    notation_atoms,
    read_commands,
)
from lean_pool.refusals import refusal_reasons, textual_sorry_reasons

# The axioms every Mathlib proof may use; anything else (sorryAx, Lean.ofReduceBool, a user axiom)
# means the kernel did not check a complete proof from the standard foundations.
ALLOWED_AXIOMS = frozenset({"propext", "Classical.choice", "Quot.sound"})

SORRY = "sorry"  # the status of code that would be accepted but for a `sorry` or `admit`
STATUSES = ("passed", SORRY, "error", "refused", "timeout", "crashed", "infra_error")


@dataclass(frozen=True)
class Verdict:
    """The outcome of one check: `status` is one of STATUSES; `ok` is True when the check did what
    was asked (a proof passed, or a statement compiled); `reasons` says why it did not, or what
    was noticed (e.g. the sorries a statement is expected to have)."""

    status: str
    ok: bool
    reasons: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"unknown verdict status {self.status!r}; expected one of {STATUSES}")


# ---------------------------------------------------------------------------------------------
# Declarations and statements.
# ---------------------------------------------------------------------------------------------

# Context that can add hypotheses to a statement without changing its text.
_HYPOTHESIS_CONTEXT = frozenset({"variable", "include", "omit"})
_INSTANCE_ATTRIBUTES = frozenset({"instance", "default_instance"})


def _theorems(code: str) -> list[Command]:
    return [c for c in read_commands(code) if c.kind in THEOREM_KINDS and c.name]


def declared_names(code: str) -> list[str]:
    """Full names of the `theorem`s and `lemma`s in `code`, in order, with `namespace`s resolved
    (`_root_.` honoured, `«»` removed): the names the pool asks `#print axioms` about."""
    return [c.name for c in _theorems(code)]


def _target(reference: str) -> Command | None:
    return next(iter(_theorems(reference)), None)


def same_statement(reference: str, candidate: str) -> bool:
    """True iff `candidate` declares the reference's first theorem/lemma under the same full name
    with the same binders and type, up to comments and whitespace.

    `lemma` vs `theorem`, attributes, modifiers and the proof are ignored; helper declarations in
    the candidate are fine. Every candidate theorem with that name must match (a second one would
    not compile anyway). The context around the declaration is `context_reasons`' job.
    """
    target = _target(reference)
    if target is None:
        return False
    matches = [c for c in _theorems(candidate) if c.name == target.name]
    return bool(matches) and all(layout_free(c.signature) == layout_free(target.signature) for c in matches)


def _hypothesis_context(command: Command) -> list[str]:
    """The `variable`/`include`/`omit` commands and `... in` prefixes that apply to `command`, layout-free."""
    entries = [c.text for c in command.context(_HYPOTHESIS_CONTEXT)]
    entries += [prefix for prefix in command.prefixes if prefix.split()[0] in _HYPOTHESIS_CONTEXT]
    return [layout_free(entry) for entry in entries]


def context_reasons(reference: str, candidate: str) -> list[str]:
    """How the candidate's text around the target could make the same-looking statement mean
    something else: extra `variable`/`include`/`omit` in scope (extra hypotheses), declarations the
    reference also makes but with other text, new instances, new declarations named like an
    identifier of the statement (which could shadow it), or new notation for symbols the reference uses.
    `open` is not compared: proofs add opens.
    Empty when the reference or the candidate has no target (that is reported elsewhere)."""
    target = _target(reference)
    if target is None:
        return []
    ref_commands = read_commands(reference)
    cand_commands = read_commands(candidate)
    position = next(
        (i for i, c in enumerate(cand_commands) if c.kind in THEOREM_KINDS and c.name == target.name), None
    )
    if position is None:
        return []
    ref_texts = {layout_free(c.text) for c in ref_commands}
    ref_by_name = {c.name: layout_free(c.text) for c in ref_commands if c.kind in DECLARATION_KINDS and c.name}
    statement_words = identifiers(target.signature)
    target_context = _hypothesis_context(target)
    reasons = [
        f"`{entry}` is in scope for `{target.name}` but not in the reference: it can add hypotheses"
        for entry in _hypothesis_context(cand_commands[position])
        if entry not in target_context
    ]
    for command in cand_commands[:position]:
        name = command.name if command.kind in DECLARATION_KINDS else ""
        text = layout_free(command.text)
        if name in ref_by_name and text != ref_by_name[name]:
            reasons.append(f"`{name}` is declared differently than in the reference")
        instance_like = command.kind == "instance" or _INSTANCE_ATTRIBUTES & set(command.attributes)
        if instance_like and text not in ref_texts:
            label = name or "an anonymous instance"
            reasons.append(f"new instance ({label}) before the target can change how the statement elaborates")
        if name and name not in ref_by_name and name.split(".")[-1] in statement_words:
            reasons.append(f"new declaration `{name}` shares its name with an identifier of the statement")
    return reasons + _notation_reasons(reference, ref_texts, cand_commands)


def _notation_reasons(reference: str, ref_texts: set[str], commands: list[Command]) -> list[str]:
    """Notation the candidate adds (not copied from the reference) whose symbols the reference is written
    with: it could make the statement, or a definition it depends on, parse as something else while its text
    stays the same. A notation with no symbol of its own cannot be told apart from the statement's syntax."""
    reference_code = code_only(reference)
    reasons = []
    for command in commands:
        if command.kind not in NOTATION_KINDS or layout_free(command.text) in ref_texts:
            continue
        atoms = notation_atoms(command)
        if not atoms:
            reasons.append(f"line {command.line}: `{command.kind}` without a symbol of its own could take over "
                           "the statement's syntax")
        for atom in atoms:
            if atom in reference_code:
                reasons.append(f"line {command.line}: new notation for `{atom}`, which the statement or its "
                               "context is written with: it could change what they mean")
    return reasons


def target_name(reference: str) -> str | None:
    """The full name of the reference's first theorem/lemma: the name a proof must declare."""
    target = _target(reference)
    return target.name if target else None


# ---------------------------------------------------------------------------------------------
# Reading Lean's answers.
# ---------------------------------------------------------------------------------------------

_DEPENDS = re.compile(r"^'(?P<name>.+)' depends on axioms: \[(?P<axioms>.*)\]\s*$", re.DOTALL)
_NO_AXIOMS = re.compile(r"^'(?P<name>.+)' does not depend on any axioms\s*$", re.DOTALL)
_SORRY_WARNING = re.compile(r"declaration uses [`']sorry[`']")
_ALREADY_DECLARED = re.compile(r"'(?P<name>.+?)' has already been declared")


def _messages(answer: dict) -> list[dict]:
    return list(answer.get("messages", []))


def _where(message: dict) -> str:
    pos = message.get("pos") or {}
    return f"line {pos.get('line', '?')}:{pos.get('column', '?')}"


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else ""


def axioms_of(answer: dict) -> list[str] | None:
    """The axioms listed in the answer to `#print axioms NAME`, or None when the answer has no such
    list (unknown constant, REPL failure). Lean prints `'NAME' depends on axioms: [a, b]` or
    `'NAME' does not depend on any axioms` as an info message; long lists may wrap lines."""
    for message in _messages(answer):
        if message.get("severity") != "info":
            continue
        data = str(message.get("data", "")).strip()
        if _NO_AXIOMS.match(data):
            return []
        m = _DEPENDS.match(data)
        if m:
            return [name.strip() for name in m.group("axioms").split(",") if name.strip()]
    return None


def _error_reasons(answer: dict) -> list[str]:
    reasons = [
        f"{_where(msg)}: {_first_line(str(msg.get('data', '')))}"
        for msg in _messages(answer)
        if msg.get("severity") == "error"
    ]
    if "message" in answer and "env" not in answer:
        reasons.append(f"the REPL rejected the command: {' '.join(str(answer['message']).split())}")
    return reasons


def _sorry_reasons(answer: dict) -> list[str]:
    reasons = []
    sorries = answer.get("sorries", [])
    if sorries:
        reasons.append(f"Lean reports {len(sorries)} `sorry` placeholder(s)")
    for msg in _messages(answer):
        if _SORRY_WARNING.search(str(msg.get("data", ""))):
            reasons.append(f"{_where(msg)}: {_first_line(str(msg['data']))}")
    return reasons


def already_declared(answer: dict) -> list[str]:
    """Names Lean says were already declared: a statement that restates an existing (Mathlib)
    declaration under its own name, which formalization treats as a rejection."""
    return [
        m.group("name")
        for msg in _messages(answer)
        if msg.get("severity") == "error"
        for m in [_ALREADY_DECLARED.search(str(msg.get("data", "")))]
        if m
    ]


def statement_verdict(answer: dict) -> Verdict:
    """A statement compiles iff Lean reports no error. Its `sorry` is expected: a compiling
    statement with a sorry gets status "sorry" and ok=True; without one, "passed" and ok=True;
    any error gives "error" and ok=False (see `already_declared` for restated Mathlib names)."""
    errors = _error_reasons(answer)
    if errors:
        return Verdict("error", False, tuple(errors))
    sorries = _sorry_reasons(answer)
    if sorries:
        return Verdict(SORRY, True, tuple(sorries))
    return Verdict("passed", True)


def proof_verdict(
    answer: dict,
    axioms: dict[str, dict],
    expected_names: list[str],
    allowed_axioms: frozenset[str] = ALLOWED_AXIOMS,
) -> Verdict:
    """A proof passes only when Lean reports no error, no sorry of any kind (the `sorries` field,
    either spelling of the warning, `sorryAx` among the axioms), and every expected name has a
    `#print axioms` answer listing only allowed axioms. `axioms` maps each name to that answer.
    Reasons list every failure found; status is "error" if there is an error or a missing/unsound
    target, else "sorry" if only sorries were found."""
    errors = _error_reasons(answer)
    sorries = _sorry_reasons(answer)
    problems = [] if expected_names else ["no target declaration was named, so nothing was verified"]
    for name in expected_names:
        printed = axioms_of(axioms[name]) if name in axioms else None
        if printed is None:
            problems.append(f"`{name}` is not declared (no `#print axioms` answer for it)")
            continue
        if "sorryAx" in printed:
            sorries.append(f"`{name}` depends on `sorryAx`")
        extra = sorted(set(printed) - allowed_axioms - {"sorryAx"})
        if extra:
            problems.append(f"`{name}` depends on axioms outside {sorted(allowed_axioms)}: {extra}")
    reasons = tuple(errors + sorries + problems)
    if errors or problems:
        return Verdict("error", False, reasons)
    if sorries:
        return Verdict(SORRY, False, reasons)
    return Verdict("passed", True)


def precheck(code: str, mode: str, reference: str | None = None) -> Verdict | None:
    """The verdict the text alone decides, or None when Lean must be asked.

    Every mode refuses what `refusal_reasons` finds. In "proof" mode also: textual sorry (status
    "sorry"), and given a reference statement, a missing target, a changed statement or a context
    that changes its meaning ("error"). "sketch" mode is "proof" mode that leaves the sorries to Lean, which
    reports the goals they stand for. "file" mode, a whole file the user trusts, leaves everything to Lean
    (`session_check.CheckMode`).
    """
    if mode == "file":
        return None
    refused = refusal_reasons(code)
    if refused:
        return Verdict("refused", False, tuple(refused))
    if mode == "statement":
        return None
    if mode not in ("proof", "sketch"):
        raise ValueError(f"mode must be 'proof', 'sketch', 'statement' or 'file', not {mode!r}")
    sorries = textual_sorry_reasons(code) if mode == "proof" else []
    if sorries:
        return Verdict(SORRY, False, tuple(sorries))
    if reference is not None:
        target = target_name(reference)
        if target is None:
            return Verdict("error", False, ("the reference declares no theorem or lemma",))
        if target not in declared_names(code):
            return Verdict("error", False, (f"the target `{target}` is not declared",))
        if not same_statement(reference, code):
            return Verdict("error", False, (f"`{target}` is declared with a different statement",))
        context = context_reasons(reference, code)
        if context:
            return Verdict("error", False, tuple(context))
    return None
