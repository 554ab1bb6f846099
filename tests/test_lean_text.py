"""Reading LLM answers and splitting them: extract, split and judge rules, on real MathlibLemma files and on edge
cases."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from operators.llm.answers import extract_code, judge_accepts
from operators.split import split_lemmas

MARKER = "brainstormed mathlib lemmas"

# Test-side oracle for the fixtures (independent of the module): a declaration starts a column-0 line.
DECLARATION = re.compile(r"^(?:@\[.*\]\s*)?(?:(?:private|protected|noncomputable)\s+)*(?:lemma|theorem)\b")
# Column-0 lines of commands that split_lemmas must drop ("nothing else").
OTHER_COMMAND = re.compile(
    r"^(?:noncomputable$"
    r"|(?:noncomputable\s+)?(?:def|abbrev|instance|class|structure|inductive|example|axiom|notation)\b)"
)


def significant_lines(text: str) -> list[str]:
    """Lines of a fixture-style Lean file without blank lines and column-0 comments (docstrings stay)."""
    kept: list[str] = []
    in_comment = False
    for line in text.splitlines():
        if in_comment:
            in_comment = "-/" not in line
        elif line.startswith("/-") and not line.startswith("/--"):
            in_comment = "-/" not in line
        elif line.strip() and not line.startswith("--"):
            kept.append(line.rstrip())
    return kept


def is_subsequence(short: list[str], long: list[str]) -> bool:
    remaining = iter(long)
    return all(line in remaining for line in short)


def seed_dirs(root: Path) -> list[Path]:
    return sorted({path.parent for path in root.rglob("*.lean")})


def statement_files(seed_dir: Path) -> list[Path]:
    return sorted(seed_dir.glob("*.lean"), key=lambda path: int(path.stem))


def discovery_answer(seed_dir: Path) -> tuple[str, list[str]]:
    """A discovery-like answer joining the seed's files, each in its own section; also the shared imports."""
    files = statement_files(seed_dir)
    all_lines = [line for path in files for line in path.read_text().splitlines()]
    imports = list(dict.fromkeys(line for line in all_lines if line.startswith("import")))
    sections = []
    for path in files:
        body = "\n".join(line for line in path.read_text().splitlines() if not line.startswith("import"))
        sections.append(f"section Statement{path.stem}\n{body}\nend Statement{path.stem}")
    code = "\n".join(imports) + "\n\n" + "\n\n".join(sections)
    answer = (
        f"Plan: read {seed_dir.name}, then list the {MARKER.upper()} below.\n"
        "A first sketch:\n```lean\nlemma sketch_only : True := by\n  sorry\n```\n\n"
        "## Brainstormed Mathlib Lemmas\n\n"
        f"```lean\n{code}\n```\n\nThat is all.\n\n"
    )
    return answer, imports


@pytest.mark.parametrize("kind", ["benchmark", "lemma"])
def test_split_gives_back_each_fixture_declaration_with_its_context(mathliblemma_dir: Path, kind: str) -> None:
    for seed_dir in seed_dirs(mathliblemma_dir / kind):
        answer, imports = discovery_answer(seed_dir)
        snippets = split_lemmas(extract_code(answer, MARKER))
        assert not any("sketch_only" in snippet for snippet in snippets)
        by_statement: dict[str, list[str]] = {}
        for snippet in snippets:
            lines = significant_lines(snippet)
            assert lines[: len(imports)] == imports, snippet
            stem = re.fullmatch(r"section Statement(\d+)", lines[len(imports)]).group(1)
            assert lines[-1] == f"end Statement{stem}", snippet
            by_statement.setdefault(stem, []).append(snippet)
        for path in statement_files(seed_dir):
            original = significant_lines(path.read_text())
            body = [line for line in original if not line.startswith("import")]
            declarations = [line for line in body if DECLARATION.match(line)]
            found = [significant_lines(snippet)[len(imports) + 1 : -1] for snippet in by_statement.get(path.stem, [])]
            where = f"{path} gave {by_statement.get(path.stem)}"
            found_declarations = [[line for line in lines if DECLARATION.match(line)] for lines in found]
            assert found_declarations == [[declaration] for declaration in declarations], where
            assert not any(OTHER_COMMAND.match(line) for lines in found for line in lines), where
            if len(declarations) == 1 and not any(OTHER_COMMAND.match(line) for line in body):
                assert found == [body], where
            else:
                assert all(is_subsequence(lines, body) for lines in found), where


