"""The one Lean reader: commands, names, signatures and scopes, on edge cases and on real Mathlib files."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from lean_pool.lean_source import (
    code_tokens,
    find_tokens,
    leading_imports,
    notation_atoms,
    read_commands,
    signature_type,
    term_atoms,
    unread_command_lines,
    without_imports,
)
from operators.split import split_lemmas
from tests.sweeps import EVERY_FILE, SAMPLED, files_of

# A file of the Mathlib sample for each command the reader leaves unread, beside the sampled ones.
UNREAD_COMMAND_FILES = ("Mathlib/Algebra/Group/Defs.lean", "Mathlib/Algebra/Group/Hom/Basic.lean",
                        "Mathlib/Data/Finset/Attr.lean", "Mathlib/Data/Nat/BinaryRec.lean",
                        "Mathlib/Data/Set/Operations.lean", "Mathlib/Order/Defs/Unbundled.lean")


def _theorems(text: str) -> list[tuple[str, str]]:
    return [(c.name, c.signature) for c in read_commands(text) if c.kind in ("theorem", "lemma")]


def test_a_let_inside_the_type_belongs_to_the_signature() -> None:
    assert _theorems("theorem foo (n : Nat) : let m := n + 0; m = n := by simp") == [
        ("foo", "(n : Nat) : let m := n + 0; m = n")
    ]


def test_a_character_literal_quote_does_not_swallow_what_follows() -> None:
    answer = "def c : Char := '\"'\ntheorem a : True := trivial\ntheorem b : 1 = 1 := rfl\n"
    assert [name for name, _ in _theorems(answer)] == ["a", "b"]
    assert split_lemmas(answer) == ["theorem a : True := trivial\n", "theorem b : 1 = 1 := rfl\n"]


def test_names_follow_namespaces_root_escapes_and_dotted_ends() -> None:
    text = """namespace A.B
theorem x : True := trivial
theorem _root_.top : True := trivial
theorem «weird name» : True := trivial
end B
theorem y : True := trivial
end A
theorem z : True := trivial
"""
    assert [c.name for c in read_commands(text) if c.kind == "theorem"] == ["A.B.x", "top", "A.B.weird name", "A.y",
                                                                            "z"]


def test_prefixes_belong_to_the_command_they_precede() -> None:
    text = """/-- Doc. -/
@[simp, norm_cast]
private theorem t (n : Nat) : n = n := rfl

open Real in
set_option maxHeartbeats 400000 in
lemma u : True := trivial

attribute [instance] foo
"""
    t, u, attribute = read_commands(text)
    assert (t.kind, t.docstring, t.attributes, t.modifiers, t.line) == ("theorem", "Doc.", ("simp", "norm_cast"),
                                                                        ("private",), 3)
    assert t.text.startswith("/-- Doc. -/") and t.text.endswith(":= rfl")
    assert (u.kind, u.prefixes) == ("lemma", ("open Real in", "set_option maxHeartbeats 400000 in"))
    assert u.text.startswith("open Real in\n")
    assert (attribute.kind, attribute.attributes) == ("attribute", ("instance",))


def test_commands_inside_proofs_terms_comments_and_strings_are_not_commands() -> None:
    text = """theorem t (s : Finset ℕ) : #s = #s := by
  open Finset in
  set_option maxRecDepth 1000 in
  simp -- theorem not_here : False
  /- lemma nor_here : False := sorry -/
  exact (show "lemma in a string" = "lemma in a string" from rfl) ▸ rfl
structure P where
  /-- a field's docstring is no command -/
  x : Nat
deriving Repr
"""
    assert [c.kind for c in read_commands(text)] == ["theorem", "structure"]


def test_scopes_carry_their_context_and_close_like_lean() -> None:
    text = """namespace N
