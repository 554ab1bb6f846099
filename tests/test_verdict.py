"""Verdict rules on real data: REPL transcripts and the MathlibLemma statements and proofs."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import pytest

from lean_pool import refusals, verdict
from lean_pool.lean_source import code_only, lex, strip_comments

# ---------------------------------------------------------------------------------------------
# Helpers over the fixtures.
# ---------------------------------------------------------------------------------------------


def _answers(path: Path) -> list[dict]:
    """The REPL's answers in an `.expected.out` file: pretty-printed JSON objects, blank-line separated."""
    return [json.loads(chunk) for chunk in re.split(r"\n\s*\n", path.read_text()) if chunk.strip()]


def _all_answers(transcripts_dir: Path) -> list[tuple[str, dict]]:
    return [
        (str(path.relative_to(transcripts_dir)), answer)
        for path in sorted(transcripts_dir.rglob("*.expected.out"))
        for answer in _answers(path)
    ]


def _pairs(mathliblemma_dir: Path) -> list[tuple[str, str, str]]:
    """(relative path, benchmark statement, lemma proof) for every lemma file."""
    lemma_root = mathliblemma_dir / "lemma"
    return [
        (str(path.relative_to(lemma_root)), (mathliblemma_dir / "benchmark" / path.relative_to(lemma_root)).read_text(),
         path.read_text())
        for path in sorted(lemma_root.rglob("*.lean"))
    ]


def _info_like(transcripts_dir: Path, data: str) -> dict:
    """An answer shaped like the REPL's real info message (from def_eval), carrying `data`."""
    answer = copy.deepcopy(_answers(transcripts_dir / "def_eval.expected.out")[1])
    assert answer["messages"][0]["severity"] == "info"
    answer["messages"][0]["data"] = data
    return answer


def _error_like(transcripts_dir: Path, data: str) -> dict:
    """An answer shaped like the REPL's real error message (from app_type_mismatch), carrying `data`."""
    answer = copy.deepcopy(_answers(transcripts_dir / "app_type_mismatch.expected.out")[0])
    assert answer["messages"][0]["severity"] == "error"
    answer["messages"][0]["data"] = data
    return answer


# ---------------------------------------------------------------------------------------------
# Verdicts on the REPL transcripts.
# ---------------------------------------------------------------------------------------------


def test_every_transcript_answer_gets_a_known_status(transcripts_dir: Path) -> None:
    answers = _all_answers(transcripts_dir)
    assert len(answers) > 100
    for name, answer in answers:
        assert verdict.statement_verdict(answer).status in verdict.STATUSES, name


def test_every_sorry_warning_in_the_transcripts_is_seen(transcripts_dir: Path) -> None:
    warned = [
        (name, answer)
        for name, answer in _all_answers(transcripts_dir)
        if any("declaration uses" in str(m.get("data", "")) for m in answer.get("messages", []))
    ]
    assert len(warned) > 20
    spellings = {
        m["data"] for _, a in warned for m in a["messages"] if str(m.get("data", "")).startswith("declaration uses")
    }
    # This toolchain (v4.33) prints the backtick spelling; older ones printed 'sorry' (tested below).
    assert spellings == {"declaration uses `sorry`"}
    for name, answer in warned:
        statement = verdict.statement_verdict(answer)
        assert (statement.status, statement.ok) == ("sorry", True), name
        proof = verdict.proof_verdict(answer, {}, [])
        assert not proof.ok and any("declaration uses" in r for r in proof.reasons), name


@pytest.mark.parametrize("spelling", ["declaration uses `sorry`", "declaration uses 'sorry'"])
def test_either_sorry_spelling_alone_fails_a_proof(transcripts_dir: Path, spelling: str) -> None:
    answer = _answers(transcripts_dir / "term_sorry.expected.out")[0]
    answer.pop("sorries")
    answer["messages"][0]["data"] = spelling
    clean = _info_like(transcripts_dir, "'x' does not depend on any axioms")
    result = verdict.proof_verdict(answer, {"x": clean}, ["x"])
    assert (result.status, result.ok) == ("sorry", False)
    assert any(spelling in reason for reason in result.reasons)