def test_split_keeps_only_the_scopes_open_at_each_declaration() -> None:
    text = """import Mathlib
import Aesop

open Real
universe u

namespace Outer
variable {α : Type u} [Group α]
open Finset

namespace Inner
/-- Inner doc. -/
lemma inner_one (a : α) : a * 1 = a := by
  sorry
end Inner

theorem outer_one (a : α) : 1 * a = a := by
  sorry

end Outer

section
variable (n : ℕ)
set_option linter.unusedVariables false
lemma in_section : n + 0 = n := by
  sorry
end

lemma top_level : (1 : ℕ) = 1 := by
  sorry
"""
    inner, outer, in_section, top = split_lemmas(text)
    assert inner == """import Mathlib
import Aesop

open Real
universe u
namespace Outer
variable {α : Type u} [Group α]
open Finset
namespace Inner

/-- Inner doc. -/
lemma inner_one (a : α) : a * 1 = a := by
  sorry

end Inner
end Outer
"""
    assert "namespace Inner" not in outer and "end Inner" not in outer
    assert "open Finset" in outer and outer.endswith("  sorry\n\nend Outer\n")
    assert "variable (n : ℕ)\nset_option linter.unusedVariables false" in in_section
    assert in_section.endswith("  sorry\n\nend\n") and "Outer" not in in_section
    assert top == (
        "import Mathlib\nimport Aesop\n\nopen Real\nuniverse u\n\nlemma top_level : (1 : ℕ) = 1 := by\n  sorry\n"
    )


def test_open_in_and_set_option_in_belong_to_the_next_declaration_only() -> None:
    text = """import Mathlib
open Classical in
lemma first : True := by
  sorry
set_option maxHeartbeats 400000 in
theorem second : True := by
  sorry
lemma third : True := by
  sorry
"""
    first, second, third = split_lemmas(text)
    assert first == "import Mathlib\n\nopen Classical in\nlemma first : True := by\n  sorry\n"
    assert second == "import Mathlib\n\nset_option maxHeartbeats 400000 in\ntheorem second : True := by\n  sorry\n"
    assert third == "import Mathlib\n\nlemma third : True := by\n  sorry\n"


def test_docstring_attributes_and_modifiers_stay_with_their_declaration() -> None:
    text = """import Mathlib
/-- A docstring
lemma inside_docstring : False -/
@[simp, norm_cast]
protected lemma Nat.attr (n : ℕ) : n = n := rfl

/-- The def's docstring goes with the def. -/
noncomputable def helper : ℕ := 0

@[simp] private theorem inline_attr : helper = helper := rfl
"""
    attr, inline = split_lemmas(text)
    assert attr == (
        "import Mathlib\n\n/-- A docstring\nlemma inside_docstring : False -/\n"
        "@[simp, norm_cast]\nprotected lemma Nat.attr (n : ℕ) : n = n := rfl\n"
    )
    assert inline == "import Mathlib\n\n@[simp] private theorem inline_attr : helper = helper := rfl\n"


def test_comments_never_create_or_cut_declarations() -> None:
    text = """import Mathlib
/- A block comment
lemma not_real : False := sorry
/- nested
theorem not_real_either : False := sorry
-/
still comment
-/
/-! Module doc.
lemma nor_this : False -/
-- lemma nor_that : False
lemma real (s : String) : s ++ "-- /- lemma" = s ++ "-- /- lemma" := by
  -- a comment inside the proof stays
  rfl
-- 2. a comment about the next lemma is dropped
/- and so is this one -/

lemma second : True := trivial
"""
    real, second = split_lemmas(text)
    assert real == (
        'import Mathlib\n\nlemma real (s : String) : s ++ "-- /- lemma" = s ++ "-- /- lemma" := by\n'
        "  -- a comment inside the proof stays\n  rfl\n"
    )
    assert second == "import Mathlib\n\nlemma second : True := trivial\n"


