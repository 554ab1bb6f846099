"""The declaration parser: names resolved as Lean would, signatures and docstrings as written, skips counted."""

from __future__ import annotations

import re

from lean_pool.lean_source import canonical_statement
from operators.retrieval.declarations import first_theorem, parse_declarations

SOURCE = '''import Mathlib.Algebra.Group.Defs

/-! # Notes

theorem in_module_doc : False := sorry
-/

namespace Foo.Bar

variable {α : Type*} [Group α]

/-- Multiplying by one does nothing. -/
@[simp] theorem mul_one' (a : α) :
    a * 1 = a := by
  simp

-- theorem in_line_comment : False := sorry
private lemma helper {n : ℕ} (h : 0 < n) : n ≠ 0 := Nat.pos_iff_ne_zero.mp h

protected noncomputable def twice (n : ℕ) : ℕ :=
  2 * n

instance : Inhabited Nat := ⟨0⟩

instance (priority := 100) instBool : Inhabited Bool := ⟨true⟩

theorem _root_.Nat.rooty (n : Nat) : n = n := rfl

section Inner
theorem in_section : True := trivial
end Inner

def byCases : ℕ → ℕ
  | 0 => 1
  | n + 1 => n

structure Point (β : Type) where
  x : β
  y : β

theorem broken (h : (1 = 1) : True := trivial

end Foo.Bar

theorem top_level (s : String) (h : s = "theorem fake := (") : s.length = 17 := by
  subst h; rfl
'''


def _by_name() -> dict:
    return {d.name: d for d in parse_declarations(SOURCE).declarations}


def test_names_are_resolved_through_namespaces_sections_and_root() -> None:
    names = list(_by_name())
    assert names == [
        "Foo.Bar.mul_one'",
        "Foo.Bar.helper",
        "Foo.Bar.twice",
        "Foo.Bar.instBool",
        "Nat.rooty",
        "Foo.Bar.in_section",
        "Foo.Bar.byCases",
        "Foo.Bar.Point",
        "top_level",
    ]


def test_nothing_inside_comments_or_strings_is_taken_for_a_declaration() -> None:
    names = _by_name()
    assert not any("in_module_doc" in n or "in_line_comment" in n or "fake" in n for n in names)
    assert names["top_level"].signature == '(s : String) (h : s = "theorem fake := (") : s.length = 17'


def test_signature_kind_docstring_and_line() -> None:
    decl = _by_name()["Foo.Bar.mul_one'"]
    assert (decl.kind, decl.signature, decl.docstring, decl.line) == ("theorem", "(a : α) : a * 1 = a",
                                                                      "Multiplying by one does nothing.", 13)
    assert _by_name()["Foo.Bar.helper"].docstring == ""
    assert _by_name()["Foo.Bar.byCases"].signature == ": ℕ → ℕ"
    assert _by_name()["Foo.Bar.Point"].signature == "(β : Type)"
    assert _by_name()["Foo.Bar.instBool"].signature == ": Inhabited Bool"


def test_unreadable_declarations_are_skipped_and_counted() -> None:
    parsed = parse_declarations(SOURCE)
    assert dict(parsed.skipped) == {"anonymous_instance": 1, "unbalanced_signature": 1}
    assert parse_declarations("theorem\n").skipped["unreadable_name"] == 1
    assert parse_declarations("/- unterminated\ntheorem t : True := trivial").declarations == []


def test_every_fixture_statement_is_read_with_its_name(mathliblemma_dir) -> None:
    files = sorted((mathliblemma_dir / "benchmark").rglob("*.lean"))
    assert len(files) > 400
    for path in files:
        source = path.read_text()
        declaration = first_theorem(source)
        written = re.search(r"^(?:lemma|theorem)\s+(\S+)", source, re.MULTILINE)
        assert declaration is not None and written is not None, path
        assert declaration.name.endswith(written.group(1).replace("_root_.", "")), path
        assert ":" in declaration.signature and ":=" not in declaration.signature.replace(":= ", ""), path


def test_canonical_statement_ignores_layout_grouping_and_bound_names() -> None:
    a = canonical_statement("{R A : Type*} [inst : CommRing R] (a : A)\n  (h : ∀ r : R, r ∈ S a) :\n  P a")
    b = canonical_statement("{K : Type*} {B : Type*} [CommRing K] (x : B) (hx : ∀ s : K, s ∈ S x) : P x")
    assert a == b