def test_sorries_field_alone_fails_a_proof(transcripts_dir: Path) -> None:
    answer = _answers(transcripts_dir / "term_sorry.expected.out")[0]
    answer.pop("messages")
    clean = _info_like(transcripts_dir, "'x' does not depend on any axioms")
    result = verdict.proof_verdict(answer, {"x": clean}, ["x"])
    assert result.status == "sorry" and "1 `sorry`" in result.reasons[0]


@pytest.mark.parametrize("name", ["app_type_mismatch", "app_type_mismatch2"])
def test_kernel_errors_are_errors(transcripts_dir: Path, name: str) -> None:
    answer = _answers(transcripts_dir / f"{name}.expected.out")[0]
    statement = verdict.statement_verdict(answer)
    assert (statement.status, statement.ok) == ("error", False)
    assert "(kernel)" in statement.reasons[0]
    assert verdict.proof_verdict(answer, {}, []).status == "error"


def test_repl_level_failures_are_errors(transcripts_dir: Path) -> None:
    failures = [(n, a) for n, a in _all_answers(transcripts_dir) if set(a) == {"message"}]
    assert failures
    for name, answer in failures:
        result = verdict.statement_verdict(answer)
        assert result.status == "error" and "REPL rejected" in result.reasons[0], name


def test_answer_without_messages_compiles(transcripts_dir: Path) -> None:
    answer = _answers(transcripts_dir / "def_eval.expected.out")[0]
    assert answer == {"env": 0}
    assert verdict.statement_verdict(answer) == verdict.Verdict("passed", True)


def test_already_declared_is_told_apart(transcripts_dir: Path) -> None:
    restated = _error_like(transcripts_dir, "'Nat.add_comm' has already been declared")
    assert verdict.already_declared(restated) == ["Nat.add_comm"]
    assert verdict.statement_verdict(restated).status == "error"
    kernel = _answers(transcripts_dir / "app_type_mismatch.expected.out")[0]
    assert verdict.already_declared(kernel) == []


# ---------------------------------------------------------------------------------------------
# `#print axioms` answers and proof verdicts.
# ---------------------------------------------------------------------------------------------


def test_axioms_of_reads_lean_output(transcripts_dir: Path) -> None:
    def parse(data: str) -> list[str] | None:
        return verdict.axioms_of(_info_like(transcripts_dir, data))

    assert parse("'Classical.em' depends on axioms: [propext, Classical.choice, Quot.sound]") == [
        "propext", "Classical.choice", "Quot.sound"]
    assert parse("'Foam.t193' does not depend on any axioms") == []
    assert parse("'f'_append' depends on axioms: [propext,\n Quot.sound]") == ["propext", "Quot.sound"]
    assert parse("rfl : f = f") is None
    assert verdict.axioms_of(_error_like(transcripts_dir, "unknown constant 'nope'")) is None
    assert verdict.axioms_of({"message": "Lean error:\nunknown environment."}) is None


def _axioms_answer(transcripts_dir: Path, name: str, axioms: list[str]) -> dict:
    if not axioms:
        return _info_like(transcripts_dir, f"'{name}' does not depend on any axioms")
    return _info_like(transcripts_dir, f"'{name}' depends on axioms: [{', '.join(axioms)}]")


def test_clean_proof_passes(transcripts_dir: Path) -> None:
    answer = _answers(transcripts_dir / "def_eval.expected.out")[0]
    axioms = {"Folk.a": _axioms_answer(transcripts_dir, "Folk.a", sorted(verdict.ALLOWED_AXIOMS))}
    assert verdict.proof_verdict(answer, axioms, ["Folk.a"]) == verdict.Verdict("passed", True)


@pytest.mark.parametrize(
    ("axioms", "status", "needle"),
    [
        (["propext", "sorryAx"], "sorry", "sorryAx"),
        (["Lean.ofReduceBool", "Lean.trustCompiler"], "error", "Lean.ofReduceBool"),
        (["Folk.cheat"], "error", "Folk.cheat"),
    ],
)
def test_axioms_outside_the_allowed_set_fail(transcripts_dir: Path, axioms: list[str], status: str,
                                             needle: str) -> None:
    answer = _answers(transcripts_dir / "def_eval.expected.out")[0]
    result = verdict.proof_verdict(answer, {"t": _axioms_answer(transcripts_dir, "t", axioms)}, ["t"])
    assert (result.status, result.ok) == (status, False)
    assert any(needle in reason for reason in result.reasons)


