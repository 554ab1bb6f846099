"""`read_commands` on syntax quotations and name literals, and its theorem count checked against an independent
count over every Lean file of the fixtures.

Mathlib's metaprograms hold Lean syntax as data: `` `(command| $dm:declModifiers theorem $id:declId ...) ``,
`` [``Lean.Parser.Command.declaration, `lemma] ``. Lean never starts a command inside them, so neither may the
reader; before, it reported nameless theorems there and cut the declaration around them in two.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from lean_pool.lean_source import Command, lex, read_commands
from tests.sweeps import SAMPLE_STEP, files_of

THEOREM_KINDS = ("theorem", "lemma")


def _theorem_commands(text: str) -> list[Command]:
    return [command for command in read_commands(text) if command.kind in THEOREM_KINDS]


# ---------------------------------------------------------------------------------------------------------
# Regression cases from real Mathlib (Apache-2.0): the three files where the reader went wrong. None is in the
# fixture sample (it holds Order, Logic, Data and Algebra/Group only), so each case keeps the declaration around
# the quotation as the file has it, trimmed to what the reader looks at.
# ---------------------------------------------------------------------------------------------------------

# Mathlib/Tactic/DeprecateTo.lean: `renameTheorem` matches `theorem` and `lemma` commands by quotation.
DEPRECATE_TO = '''namespace Mathlib.Tactic.DeprecateTo

open Lean Elab Term Command

/-- Produce the syntax for the command `@[deprecated (since := "YYYY-MM-DD")] alias n := id`. -/
def mkDeprecationStx (id : TSyntax `ident) (n : Name) (dat : Option String := none) :
    CommandElabM (TSyntax `command) := do
  let dat := dat.getD "2024-01-01"
  let nd := mkNode `str #[mkAtom ("\\"" ++ dat ++ "\\"")]
  `(command| @[deprecated (since := $nd)] alias $(mkIdent n) := $id)

variable (newName : TSyntax `ident) in
/--
If the input command is a `theorem` or a `lemma`, then it replaces the name of the
resulting declaration with `newName`.
-/
def renameTheorem : TSyntax `command → TSyntax `Lean.Parser.Command.declId × TSyntax `command
  | `(command| $dm:declModifiers theorem $id:declId $d:declSig $v:declVal) => Unhygienic.run do
    return (id, ← `($dm:declModifiers theorem $newName:declId $d:declSig $v:declVal))
  | `(command| $dm:declModifiers lemma $id:declId $d:declSig $v:declVal) => Unhygienic.run do
    return (id, ← `($dm:declModifiers lemma $newName:declId $d:declSig $v:declVal))
  | a => (default, a)

end Mathlib.Tactic.DeprecateTo
'''

# Mathlib/Tactic/Linter/DocPrime.lean: the linter tests a command's kind against a list of name literals.
DOC_PRIME = '''namespace Mathlib.Linter.DocPrime

@[inherit_doc Mathlib.Linter.linter.docPrime]
def docPrimeLinter : Linter where run := withSetOptionIn fun stx ↦ do
  unless [``Lean.Parser.Command.declaration, `lemma].contains stx.getKind do return
  -- ignore private declarations
  if (stx.find? (·.isOfKind ``Lean.Parser.Command.private)).isSome then return
  -- ignore examples
  if (stx.find? (·.isOfKind ``Lean.Parser.Command.example)).isSome then return
  let declId :=
    if stx[1].isOfKind ``Lean.Parser.Command.instance then stx[1][3][0] else stx[1][1]
  let declName : Name :=
    if let `_root_ :: rest := declId[0].getId.components then
      rest.foldl (· ++ ·) default
    else (← getCurrNamespace) ++ declId[0].getId
  if declName.toString.back == '\\'' then
    Linter.logLint linter.docPrime declId m!"`{declName}` is missing a doc-string"

initialize addLinter docPrimeLinter

end Mathlib.Linter.DocPrime
'''

# Mathlib/Util/CountHeartbeats.lean: the same list of name literals, and a command quotation run on `stx`.
COUNT_HEARTBEATS = '''namespace Mathlib.Linter.CountHeartbeats

@[inherit_doc Mathlib.Linter.linter.countHeartbeats]
def countHeartbeatsLinter : Linter where run := withSetOptionIn fun stx ↦ do
  let mut msgs := #[]
  if [``Lean.Parser.Command.declaration, `lemma].contains stx.getKind then
    let s ← get
    elabCommand (← `(command| #count_heartbeats in $(⟨stx⟩)))
    msgs := (← get).messages.unreported.toArray.filter (·.severity != .error)
    set s
  let (ref, declStr) := match stx.find? (·.isOfKind ``Parser.Command.declId) with
    | some decl => (decl, s!"'{decl[0].getId}' ")
    | none => (stx, "")
  for msg in msgs do logInfoAt ref m!"{declStr}{← msg.toString}"

initialize addLinter countHeartbeatsLinter

end Mathlib.Linter.CountHeartbeats
'''


@pytest.mark.parametrize(
    ("source", "declaration", "quoted", "definitions"),
    [
        (DEPRECATE_TO, "Mathlib.Tactic.DeprecateTo.renameTheorem", "$dm:declModifiers lemma $newName", 2),
        (DOC_PRIME, "Mathlib.Linter.DocPrime.docPrimeLinter", "`lemma].contains", 1),
        (COUNT_HEARTBEATS, "Mathlib.Linter.CountHeartbeats.countHeartbeatsLinter",
         "#count_heartbeats in $(⟨stx⟩)", 1),
    ],
    ids=["DeprecateTo", "DocPrime", "CountHeartbeats"],
)
def test_quotations_and_name_literals_in_mathlib_metaprograms_start_no_command(
    source: str, declaration: str, quoted: str, definitions: int
) -> None:
    commands = read_commands(source)
    assert not _theorem_commands(source) and independent_theorem_count(source) == 0
    assert all(command.name for command in commands if command.kind in ("def", "namespace", "end"))
    assert len([command for command in commands if command.kind == "def"]) == definitions
    [enclosing] = [command for command in commands if command.name == declaration]
    assert quoted in enclosing.text
    after = source.index(quoted) + len(quoted)
    assert enclosing.start < source.index(quoted) and after <= enclosing.end
    assert [command.kind for command in commands if command.start > enclosing.start][:1] in (["initialize"], ["end"])


# Mathlib/Tactic/Lemma.lean: the parser of `lemma` is named by the word itself, which is no keyword yet there.
LEMMA_SYNTAX = '''open Lean

/-- `lemma` means the same as `theorem`. It is used to denote "less important" theorems -/
syntax (name := lemma) declModifiers
  group("lemma " declId ppIndent(declSig) declVal) : command

/-- Implementation of the `lemma` command, by macro expansion to `theorem`. -/
@[macro «lemma»] def expandLemma : Macro := fun stx =>
  let stx := stx.modifyArg 1 fun stx =>
    let stx := stx.modifyArg 0 (mkAtomFrom · "theorem" (canonical := true))
    stx.setKind ``Parser.Command.theorem
  pure <| stx.setKind ``Parser.Command.declaration
'''


def test_a_keyword_right_after_a_bracket_or_assignment_names_something_and_starts_no_command() -> None:
    commands = read_commands(LEMMA_SYNTAX)
    assert [(command.kind, command.name) for command in commands] == [
        ("open", ""), ("syntax", ""), ("def", "expandLemma")
    ]
    assert commands[1].text.endswith(": command") and independent_theorem_count(LEMMA_SYNTAX) == 0


@pytest.mark.parametrize(
    "quotation",
    [
        "`(theorem foo : True := trivial)",
        "`(command|\ntheorem foo : True := trivial)",
        "``(lemma foo (h : (1 = 1)) : True := trivial)",
        "`[command| lemma foo : [1] = [1] := rfl]",
        "`(command| $[$doc?:docComment]? @[simp] theorem $id:ident : $(← `(term| (True))) := trivial)",
        '`(command| set_option x ")" in\n/-- doc ( -/ theorem $id : True := trivial)',
        "`(command| namespace $n end $n)",
        "`theorem",
        "``lemma",
        "`Lean.Parser.Command.theorem",
        "`«theorem»",
    ],
)
def test_nothing_quoted_starts_a_command(quotation: str) -> None:
    source = f"def f : MetaM Syntax := do\n  let x := 1\n  return {quotation}\n\ntheorem after : True := trivial\n"
    commands = read_commands(source)
    assert [(command.kind, command.name) for command in commands] == [("def", "f"), ("theorem", "after")]
    assert commands[0].text == source[: source.index("\n\ntheorem after")]


def test_an_unclosed_quotation_is_a_problem_of_the_lexer() -> None:
    assert lex("def f := `(theorem x").problems == ("syntax quotation at offset 9 is not closed",)
    assert not lex("def f := `(a (b) `(c) $(d)) `n ``m").problems


# ---------------------------------------------------------------------------------------------------------
# The independent count: a small scanner of its own (no `lean_source.lexer`) blanks comments, string and character
# literals, syntax quotations, name literals and `@[...]` attributes; then a theorem is a line whose code
# opens, after modifiers and `... in` prefixes, with the keyword `theorem` or `lemma`.
# ---------------------------------------------------------------------------------------------------------

_COUNTED_LINE = re.compile(
    r"[ \t]*(?:(?:open|set_option|variable|include|omit)\b[^\n]*?\bin[ \t]+)*"
    r"(?:(?:private|protected|noncomputable|nonrec|unsafe|partial|scoped|local)[ \t]+)*"
    r"(?:theorem|lemma)(?![\w'!?])"
)
_IDENTIFIER_CHAR = re.compile(r"[\w'!?.]")
# Length of a character literal's escape, backslash included, by the letter after the backslash (`\x41`,
# `\u03b1`); any other escape (`\n`, `\'`) is two characters.
_ESCAPE_LENGTH = {"x": 4, "u": 6}
_SIMPLE_ESCAPE_LENGTH = 2
# What the fixtures held when this test was written (Mathlib sample, MathlibLemma, miniF2F, REPL transcripts):
# every file is read, so fewer means files went missing, not that the reader got better.
FIXTURE_LEAN_FILES = 1_493
FIXTURE_THEOREMS = 24_473
# The theorems of every SAMPLE_STEP-th of those files (tests/sweeps.py), the fast tier's sample of them.
SAMPLED_FIXTURE_THEOREMS = 967


class _Blanker:
    """Walks the source once, keeping code and blanking (newlines kept) comments, literals, quotations and
    attributes; it knows nothing of commands, only where Lean's comments, literals and quotations end."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.i = 0

    def _blank_to(self, end: int) -> str:
        piece = re.sub(r"[^\n]", " ", self.source[self.i : end])
        self.i = end
        return piece

    def _comment_end(self) -> int:
        if self.source.startswith("--", self.i):
            end = self.source.find("\n", self.i)
            return len(self.source) if end < 0 else end
        depth, j = 0, self.i
        while j < len(self.source):
            if self.source.startswith("/-", j):
                depth, j = depth + 1, j + 2
            elif self.source.startswith("-/", j):
                depth, j = depth - 1, j + 2
                if depth == 0:
                    return j
            else:
                j += 1
        return j

    def _string_end(self) -> int:
        j = self.i + 1
        while j < len(self.source) and self.source[j] != '"':
            j += 2 if self.source[j] == "\\" else 1
        return j + 1

    def _char_end(self) -> int:
        """End of a character literal starting here, or -1 when this `'` is a prime of a name."""
        if self.i > 0 and _IDENTIFIER_CHAR.match(self.source[self.i - 1]):
            return -1
        body = self.source[self.i + 1 : self.i + 2]
        length = _ESCAPE_LENGTH.get(self.source[self.i + 2 : self.i + 3], _SIMPLE_ESCAPE_LENGTH) if body == "\\" else 1
        end = self.i + 1 + length
        return end + 1 if self.source[end : end + 1] == "'" else -1

    def _bracketed_end(self, open_at: int) -> int:
        """End of the bracket opened at `open_at`, stepping over what is inside the way `_step` reads it (so
        a bracket in a comment, a literal or a nested quotation does not count)."""
        opener = self.source[open_at]
        closer = {"(": ")", "[": "]"}[opener]
        start, self.i, depth = self.i, open_at + 1, 1
        while self.i < len(self.source) and depth:
            piece = self._step()
            depth += (piece == opener) - (piece == closer)
        end, self.i = self.i, start
        return end

    def _step(self) -> str:
        """Read what starts here and return it as it is kept: code as written, the rest blanked."""
        s, i = self.source, self.i
        if s.startswith(("--", "/-"), i):
            return self._blank_to(self._comment_end())
        if s[i] == '"':
            return self._blank_to(self._string_end())
        if s[i] == "'" and self._char_end() > 0:
            return self._blank_to(self._char_end())
        if s.startswith("@[", i):
            return self._blank_to(self._bracketed_end(i + 1))
        if s[i] == "`":
            ticks = 2 if s.startswith("``", i) else 1
            if s[i + ticks : i + ticks + 1] in ("(", "["):
                return self._blank_to(self._bracketed_end(i + ticks))
            end = i + ticks
            while end < len(s) and (_IDENTIFIER_CHAR.match(s[end]) or s[end] == "«"):
                close = s.find("»", end) if s[end] == "«" else end
                end = len(s) if close < 0 else close + 1
            return self._blank_to(end)
        self.i += 1
        return s[i]

    def run(self) -> str:
        pieces = []
        while self.i < len(self.source):
            pieces.append(self._step())
        return "".join(pieces)