def test_canonical_statement_keeps_what_changes_the_meaning() -> None:
    base = canonical_statement("(a b : ℕ) : a + b = b + a")
    assert base != canonical_statement("(a b : ℕ) : a * b = b * a")
    assert base != canonical_statement("(a b : ℤ) : a + b = b + a")
    assert canonical_statement("(a x1 : ℕ) : a + x1 = x1") == canonical_statement("(b c : ℕ) : b + c = c")
    assert canonical_statement("(a x1 : ℕ) : a + x1 = x1") != canonical_statement("(b c : ℕ) : b + c = b")


def test_proof_files_parse_without_surprises(mathliblemma_dir) -> None:
    reasons = set()
    for path in (mathliblemma_dir / "lemma").rglob("*.lean"):
        parsed = parse_declarations(path.read_text())
        assert parsed.declarations, path
        reasons |= set(parsed.skipped)
    assert reasons <= {"anonymous_instance"}


def test_hypotheses_before_or_after_the_colon_are_one_statement() -> None:
    binders = canonical_statement("{a b : ℕ} (h : a < b) (h' : 0 < a) : a ≤ b")
    assert canonical_statement("{a b : ℕ} (h : a < b) : 0 < a → a ≤ b") == binders
    assert canonical_statement("{a b : ℕ} : a < b → (0 < a) → a ≤ b") == binders
    assert canonical_statement(": ∀ {a b : ℕ}, a < b → 0 < a → a ≤ b") == binders
    assert canonical_statement("(s : Set ℕ) : (∀ x ∈ s, 0 < x) → s.Nonempty") == canonical_statement(
        "(t : Set ℕ) (h : ∀ y ∈ t, 0 < y) : t.Nonempty"
    )
    assert canonical_statement(": ∀ n m : ℕ, n + m = m + n") == canonical_statement("(a b : ℕ) : a + b = b + a")
    assert canonical_statement(": (n : ℕ) → [NeZero n] → 0 < n") == canonical_statement("(k : ℕ) [NeZero k] : 0 < k")


def test_an_arrow_that_is_not_the_outermost_connective_stays() -> None:
    premise = canonical_statement("(p q r : Prop) (h : p) : q ↔ r")
    assert canonical_statement("(p q r : Prop) : p → q ↔ r") != premise  # `(p → q) ↔ r`
    assert canonical_statement("(p q r : Prop) : p → (q ↔ r)") == premise
    assert canonical_statement("(s : Set ℕ) : ∃ x ∈ s, x = 0 → False").endswith(": ∃ x2 ∈ x1, x2 = 0 → False")
    assert canonical_statement("(s : Set ℕ) : ∀ x ∈ s, 0 ≤ x") == "(x1 : Set ℕ) : ∀ x2 ∈ x1, 0 ≤ x2"


def test_spellings_lean_reads_alike_are_one_statement() -> None:
    assert canonical_statement("(f : ℕ → ℕ) : (fun x ↦ f x) = f") == canonical_statement(
        "(g : ℕ → ℕ) : (λ y => g y) = g")
    assert canonical_statement("{C : Type u} [Category.{v} C] (X : C) : X = X") == canonical_statement(
        "{D : Type*} [Category D] (Y : D) : Y = Y"
    )
    assert canonical_statement("{α} [LinearOrder α] (s : Finset α) : s.card = s.card") == canonical_statement(
        "{β} [LinearOrder β] (t : Finset β) : t.card = t.card"
    )
    assert canonical_statement("(x : ℝ) (h : (0 < x)) : (x ≠ 0)") == canonical_statement("(y : ℝ) (h : 0 < y) : y ≠ 0")


def test_normalisation_keeps_tuples_ascriptions_sections_and_plain_type() -> None:
    assert canonical_statement("(x : ℝ) : (x, x) = (x, x)") == "(x1 : ℝ) : (x1, x1) = (x1, x1)"
    assert "(· + 1)" in canonical_statement("(f : ℕ → ℕ) (h : f = (· + 1)) : f 0 = 1")
    assert canonical_statement("{α : Type} (a : α) : a = a") != canonical_statement("{α : Type*} (a : α) : a = a")
    assert canonical_statement("(n : ℕ) : ((n : ℤ) = n)") == "(x1 : ℕ) : (x1 : ℤ) = x1"


def test_names_bound_by_binder_predicates_are_bound_names() -> None:
    assert canonical_statement("(f : ℕ → ℝ) : ∀ ε > 0, ∃ N, ∀ n ≥ N, |f n| < ε") == canonical_statement(
        "(g : ℕ → ℝ) : ∀ δ > 0, ∃ M, ∀ m ≥ M, |g m| < δ"
    )
    assert canonical_statement("(f : ℕ → ℝ) : ∀ ε > 0, ∃ N, ∀ n ≥ N, |f n| < ε") != canonical_statement(
        "(f : ℕ → ℝ) : ∀ ε > 0, ∃ N, ∀ n ≥ N, |f N| < ε"
    )