def test_allowed_axioms_can_be_narrowed(transcripts_dir: Path) -> None:
    answer = _answers(transcripts_dir / "def_eval.expected.out")[0]
    axioms = {"t": _axioms_answer(transcripts_dir, "t", ["Classical.choice"])}
    assert verdict.proof_verdict(answer, axioms, ["t"], allowed_axioms=frozenset({"propext"})).status == "error"


def test_missing_target_and_no_target_fail(transcripts_dir: Path) -> None:
    answer = _answers(transcripts_dir / "def_eval.expected.out")[0]
    unknown = _error_like(transcripts_dir, "unknown constant 'Folk.t'")
    missing = verdict.proof_verdict(answer, {"Folk.t": unknown}, ["Folk.t"])
    assert missing.status == "error" and "`Folk.t` is not declared" in missing.reasons[0]
    assert verdict.proof_verdict(answer, {}, ["Folk.t"]).status == "error"
    assert verdict.proof_verdict(answer, {}, []).status == "error"


def test_every_failure_is_listed(transcripts_dir: Path) -> None:
    answer = _answers(transcripts_dir / "app_type_mismatch2.expected.out")[0]
    answer["sorries"] = _answers(transcripts_dir / "term_sorry.expected.out")[0]["sorries"]
    axioms = {"a": _axioms_answer(transcripts_dir, "a", ["sorryAx", "Folk.cheat"])}
    result = verdict.proof_verdict(answer, axioms, ["a", "b"])
    assert result.status == "error"
    for needle in ("(kernel)", "`sorry` placeholder", "sorryAx", "Folk.cheat", "`b` is not declared"):
        assert any(needle in reason for reason in result.reasons), needle


def test_verdict_status_is_checked() -> None:
    with pytest.raises(ValueError):
        verdict.Verdict("maybe", True)


# ---------------------------------------------------------------------------------------------
# MathlibLemma: benchmark statements vs lemma proofs.
# ---------------------------------------------------------------------------------------------

# The lemma files whose target is not the benchmark statement, each inspected by hand.
DIFFERENT_STATEMENTS = {
    # Target renamed to `algebra_153987`: the benchmark name is never declared.
    "abstract/Algebra/Algebra/Spectrum/Basic/19.lean",
    # Hypothesis `hPosDef : Prop` replaced by `hPosDef : A.PosDef` (a stronger assumption).
    "applied/LinearAlgebra/Matrix/Determinant/Basic/60.lean",
    # The prover found the statement false and proved `stoppedProcess_absorbing_correct` instead
    # (the original survives only in a comment).
    "applied/Probability/Martingale/OptionalStopping/23.lean",
    # The statement itself holds a `by ... sorry` proof of nonemptiness, which the prover filled in:
    # proof-irrelevant, but a text comparison cannot know that.
    "foundational/Data/Finset/Max/34.lean",
    "foundational/Data/Finset/Max/35.lean",
    # Same, and the right-hand side changed from `s.min' hs` to `s.max' hs`.
    "foundational/Data/Finset/Max/48.lean",
    # Extra hypothesis `(h_mono : Monotone e)`.
    "foundational/Data/Finset/Max/8.lean",
}

# Same statement text, but the context it depends on was changed.
CHANGED_CONTEXT = {
    # The placeholder `Matrix.elemAddCol` is `0` in the benchmark and `1` in the proof, which makes
    # the lemma trivial.
    "applied/LinearAlgebra/Matrix/Determinant/Basic/9.lean",
    # The placeholder `Matrix.IsPositiveSemidefinite` was rewritten (and an axiom added).
    "applied/LinearAlgebra/Matrix/Determinant/Basic/61.lean",
}


def test_benchmark_vs_lemma_statements(mathliblemma_dir: Path) -> None:
    pairs = _pairs(mathliblemma_dir)
    assert len(pairs) == 212
    different = {rel for rel, benchmark, lemma in pairs if not verdict.same_statement(benchmark, lemma)}
    assert different == DIFFERENT_STATEMENTS


def test_benchmark_vs_lemma_context(mathliblemma_dir: Path) -> None:
    changed = {rel for rel, benchmark, lemma in _pairs(mathliblemma_dir) if verdict.context_reasons(benchmark, lemma)}
    assert changed == CHANGED_CONTEXT