def test_declaration_extent_ends_at_the_next_column_zero_command() -> None:
    text = """Chatter before the first command is dropped.
import Mathlib
theorem unindented_statement (a b : ℕ) :
a + b = b + a := by
  omega
def dropped : ℕ := 1
instance : Inhabited ℕ := ⟨dropped⟩
noncomputable section
open Real
lemma after_noncomputable : Real.pi > 0 := by
  sorry
example : True := trivial
"""
    unindented, after = split_lemmas(text)
    assert unindented == "import Mathlib\n\ntheorem unindented_statement (a b : ℕ) :\na + b = b + a := by\n  omega\n"
    assert after == (
        "import Mathlib\n\nnoncomputable section\nopen Real\n\n"
        "lemma after_noncomputable : Real.pi > 0 := by\n  sorry\n\nend\n"
    )


def test_unmatched_end_and_unclosed_scopes_are_handled() -> None:
    text = "end Stray\nnamespace A.B\nsection S\nlemma x : True := trivial\n"
    assert split_lemmas(text) == ["namespace A.B\nsection S\n\nlemma x : True := trivial\n\nend S\nend A.B\n"]
    assert split_lemmas("") == []
    assert split_lemmas("import Mathlib\ndef only_a_def : ℕ := 0\n") == []


# --- extract_code -----------------------------------------------------------------------------------------


def test_extract_code_is_none_without_the_marker() -> None:
    assert extract_code("```lean\nlemma a : True := trivial\n```", MARKER) is None


def test_extract_code_takes_the_last_lean_fence_after_the_last_marker_in_any_case() -> None:
    answer = (
        "I will write them after BRAINSTORMED MATHLIB LEMMAS.\n```lean\nlemma early : True := trivial\n```\n"
        "Brainstormed Mathlib Lemmas:\n```lean\nlemma draft : True := trivial\n```\n"
        "Let me fix that.\n```python\nprint('not lean')\n```\n"
        "```lean4\nlemma final : True := trivial\n```\n\nDone.\n\n\n"
    )
    assert extract_code(answer, MARKER) == "lemma final : True := trivial"


def test_extract_code_ignores_fences_before_the_last_marker() -> None:
    answer = f"{MARKER}\n```lean\nlemma old : True := trivial\n```\nRevised {MARKER}\nlemma new : True := trivial\n"
    assert extract_code(answer, MARKER) == "lemma new : True := trivial"


def test_extract_code_accepts_untagged_fences_and_ignores_other_languages() -> None:
    assert extract_code(f"{MARKER}\n```\nlemma bare : True := trivial\n```\n", MARKER) == "lemma bare : True := trivial"
    other = f"{MARKER}\n```text\nnot lean\n```\n"
    assert extract_code(other, MARKER) == ""


def test_extract_code_without_fence_returns_the_text_after_the_marker_line() -> None:
    answer = f"plan\n### {MARKER}: here they are\n\nimport Mathlib\n\nlemma raw : True := trivial\n\n"
    assert extract_code(answer, MARKER) == "import Mathlib\n\nlemma raw : True := trivial"
    assert extract_code(f"chatter {MARKER}", MARKER) == ""


def test_extract_code_keeps_an_unterminated_final_fence() -> None:
    answer = f"{MARKER}\n```lean\nimport Mathlib\n\nlemma cut (n : ℕ) :\n    n + 0 ="
    assert extract_code(answer, MARKER) == "import Mathlib\n\nlemma cut (n : ℕ) :\n    n + 0 ="


def test_extract_code_skips_empty_blocks_and_dedents_indented_fences() -> None:
    marker_in_code = f"```lean\n-- {MARKER}\nlemma a : True := trivial\n```\n"
    assert extract_code(marker_in_code, MARKER) == "lemma a : True := trivial"
    indented = f"{MARKER}\n1. The lemmas:\n   ```lean\n   lemma b : True := by\n     trivial\n   ```\n"
    assert extract_code(indented, MARKER) == "lemma b : True := by\n  trivial"


def test_extract_code_rejects_an_empty_marker() -> None:
    with pytest.raises(ValueError):
        extract_code("anything", "")


# --- judge_accepts ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("response", "accepted"),
    [
        ("The statement holds.\nCorrect.", True),
        ("Reasoning...\n\ncorrect\n\n  \n", True),
        ("CORRECT", True),
        ("  **Correct**", True),
        ("### correct", True),
        ("The statement is false.\nincorrect", False),
        ("**Incorrect**", False),
        ("Correct\n\nActually no.\nIncorrect.", False),
        ("I think this is correct.", False),
        ("", False),
        ("\n \n", False),
    ],
)
def test_judge_accepts_reads_the_last_non_empty_line(response: str, accepted: bool) -> None:
    assert judge_accepts(response) is accepted
