"""Goals: the proof states the REPL prints (hypotheses such as `h : x < y` above a target `⊢ x ≤ y`), read back as
statements.

A `sorry` in a sketch or an unsolved goal in an error is a lemma still to prove: read as a theorem, it becomes a
sub-goal candidate; and the simulator prints the goal a `sorry` stands for the way the REPL does.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from lean_pool.lean_source.command_heads import scan_text
from lean_pool.lean_source.lexer import lex
from lean_pool.lean_source.statements import BINDER_GROUP, IDENT, leading_binders, signature_type
from lean_pool.lean_source.tokens import find_tokens, identifiers, layout_free, normalize_space, outside_brackets

TURNSTILE = "⊢"
# Lean's mark on a name a tactic made that the user cannot write (`a✝`, `inst✝¹`).
INACCESSIBLE = "✝"
_SUPERSCRIPT_DIGITS = "⁰¹²³⁴⁵⁶⁷⁸⁹"
_INACCESSIBLE_NAME = re.compile(rf"({IDENT})✝[{_SUPERSCRIPT_DIGITS}]*")
_HYPOTHESIS = re.compile(r"(?P<names>(?:\S+\s+)*\S+)\s:\s(?P<type>.*)", re.S)
_CASE_TAG = re.compile(r"case\s")
_HAVE_HEAD = re.compile(rf"(?:have|haveI)\s+(?:(?P<name>{IDENT})\s*)?:\s*")
_INSTANCE_PREFIX = "inst"


@dataclass(frozen=True)
class Goal:
    """One goal of a proof state: its hypotheses (names and type, in the order Lean prints them) and its target.
    `let_bound` is set when a hypothesis carries a value (`x : ℕ := 3`), which a binder cannot say."""

    hypotheses: tuple[tuple[tuple[str, ...], str], ...]
    target: str
    let_bound: bool = False

    @property
    def is_assumption(self) -> bool:
        """The target is one of the hypotheses, up to layout: `assumption` closes it, it states nothing new."""
        target = layout_free(self.target)
        return any(layout_free(kind) == target for _, kind in self.hypotheses)


def read_goal(text: str) -> Goal | None:
    """A goal as the REPL prints it (a `sorries` entry's `goal`, or the goal of an `unsolved goals` error): lines of
    `names : type` (an indented line goes on the one before), a `case` tag, then `⊢ target`. None when it has no
    target."""
    lines: list[str] = []
    for line in text.splitlines():
        if line[:1].isspace() and lines:
            lines[-1] += " " + line.strip()
        elif line.strip():
            lines.append(line.strip())
    if lines and _CASE_TAG.match(lines[0]):
        lines = lines[1:]
    at = next((i for i, line in enumerate(lines) if line.startswith(TURNSTILE)), None)
    if at is None:
        return None
    hypotheses, let_bound = [], False
    for line in lines[:at]:
        m = _HYPOTHESIS.fullmatch(line)
        if m is None:
            return None
        kind = m.group("type")
        let_bound = let_bound or ":=" in outside_brackets(kind)
        hypotheses.append((tuple(m.group("names").split()), kind.strip()))
    target = " ".join([lines[at][len(TURNSTILE):].strip(), *lines[at + 1:]]).strip()
    return Goal(tuple(hypotheses), target, let_bound) if target else None


def unsolved_goals(message: str) -> list[str]:
    """The goals of an `unsolved goals` error message, one text each (Lean separates them by a blank line)."""
    head, _, rest = message.partition("\n")
    if head.strip() != "unsolved goals":
        return []
    return [block.strip("\n") for block in re.split(r"\n\s*\n", rest) if TURNSTILE in block]


def goal_theorem(goal: Goal, name: str) -> str:
    """The goal as a theorem named `name` with `sorry` for its proof: each hypothesis a binder (an instance one in
    brackets), names Lean made inaccessible given fresh ones, and the universe levels it mentions declared."""
    taken = identifiers(" ".join([goal.target, *(kind for _, kind in goal.hypotheses),
                                  *(n for names, _ in goal.hypotheses for n in names)]))
    fresh: dict[str, str] = {}

    def accessible(match: re.Match[str]) -> str:
        written = match.group(0)
        if written not in fresh:
            base, number = match.group(1), 1
            while f"{base}_{number}" in taken:
                number += 1
            fresh[written] = f"{base}_{number}"
            taken.add(fresh[written])
        return fresh[written]

    binders: list[str] = []
    for names, kind in goal.hypotheses:
        kind = _INACCESSIBLE_NAME.sub(accessible, kind)
        if all(n.startswith(_INSTANCE_PREFIX) and INACCESSIBLE in n for n in names):
            binders.extend(f"[{kind}]" for _ in names)
        else:
            binders.append(f"({' '.join(_INACCESSIBLE_NAME.sub(accessible, n) for n in names)} : {kind})")
    target = _INACCESSIBLE_NAME.sub(accessible, goal.target)
    levels = sorted({m.group(1) for m in re.finditer(rf"\b(?:Type|Sort)\s+({IDENT})", " ".join(binders + [target]))
                     if not m.group(1).startswith("_")})
    universe = f"universe {' '.join(levels)}\n\n" if levels else ""
    signature = " ".join([name, *binders])
    return f"{universe}theorem {signature} : {target} := by sorry"


def signature_hypotheses(signature: str) -> list[str]:
    """A declaration's leading binders as the hypothesis lines of its goal (`(x y : ℕ)` -> `x y : ℕ`, an anonymous
    instance `[Field K]` -> `inst✝ : Field K`), as the REPL prints them at the start of its proof."""
    groups, _ = leading_binders(signature)
    lines = []
    for group in groups:
        m = BINDER_GROUP.match(group)
        if m is not None:
            lines.append(f"{m.group('names')} : {normalize_space(group[m.end():-1])}")
        elif group.startswith("["):
            lines.append(f"{_INSTANCE_PREFIX}{INACCESSIBLE} : {normalize_space(group[1:-1])}")
    return lines


def sorry_goal(signature: str, before: str) -> str:
    """The goal a `sorry` stands for, as the REPL prints it, given the declaration's signature and its source from
    its name up to the `sorry`: the `have` it closes (`have h : T := by sorry`) with the hypotheses in scope (the
    binders and the `have`s finished before it), else the declaration's own type. Nested tactic blocks are read
    flat."""
    hypotheses = signature_hypotheses(signature)
    target = " ".join(signature_type(signature).split())
    proof_at = outside_brackets(scan_text(lex(before))).find(":=")
    proof_before = before[proof_at + 2:] if proof_at >= 0 else ""
    scan = scan_text(lex(proof_before))
    haves = [m for start, _ in find_tokens(scan, ("have", "haveI")) if (m := _HAVE_HEAD.match(scan, start))]
    for index, m in enumerate(haves):
        typed = scan[m.end():]
        assign = outside_brackets(typed).find(":=")
        if assign < 0:
            continue
        kind = " ".join(proof_before[m.end():m.end() + assign].split())
        after = scan[m.end() + assign + 2:].strip()
        if index == len(haves) - 1 and after in ("by", ""):
            return "\n".join([*hypotheses, f"{TURNSTILE} {kind}"])
        hypotheses.append(f"{m.group('name') or 'this'} : {kind}")
    return "\n".join([*hypotheses, f"{TURNSTILE} {target}"])