def test_every_benchmark_statement_matches_itself(mathliblemma_dir: Path) -> None:
    for path in sorted((mathliblemma_dir / "benchmark").rglob("*.lean")):
        code = path.read_text()
        assert verdict.target_name(code), path
        assert verdict.same_statement(code, code), path


def _mentions_cheat_outside_comments(code: str) -> bool:
    """An independent, simpler oracle (non-nested comments are enough for these files)."""
    code = re.sub(r"/-.*?-/", " ", code, flags=re.DOTALL)
    code = re.sub(r"--[^\n]*", " ", code)
    return re.search(r"\b(sorry|admit|axiom)\b", code) is not None


def test_lemma_files_with_sorry_admit_or_axiom_are_caught(mathliblemma_dir: Path) -> None:
    dirty = [(rel, b, lemma) for rel, b, lemma in _pairs(mathliblemma_dir) if _mentions_cheat_outside_comments(lemma)]
    assert len(dirty) == 35
    for rel, benchmark, lemma in dirty:
        assert refusals.refusal_reasons(lemma) or refusals.textual_sorry_reasons(lemma), rel
        result = verdict.precheck(lemma, "proof", benchmark)
        assert result is not None and result.status in ("refused", "sorry"), rel


@pytest.mark.slow
def test_clean_lemma_files_are_not_refused(mathliblemma_dir: Path) -> None:
    clean = [(rel, lemma) for rel, _, lemma in _pairs(mathliblemma_dir) if not _mentions_cheat_outside_comments(lemma)]
    assert len(clean) == 177
    for rel, lemma in clean:
        assert refusals.refusal_reasons(lemma) == [], rel
        assert refusals.textual_sorry_reasons(lemma) == [], rel


@pytest.mark.slow
def test_clean_lemma_files_pass_the_text_checks_unless_changed(mathliblemma_dir: Path) -> None:
    for rel, benchmark, lemma in _pairs(mathliblemma_dir):
        if _mentions_cheat_outside_comments(lemma):
            continue
        result = verdict.precheck(lemma, "proof", benchmark)
        if rel in DIFFERENT_STATEMENTS | CHANGED_CONTEXT:
            assert result is not None and result.status == "error", rel
        else:
            assert result is None, rel


@pytest.mark.slow
def test_every_benchmark_statement_goes_to_lean(mathliblemma_dir: Path) -> None:
    paths = sorted((mathliblemma_dir / "benchmark").rglob("*.lean"))
    assert len(paths) == 424
    # Bernstein/67 defines `notation "I"`: notation is allowed, and in proof mode checked against the reference.
    assert [path for path in paths if verdict.precheck(path.read_text(), "statement") is not None] == []


def test_lemma_notation_copied_from_the_benchmark_is_not_a_new_notation(mathliblemma_dir: Path) -> None:
    rel = "applied/Analysis/SpecialFunctions/Bernstein/67.lean"
    benchmark = (mathliblemma_dir / "benchmark" / rel).read_text()
    lemma = (mathliblemma_dir / "lemma" / rel).read_text()
    assert verdict.context_reasons(benchmark, lemma) == []
    assert verdict.context_reasons(benchmark, lemma.replace("Set.Icc (0 : ℝ) 1", "Set.Icc (0 : ℝ) 2")) != []