variable {α : Type*}
noncomputable section S
open Real
omit [h] in
theorem t : True := trivial
end S
theorem u : True := trivial
end N
"""
    commands = {c.name: c for c in read_commands(text) if c.kind == "theorem"}
    t, u = commands["N.t"], commands["N.u"]
    assert [s.kind for s in t.scopes] == ["file", "namespace", "section"]
    assert [c.text for c in t.context()] == ["variable {α : Type*}", "open Real"]
    assert t.prefixes == ("omit [h] in",)
    assert [c.text for c in u.context()] == ["variable {α : Type*}"]
    assert t.scopes[2].opener == "noncomputable section S" and t.scopes[2].closer == "end S"


def test_a_library_note_keeps_its_docstring_and_escaped_scope_names_stay_escaped() -> None:
    text = """namespace «Prop»
library_note "a note"/--
The note's text, with `theorem` in it.
-/

theorem t : True := trivial
end «Prop»
"""
    note, t = read_commands(text)[1:3]
    assert (note.kind, t.kind, t.name, t.docstring) == ("library_note", "theorem", "Prop.t", "")
    assert t.text == "theorem t : True := trivial" and t.scopes[1].closer == "end «Prop»"


def test_equations_constructors_and_absolute_values_end_signatures_where_lean_does() -> None:
    text = """def f : ℕ → ℕ
  | 0 => 1
  | n + 1 => calc n + 1 = n + 1 := rfl
inductive T : Type
  | leaf : T
theorem abs_nonneg' (x : ℝ) :
    |x| ≥ 0 := by sorry
