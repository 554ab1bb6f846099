"""Every rule that decides whether Lean code is verified, refused or failed, in one place.

"Verified" means: the Lean kernel accepted a sorry-free proof of exactly the statement asked,
using no axiom beyond the standard three. These functions are pure (text and answer dicts in,
verdicts out) so that the rules can be read and tested apart from the processes that run Lean.

Checks happen in two phases. Before Lean: `refusal_reasons` rejects code that could run programs
or change the checker, and in proof mode `precheck` also rejects textual `sorry`/`admit`, a
missing target, a changed statement and a changed context (`context_reasons`). After Lean: `statement_verdict` / `proof_verdict` read
the REPL's answer and the answers to `#print axioms NAME`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from lean_pool.lean_lexer import COMMENTS_AND_LITERALS, NOT_CODE, code_only, lex
from lean_pool.lean_source import (DECLARATION_KINDS, THEOREM_KINDS, Command, attribute_names, identifiers, layout_free,
                                   read_commands)

# The axioms every Mathlib proof may use; anything else (sorryAx, Lean.ofReduceBool, a user axiom)
# means the kernel did not check a complete proof from the standard foundations.
ALLOWED_AXIOMS = frozenset({"propext", "Classical.choice", "Quot.sound"})

STATUSES = ("passed", "sorry", "error", "refused", "timeout", "crashed", "infra_error")


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
# Refusals: checked on the text before anything reaches Lean.
# ---------------------------------------------------------------------------------------------

# Characters that continue a Lean identifier: a keyword followed by one of these is part of a name.
_ID = r"[\w'!?\u2080-\u209c\u1d62-\u1d6a]"
_ID_CHAR = re.compile(_ID)
_AFTER = rf"(?!{_ID})"


def _word(word: str) -> str:
    return re.escape(word) + _AFTER


def _glued_to_name(text: str, start: int) -> bool:
    """True when the word at `start` continues an identifier (`my_axiom`, `Foo.axiom`, `«x».axiom`)
    and so is no keyword. A number or a lone dot does not glue: Lean reads `2axiom` as `2` then
    `axiom`, and after the error in `(.axiom` it resumes parsing at `axiom`."""
    j = start
    while j > 0:
        c = text[j - 1]
        if c == "»":
            j = text.rfind("«", 0, j - 1)
            if j < 0:
                return False
        elif _ID_CHAR.match(c) or c == ".":
            j -= 1
        else:
            break
    run = text[j:start]
    return bool(run) and (run[0] == "«" or run[0] == "_" or run[0].isalpha())


def _token_matches(pattern: str, text: str) -> list[re.Match[str]]:
    """Matches of `pattern` that Lean would read as a token of their own. Only a match starting
    with a letter can be glued to a name: `#eval`, `@[`, `+native` always stand alone."""
    return [
        m
        for m in re.finditer(pattern, text)
        if not (text[m.start()].isalpha() or text[m.start()] == "_") or not _glued_to_name(text, m.start())
    ]


# (pattern, reason). Each entry is one construct and why a proof has no business using it.
_REFUSED_TEXT: tuple[tuple[str, str], ...] = (
    # No end boundary for `#` commands: Lean reads `#evalfoo` as `#eval foo`.
    ("#eval", "`#eval` runs programs while the file is checked"),
    ("#exit", "`#exit` stops checking, so what follows is never checked"),
    ("#guard_msgs", "`#guard_msgs` can swallow messages, including the sorry warning"),
    ("#guard(?!_msgs)", "`#guard` evaluates programs while the file is checked"),
    (_word("run_cmd"), "`run_cmd` runs a metaprogram that can change the environment"),
    (_word("run_tac"), "`run_tac` runs a metaprogram that can close goals without a proof term check"),
    (_word("run_elab"), "`run_elab` runs a metaprogram while the file is checked"),
    (_word("run_meta"), "`run_meta` runs a metaprogram while the file is checked"),
    (_word("elab"), "`elab` defines new elaboration code that runs while the file is checked"),
    (_word("elab_rules"), "`elab_rules` defines new elaboration code that runs while the file is checked"),
    (_word("macro"), "`macro` can rewrite any later text, including the statement"),
    (_word("macro_rules"), "`macro_rules` can rewrite any later text, including the statement"),
    (_word("syntax"), "`syntax` changes how later text, including the statement, is parsed"),
    (_word("declare_syntax_cat"), "`declare_syntax_cat` changes how later text is parsed"),
    (_word("notation"), "`notation` can redefine what the statement's symbols mean"),
    (_word("notation3"), "`notation3` can redefine what the statement's symbols mean"),
    (_word("infix"), "`infix` can redefine what the statement's operators mean"),
    (_word("infixl"), "`infixl` can redefine what the statement's operators mean"),
    (_word("infixr"), "`infixr` can redefine what the statement's operators mean"),
    (_word("prefix"), "`prefix` can redefine what the statement's operators mean"),
    (_word("postfix"), "`postfix` can redefine what the statement's operators mean"),
    (_word("simproc"), "`simproc` registers code that `simp` runs while the file is checked"),
    (_word("dsimproc"), "`dsimproc` registers code that `simp` runs while the file is checked"),
    (_word("initialize"), "`initialize` runs IO actions when the environment is loaded"),
    (_word("builtin_initialize"), "`builtin_initialize` runs IO actions when the environment is loaded"),
    (_word("unsafe"), "`unsafe` code escapes the type system in compiled code"),
    (_word("axiom"), "`axiom` assumes a statement without proof"),
    (_word("native_decide"), "`native_decide` trusts the compiler instead of the kernel (Lean.ofReduceBool)"),
    (r"\+native" + _AFTER, "`decide +native` trusts the compiler instead of the kernel"),
    (r"native\s*:=\s*true" + _AFTER, "`native := true` trusts the compiler instead of the kernel"),
)

# Names, not keywords: refused wherever they appear, even as the last part of a longer name.
_REFUSED_NAMES: tuple[tuple[str, str], ...] = (
    (r"(?<!\w)(?:ofReduceBool|ofReduceNat|reduceBool|reduceNat|trustCompiler)" + _AFTER,
     "`Lean.ofReduceBool` and friends make the kernel trust compiled code"),
)

# Attributes whose effect is to run user code while checking, or to swap the code that runs.
_REFUSED_ATTRIBUTES: dict[str, str] = {
    "extern": "`@[extern]` replaces a definition's code with foreign code",
    "implemented_by": "`@[implemented_by]` replaces a definition's code with other code",
    "csimp": "`@[csimp]` replaces a definition's code with other code",
    "init": "`@[init]` runs IO actions when the environment is loaded",
    "tactic": "`@[tactic]` installs user code as a tactic that runs while the file is checked",
    "command_elab": "`@[command_elab]` installs user code that runs while the file is checked",
    "term_elab": "`@[term_elab]` installs user code that runs while the file is checked",
    "macro": "`@[macro]` installs user code that rewrites later text",
    "delab": "`@[delab]` installs user code that runs while messages are printed",
    "app_unexpander": "`@[app_unexpander]` installs user code that runs while messages are printed",
    "simproc": "`@[simproc]` registers code that `simp` runs while the file is checked",
    "norm_num": "`@[norm_num]` registers code that `norm_num` runs while the file is checked",
    "positivity": "`@[positivity]` registers code that `positivity` runs while the file is checked",
}
_ATTRIBUTE_BLOCK = r"@\[|attribute\s*\["
_BUILTIN_ATTRIBUTE_REASON = "`@[builtin_...]` attributes install code into Lean itself"

_SET_OPTION = _word("set_option") + r"\s+([^\s]+)"
_REFUSED_OPTION_PREFIXES: tuple[tuple[str, str], ...] = (
    ("debug.", "debug options can switch off checks (e.g. `debug.skipKernelTC` skips the kernel)"),
    ("warn.sorry", "`warn.sorry` hides the warning that a declaration uses `sorry`"),
)

_SORRY_TEXT: tuple[tuple[str, str], ...] = (
    (_word("sorry"), "`sorry` leaves a goal unproved"),
    (_word("admit"), "`admit` leaves a goal unproved"),
)
_SORRY_NAME = (r"(?<!\w)sorryAx" + _AFTER, "`sorryAx` is the axiom behind `sorry`")


def _line_of(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def _bracket_body(text: str, open_at: int) -> str:
    """The text inside the `[` at `open_at` up to its matching `]` (to the end if unmatched)."""
    depth = 0
    for i in range(open_at, len(text)):
        if text[i] == "[":
            depth += 1
        elif text[i] == "]":
            depth -= 1
            if depth == 0:
                return text[open_at + 1 : i]
    return text[open_at + 1 :]


def _attribute_names(masked: str) -> list[tuple[str, int]]:
    """Names of the attributes in every `@[...]` and `attribute [...]`, with their offsets."""
    return [
        (name, m.start())
        for m in _token_matches(_ATTRIBUTE_BLOCK, masked)
        for name in attribute_names(_bracket_body(masked, masked.index("[", m.start())))
    ]


def refusal_reasons(code: str) -> list[str]:
    """Why `code` must not reach Lean at all (empty: nothing refused).

    Refused: constructs that run programs at check time, change the parser or the checker, trust
    the compiler, or assume statements (`axiom`); also text our lexer cannot read the way Lean
    does. Comments, string and character literals never trigger a refusal. `sorry` is not refused
    here: statements legitimately contain it (see `textual_sorry_reasons` for proofs).

    Deliberately allowed: `#print` and `#check` (they only print; the pool runs its own
    `#print axioms` as a separate command), `opaque` and `partial def` (the kernel gets an opaque
    constant of an inhabited type: nothing new can be proved), `decide` and `decide +kernel`
    (checked by the kernel), `attribute [simp]` and friends (they only guide tactics whose result
    the kernel checks), `set_option maxHeartbeats` and other non-debug options.
    """
    lexed = lex(code)
    reasons = [f"unreadable text: {problem}; Lean might read it as code" for problem in lexed.problems]
    masked = lexed.blanked(NOT_CODE)
    # Attribute and option names may be written `«escaped»`: read them with those kept.
    named = lexed.blanked(COMMENTS_AND_LITERALS)
    for pattern, reason in _REFUSED_TEXT:
        found = _token_matches(pattern, masked)
        if found:
            reasons.append(f"line {_line_of(masked, found[0].start())}: {reason}")
    for pattern, reason in _REFUSED_NAMES:
        m = re.search(pattern, masked)
        if m:
            reasons.append(f"line {_line_of(masked, m.start())}: {reason}")
    for name, offset in _attribute_names(named):
        reason = _REFUSED_ATTRIBUTES.get(name)
        if reason is None and name.startswith("builtin_"):
            reason = _BUILTIN_ATTRIBUTE_REASON
        if reason:
            reasons.append(f"line {_line_of(masked, offset)}: {reason}")
    for m in _token_matches(_SET_OPTION, named):
        option = m.group(1).replace("«", "").replace("»", "")
        for prefix, reason in _REFUSED_OPTION_PREFIXES:
            if option.startswith(prefix):
                reasons.append(f"line {_line_of(masked, m.start())}: `set_option {option}`: {reason}")
    return list(dict.fromkeys(reasons))


def textual_sorry_reasons(code: str) -> list[str]:
    """Where a proof says `sorry`, `admit` or `sorryAx` outside comments and strings.

    Kept apart from `refusal_reasons` because statements (the formalize stage) are written with
    `sorry` on purpose; proofs are checked with both. Lean would report these too; catching them in
    the text saves a Lean run and does not depend on how a Lean version words its warning.
    """
    masked = code_only(code)
    reasons = []
    for pattern, reason in _SORRY_TEXT:
        found = _token_matches(pattern, masked)
        if found:
            reasons.append(f"line {_line_of(masked, found[0].start())}: {reason}")
    pattern, reason = _SORRY_NAME
    m = re.search(pattern, masked)
    if m:
        reasons.append(f"line {_line_of(masked, m.start())}: {reason}")
    return reasons


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
    reference also makes but with other text, new instances, or new declarations named like an
    identifier of the statement (which could shadow it). `open` is not compared: proofs add opens.
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
        return Verdict("sorry", True, tuple(sorries))
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
        return Verdict("sorry", False, reasons)
    return Verdict("passed", True)


def precheck(code: str, mode: str, reference: str | None = None) -> Verdict | None:
    """The verdict the text alone decides, or None when Lean must be asked.

    Both modes refuse what `refusal_reasons` finds. In "proof" mode also: textual sorry (status
    "sorry"), and given a reference statement, a missing target, a changed statement or a context
    that changes its meaning ("error").
    """
    refused = refusal_reasons(code)
    if refused:
        return Verdict("refused", False, tuple(refused))
    if mode == "statement":
        return None
    if mode != "proof":
        raise ValueError(f"mode must be 'proof' or 'statement', not {mode!r}")
    sorries = textual_sorry_reasons(code)
    if sorries:
        return Verdict("sorry", False, tuple(sorries))
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