# ---------------------------------------------------------------------------------------------
# The lexer and the text rules.
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "code",
    [
        "-- #eval IO.println 1\ntheorem t : True := trivial",
        "/- run_cmd /- nested #exit -/ still a comment: axiom -/ theorem t : True := trivial",
        "/-- doc comment: elab, macro, unsafe -/ theorem t : True := trivial",
        "/-! module doc: native_decide -/",
        "/--/ a doc comment whose body starts with a slash: #eval -/",
        'def s := "say \\"#eval\\" and \\\\ then axiom"',
        "def c := '\"' -- a quote character\ndef d := '\\'' ",
        "theorem elaborate_axioms_macro_rules_x : True := trivial\n#print axioms elaborate_axioms_macro_rules_x",
        "@[simp, elab_as_elim, to_additive] theorem t : True := trivial",
        "theorem t : IsOpen (Set.univ : Set ℝ) := isOpen_univ -- Lean.Elab is not elab",
        "set_option maxHeartbeats 0 in\ntheorem t : True := trivial",
        "theorem «#eval» : True := trivial",
        "theorem «my axiom» : True := trivial",
        "theorem t : True := my_axiom.elim Foo.axiom h₁.macro",
        "theorem my_elab_lemma : True := Foo.elaborate.by_elab_free",
        "theorem t (n : ℕ) : n % 2 = n%2 := rfl",
        "theorem t : True := by\n  open Real in\n  set_option maxRecDepth 1000 in\n  trivial",
        "@[aesop unsafe apply] theorem t : True := trivial",
        "theorem t (κ : ProbabilityTheory.Kernel ℕ ℕ) : κ = κ := rfl",
        "theorem t : True := trivial\n#check t\n#print axioms t",
        "local notation \"‖\" x \"‖₀\" => x\ntheorem t : True := trivial",
        "set_option linter.unusedVariables false in\nset_option pp.all true\ntheorem t : True := trivial",
        "theorem t : True := by\n  let native := true\n  trivial",
    ],
)
def test_not_refused(code: str) -> None:
    assert refusals.refusal_reasons(code) == []


@pytest.mark.parametrize(
    ("code", "needle"),
    [
        ("/- /- -/ -/ #eval 1", "#eval"),
        ("/- /- -/ #eval 1", "not terminated"),
        ('def s := "\\\\" #eval 1 --"', "#eval"),
        ("def c := '\"'\n#eval 1 -- \"", "#eval"),
        ("#evalIO.println 1", "#eval"),
        ("#eval! 1", "#eval"),
        ("x /-c-/ \n elab \"t\" : tactic => pure ()", "`elab`"),
        ("@[simp, implemented_by other] def f := 1", "implemented_by"),
        ('attribute [extern "c_f"] f', "extern"),
        ("@[builtin_tactic Lean.Parser.Tactic.decide] def f := 1", "builtin_"),
        ("set_option «debug».skipKernelTC true", "debug.skipKernelTC"),
        ("theorem t : True := by decide (config := { native := true })", "native := true"),
        ("def x := 1 <--b\n#eval 1", "may form a token"),
        ('def s := "unterminated', "not terminated"),
        ('def s := "{x}"', "interpolation"),
        # A number does not glue to a keyword: Lean reads `2axiom` as `2` then `axiom`.
        ("def x := 2axiom bad : False", "`axiom`"),
        # After the error at `(.` Lean resumes parsing at the command.
        ("def x := (.#eval 1)", "#eval"),
        ("def x := (.run_cmd pure ())", "run_cmd"),
        ("theorem t : 1 = 1 := _root_.Lean.ofReduceBool _ _ rfl", "ofReduceBool"),
        ('@[«extern» "c_f"] def f := 1', "extern"),
        ("theorem t : 1 = 1 := by_elab return Lean.mkConst ``rfl", "`by_elab`"),
        ("theorem t : (eval% (2 + 2 : Nat)) = 4 := rfl", "`eval%`"),
        ("open private mk from Lean.Environment", "`open private`"),
        ("theorem t : True := by exact (Lean.Elab.Term.x)", "`Lean.Elab`"),
        ("theorem t : True := _root_.Lean.Meta.x", "`Lean.Meta`"),
        ("def f := Lean.Kernel.check", "`Lean.Kernel`"),
        ("def f := modifyEnv id", "modifyEnv"),
        ("def f := Lean.addDecl d", "addDecl"),
        ("def f := unsafeCast 1", "unsafeCast"),
        ("theorem t : False := lcProof", "lcProof"),
        ("partial def f (n : Nat) : Nat := f n", "`partial`"),
        ("opaque f : Nat", "`opaque`"),
        ("set_option allowUnsafeReducibility true", "allowUnsafeReducibility"),
        ("set_option trace.Meta.synthInstance true", "only options"),
        ("#reduce 1 + 1", "`#reduce`"),
        ("namespace Lean.Elab\nend Lean.Elab", "Lean's own namespace"),
        ("theorem t : True := trivial\nregister_simp_attr foo", "`register_simp_attr` starts a command"),
        ("alias t := True.intro", "`alias` is not among the commands"),
        ("open Lean in\ntheorem t : True := trivial", "`open Lean`"),
    ],
)
def test_refused(code: str, needle: str) -> None:
    reasons = refusals.refusal_reasons(code)
    assert any(needle in reason for reason in reasons), reasons