"""
    signatures = [c.signature for c in read_commands(text)]
    assert signatures == [": ℕ → ℕ", ": Type", "(x : ℝ) : |x| ≥ 0"]
    assert signature_type(signatures[2]) == "|x| ≥ 0"


def test_unbalanced_signatures_are_marked_not_raised() -> None:
    (command,) = read_commands("theorem broken (h : (1 = 1) : True := trivial")
    assert not command.balanced


def test_leading_imports_skip_plain_comments_only() -> None:
    assert leading_imports("/- c -/ import A -- x\nimport B.C\n/-- doc -/ theorem t") == (["A", "B.C"], 33)
    assert leading_imports("import A\n/- unterminated") == (["A"], 9)


def test_without_imports_keeps_the_comments_a_model_wrote_above_its_lemma() -> None:
    code = "import Mathlib -- everything\nimport Aesop\n\n-- 32. the note\nlemma x : True := trivial\n"
    assert without_imports(code) == (["Mathlib", "Aesop"], "\n\n\n-- 32. the note\nlemma x : True := trivial\n")


def test_find_tokens_skips_comments_strings_and_longer_names() -> None:
    text = 'theorem t : x = "sorry" := by sorry -- sorry\nexample : sorry_free = 1 := admit'
    assert [text[a:b] for a, b in find_tokens(text, ("sorry", "admit"))] == ["sorry", "admit"]


_DECLARATION_LINE = re.compile(
    r"^\s*(?:@\[[^\n]*?\]\s*)?(?:(?:private|protected|noncomputable|nonrec|scoped|local)\s+)*(?:theorem|lemma)\s"
)


def _count_theorem_lines(source: str) -> int:
    """An independent count: lines that open with `theorem`/`lemma` outside block comments, tracking the
    comment depth line by line (Mathlib writes one declaration per line start)."""
    depth = count = 0
    for line in source.split("\n"):
        if depth == 0 and _DECLARATION_LINE.match(line):
            count += 1
        code = re.sub(r"(?<!/)--.*$", "", line) if depth == 0 else line
        depth = max(0, depth + code.count("/-") - code.count("-/"))
    return count


@pytest.mark.parametrize("step", [SAMPLED, EVERY_FILE])
def test_every_theorem_and_lemma_of_the_mathlib_sample_is_found(mathlib_sample_dir: Path, step: int) -> None:
    assert len(files_of(mathlib_sample_dir, 1)) == 601
    files = files_of(mathlib_sample_dir, step)
    found = expected = 0
    for path in files:
        source = path.read_text(encoding="utf-8")
        commands = read_commands(source)
        theorems = [c for c in commands if c.kind in ("theorem", "lemma")]
        assert len(theorems) == _count_theorem_lines(source), path
        assert all(c.name and source[c.start : c.end] == c.text for c in theorems), path
        found += len(theorems)
        expected += source.count("\ntheorem ") + source.count("\nlemma ")
    assert found >= expected > 20_000 // step


@pytest.mark.parametrize("text", ["", "theorem", "/-", "namespace", "end end end", "@[", "open X in", "«",
                                  "def f :=\n  |"])
def test_fragments_never_raise(text: str) -> None:
    read_commands(text)


def test_code_tokens_read_names_whole_and_skip_comments_and_strings() -> None:
    code = 'theorem t : Foo.axiom = «Lean».Elab.x := eval% 2 -- run_cmd\n#evalIO.println "by_elab" n%2 (.run_cmd 2axiom'
    tokens = [(t.text, t.kind) for t in code_tokens(code)]
    assert ("Foo.axiom", "name") in tokens and ("axiom", "name") in tokens  # the second from `2axiom`
    assert ("«Lean».Elab.x", "name") in tokens and ("eval%", "percent") in tokens and ("n%", "percent") in tokens
    assert ("#eval", "hash") in tokens and ("IO.println", "name") in tokens and ("run_cmd", "name") in tokens
    assert ("by_elab", "name") not in tokens
    assert [t.line for t in code_tokens(code) if t.text == "run_cmd"] == [2]
    assert next(t for t in code_tokens(code) if t.text == "«Lean».Elab.x").plain == "Lean.Elab.x"


@pytest.mark.parametrize("step", [SAMPLED, EVERY_FILE])
@pytest.mark.slow
def test_unread_command_lines_find_the_commands_this_reader_does_not_know(mathlib_sample_dir: Path,
                                                                       mathliblemma_dir: Path, step: int) -> None:
    files = files_of(mathlib_sample_dir, step, also=UNREAD_COMMAND_FILES)
    found = {word for path in files for _, word in unread_command_lines(path.read_text())}
    assert found == {"initialize_simps_projections", "compile_def%", "extend_docs", "assert_not_imported", "unseal",
                     "declare_aesop_rule_sets"}
    assert not any(unread_command_lines(path.read_text()) for path in files_of(mathliblemma_dir, step))


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        ("theorem t : True :=\ntrivial\nunif_hint foo", [(3, "unif_hint")]),
        ("theorem t : True := by\nsimp\n", []),
        ("def f : ℕ → ℕ\n| 0 => 0\n| n + 1 => f n\ntermination_by n => n\n", []),
        ("theorem t : True := trivial\ncompile_def% f\n", [(2, "compile_def%")]),
        ("theorem t : True := trivial\nFoo.bar\n", []),
    ],
)
def test_unread_command_lines_cases(code: str, expected: list[tuple[int, str]]) -> None:
    assert unread_command_lines(code) == expected


def test_notation_atoms_are_the_symbols_before_the_arrow() -> None:
    [command] = read_commands('local notation:50 a " ≤ " b " ⟫" => f "x" a b')
    assert notation_atoms(command) == ["≤", "⟫"]
    [infix] = read_commands('infixl:65 " +' + "'" + ' " => g')
    assert notation_atoms(infix) == ["+'"]
    assert notation_atoms(read_commands("theorem t : True := trivial")[0]) == []


def test_a_symbol_glued_to_the_one_before_it_is_read_as_the_notation_they_make() -> None:
    atoms = term_atoms("f =ᶠ[l] g ∧ sᶜ ⊆ t", ["=", "=ᶠ", "ᶠ", "ᶜ", "⊆", "[", "∧"])
    assert [(atom.text, atom.depth) for atom in atoms] == [
        ("f", 0), ("=ᶠ", 0), ("[", 0), ("l", 1), ("g", 0), ("∧", 0), ("s", 0), ("ᶜ", 0), ("⊆", 0), ("t", 0)]