def independent_theorem_count(source: str) -> int:
    """How many `theorem`/`lemma` declarations `source` has, counted line by line on its blanked code."""
    return sum(1 for line in _Blanker(source).run().split("\n") if _COUNTED_LINE.match(line))


def test_the_independent_counter_sees_through_what_it_should() -> None:
    source = '''/-- `theorem` in a doc -/ @[simp,
  norm_cast] protected theorem a : True := trivial
open Foo in lemma b : True := trivial
/- theorem c /- nested -/ theorem d -/ def s := "\\" theorem e"
def q := `(command|
theorem f : True := trivial)
def n := [`lemma, ``theorem]
def c := '"'
  theorem g : True := trivial
'''
    assert independent_theorem_count(source) == 3
    assert len(_theorem_commands(source)) == 3


@pytest.mark.parametrize(("step", "theorems_at_least"), [
    pytest.param(SAMPLE_STEP, SAMPLED_FIXTURE_THEOREMS, id=f"every {SAMPLE_STEP}th file"),
    pytest.param(1, FIXTURE_THEOREMS, id="every file", marks=pytest.mark.sweep),
])
def test_read_commands_counts_every_theorem_of_the_fixtures_as_the_independent_counter_does(
        shared_dir: Path, step: int, theorems_at_least: int) -> None:
    mismatches: list[str] = []
    assert len(files_of(shared_dir / "fixtures", 1)) >= FIXTURE_LEAN_FILES
    paths = files_of(shared_dir / "fixtures", step)
    theorems = 0
    for path in paths:
        source = path.read_text(encoding="utf-8")
        found = _theorem_commands(source)
        expected = independent_theorem_count(source)
        if len(found) != expected or not all(command.name for command in found):
            mismatches.append(f"{path}: read_commands {len(found)}, independent {expected}")
        theorems += len(found)
    assert not mismatches, "\n".join(mismatches)
    assert theorems >= theorems_at_least