def test_refusal_reasons_name_the_line() -> None:
    assert refusals.refusal_reasons("theorem t : True := trivial\n\n#exit\n")[0].startswith("line 3:")


def test_blanking_keeps_positions() -> None:
    code = "a /- b\n c -/ \"d\ne\" 'f' -- g\nh"
    for text in (code_only(code), strip_comments(code)):
        assert len(text) == len(code)
        assert [i for i, c in enumerate(text) if c == "\n"] == [i for i, c in enumerate(code) if c == "\n"]
    assert code_only(code).split() == ["a", '"', '"', "'", "'", "h"]
    assert '"d\ne"' in strip_comments(code)
    assert lex(code).problems == ()


def test_textual_sorry_is_separate_from_refusal() -> None:
    statement = "theorem t : True := by\n  sorry"
    assert refusals.refusal_reasons(statement) == []
    assert "`sorry`" in refusals.textual_sorry_reasons(statement)[0]
    assert refusals.textual_sorry_reasons("-- sorry\ntheorem t : True := trivial /- admit -/") == []
    assert refusals.textual_sorry_reasons('def s := "sorry"') == []
    assert refusals.textual_sorry_reasons("theorem t : False := _root_.sorryAx _ false")
    assert refusals.textual_sorry_reasons("theorem t : False := my_sorry.elim") == []
    assert verdict.precheck(statement, "statement") is None
    assert verdict.precheck(statement, "proof").status == "sorry"


# ---------------------------------------------------------------------------------------------
# Declarations and statements.
# ---------------------------------------------------------------------------------------------


def test_declared_names_resolve_namespaces() -> None:
    code = """
namespace A.B
/-- doc -- theorem fake : True -/
@[simp] protected theorem one : True := trivial
section S
private lemma two : True := trivial
end S
theorem _root_.three : True := trivial
end A.B
namespace C
theorem «four» : True := trivial
end C
noncomputable section
lemma five : True := trivial
end
def six : Nat := 6
"""
    assert verdict.declared_names(code) == ["A.B.one", "A.B.two", "three", "C.four", "five"]


def test_same_statement_ignores_layout_keyword_and_proof() -> None:
    reference = "namespace N\nlemma t (a b : ℕ) : a + b = b + a := by\n  sorry\nend N"
    candidate = (
        "namespace N\ntheorem helper : True := trivial\n"
        "/-- doc -/ @[simp] theorem t (a b : ℕ) : -- why\n    a + b = b + a := Nat.add_comm a b\nend N"
    )
    assert verdict.same_statement(reference, candidate)
    assert verdict.same_statement(reference, "theorem N.t (a b:ℕ) : a + b = b + a := Nat.add_comm ..")
    assert not verdict.same_statement(reference, "theorem t (a b : ℕ) : a + b = b + a := Nat.add_comm ..")
    assert not verdict.same_statement(reference, "theorem N.t (a b : ℕ) : a + b = a + b := rfl")
    assert not verdict.same_statement(reference, "theorem N.t (a b : ℕ) : a+b = b+a := by\n  sorry\n"
                                                 "theorem N.t (a : ℕ) : True := trivial")
    assert not verdict.same_statement("def x := 1", "def x := 1")


@pytest.mark.parametrize(
    ("reference", "candidate"),
    [
        # An absolute value opening a line is not an equation-style proof.
        ("theorem t (x : ℝ) :\n    |x| ≥ 0 := by\n  sorry", "theorem t (x : ℝ) :\n    |x| ≥ 1 := by\n  simp"),
        # A `let` inside the statement does not end it.
        ("theorem t : let x := 1; x = 2 := sorry", "theorem t : let x := 1; x = 1 := rfl"),
        # `Foo.bar` and `Foo .bar` mean different things: spaces next to dots matter.
        ("theorem t : f Foo.bar = 0 := sorry", "theorem t : f Foo .bar = 0 := rfl"),
    ],
)
def test_same_statement_is_not_fooled(reference: str, candidate: str) -> None:
    assert verdict.same_statement(reference, reference)
    assert not verdict.same_statement(reference, candidate)
