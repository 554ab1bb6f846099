"""Placing proved lemmas into their Mathlib seed file: on real Mathlib files (a namespace with nested sections and
variables ending in `end Finset`, a root file of named sections, one of nested sections), with offers made of real
text (MathlibLemma's statements and proofs, or a theorem of the file restated under a new name). The patch must
apply with `git apply`, keep every original declaration as it was, and put each lemma where it can compile."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from lean_pool.lean_source import (
    DECLARATION_KINDS,
    Command,
    body_start,
    constants_meant,
    head_namespaces,
    holds_by_definition,
    mentioned_names,
    namespace_of,
    needed_opens,
    read_commands,
    resolve_name,
)
from operators.contribute.placement import Offer, PlacedFile, place_lemmas, unified_diff

MAX = "Mathlib/Data/Finset/Max.lean"
LATTICE = "Mathlib/Order/Lattice.lean"
LOGIC = "Mathlib/Logic/Basic.lean"
MAX_LEMMAS = "foundational/Data/Finset/Max"
DROPPED = ("set_option maxHeartbeats",)
# The prover's environment lines, as MathlibLemma's proofs carry them.
PROVER_ENVIRONMENT = "import Aesop\nset_option maxHeartbeats 400000\nopen BigOperators Real Nat Topology Rat\n"
GIT = ("git", "-c", "user.name=folklore", "-c", "user.email=folklore@example.invalid")


def _seed(mathlib_sample_dir: Path, path: str) -> str:
    return (mathlib_sample_dir / path).read_text()


def _mined(mathliblemma_dir: Path, number: int, name: str) -> Offer:
    """MathlibLemma's statement and proof number `number` mined from Finset/Max, offered under `name`."""
    statement = (mathliblemma_dir / "benchmark" / MAX_LEMMAS / f"{number}.lean").read_text()
    proof = (mathliblemma_dir / "lemma" / MAX_LEMMAS / f"{number}.lean").read_text()
    return Offer(f"max-{number}", statement, proof, name)


def _declaration(text: str, name: str) -> Command:
    return next(command for command in read_commands(text) if command.name == name)


def _restated(seed_text: str, name: str, new_name: str, *, context: tuple[str, ...] = (), helpers: str = "",
              namespace: str | None = None) -> Offer:
    """The seed theorem `name` restated as `candidate` in a statement file written in its namespace (or `namespace`)
    with its context commands and `context`, proved by its own proof in a proof file with the prover's environment and
    `helpers` before it; offered as `new_name`."""
    theorem = _declaration(seed_text, name)
    written_in = namespace_of(theorem.scopes) if namespace is None else namespace
    lines = [command.text for command in theorem.context()] + list(context)
    opener, closer = (f"namespace {written_in}\n\n", f"\n\nend {written_in}\n") if written_in else ("", "\n")
    stated = f"theorem candidate {theorem.signature}"
    body = theorem.text[body_start(theorem) :]
    header = "\n".join(lines)
    statement = f"import Mathlib\n\n{opener}{header}\n\n{stated} := by\n  sorry{closer}"
    proof = f"import Mathlib\n{PROVER_ENVIRONMENT}\n{opener}{header}\n\n{helpers}{stated} {body}{closer}"
    return Offer(f"restated-{name}", statement, proof, new_name)


def _applied(tmp_path: Path, path: str, old: str, new: str) -> str:
    """`new` as `git apply` makes it from `old` and the patch, after `git apply --check` accepted the patch."""
    repository = tmp_path / "mathlib"
    (repository / path).parent.mkdir(parents=True)
    (repository / path).write_text(old)
    subprocess.run([*GIT, "init", "-q"], cwd=repository, check=True)
    subprocess.run([*GIT, "add", "."], cwd=repository, check=True)
    subprocess.run([*GIT, "commit", "-qm", "seed"], cwd=repository, check=True)
    patch = tmp_path / "placement.patch"
    patch.write_text(unified_diff(path, old, new))
    subprocess.run([*GIT, "apply", "--check", str(patch)], cwd=repository, check=True)
    subprocess.run([*GIT, "apply", str(patch)], cwd=repository, check=True)
    return (repository / path).read_text()


def _declarations(text: str) -> list[Command]:
    return [command for command in read_commands(text) if command.kind in DECLARATION_KINDS]


def _innermost_section(command: Command) -> str:
    sections = [scope.name for scope in command.scopes if scope.kind == "section"]
    return sections[-1] if sections else ""


def _check_read_back(seed_text: str, placed: PlacedFile) -> dict[str, Command]:
    """Every original declaration is unchanged and in order, each lemma stands where its placement says, after its
    anchor with nothing of the seed in between; the lemmas read back, by full name."""
    new_names = {placement.full_name for placement in placed.placements}
    original = [(c.name, c.signature, c.text) for c in _declarations(seed_text)]
    patched = _declarations(placed.text)
    kept = [(c.name, c.signature, c.text) for c in patched if c.name not in new_names]
    assert [entry for entry in kept if entry in original] == original
    patched_lines = iter(placed.text.splitlines())
    assert all(line in patched_lines for line in seed_text.splitlines()), "an original line changed or moved"
    read_back = {c.name: c for c in patched if c.name in new_names}
    assert list(read_back) == [placement.full_name for placement in placed.placements]
    seed_names = {c.name for c in _declarations(seed_text)}
    for placement in placed.placements:
        lemma = read_back[placement.full_name]
        assert lemma.line == placement.line
        assert lemma.name == f"{placement.namespace}.{lemma.name.rsplit('.', 1)[-1]}".lstrip(".")
        assert _innermost_section(lemma) == placement.section
        assert "sorry" not in lemma.text
        if placement.anchor is not None:
            between = patched[[c.name for c in patched].index(placement.anchor) + 1 : patched.index(lemma)]
            assert not [c.name for c in between if c.name in seed_names]
    return read_back


def test_mined_lemmas_go_beside_their_siblings_after_what_they_use_and_the_patch_applies(
        tmp_path: Path, mathlib_sample_dir: Path, mathliblemma_dir: Path) -> None:
    seed_text = _seed(mathlib_sample_dir, MAX)
    offers = [_mined(mathliblemma_dir, 0, "Finset.max_eq_coe_max''"),
              _mined(mathliblemma_dir, 10, "Finset.max'_filter_le'"),
              _mined(mathliblemma_dir, 19, "Finset.min'_eq_of_mem'")]
    placed = place_lemmas(seed_text, offers, DROPPED)
    assert _applied(tmp_path, MAX, seed_text, placed.text) == placed.text
    read_back = _check_read_back(seed_text, placed)
    assert [p.candidate_id for p in placed.placements] == ["max-10", "max-0", "max-19"]
    assert [p.anchor for p in placed.placements] == ["Finset.max'_subset", "Finset.coe_max'",
                                                     "Finset.induction_on_min_value"]
    assert all(p.namespace == "Finset" for p in placed.placements)
    # The prover's `open BigOperators Real Nat Topology Rat` is needed by no name of the lemmas: no section for it.
    assert [p.section for p in placed.placements] == ["MaxMin", "MaxMin", "MaxMinInductionValue"]
    mined = read_back["Finset.max'_filter_le'"]
    assert mined.written_name == "max'_filter_le'" and namespace_of(mined.scopes) == "Finset"
    assert "section MaxMin" in [scope.opener for scope in mined.scopes]
    assert "maxHeartbeats" not in placed.text
    assert not any("open" in p.text.split() for p in placed.placements)
    assert "apply Finset.max'_mem" in mined.text


def test_a_lemma_using_nothing_of_the_file_follows_its_closest_sibling(
        tmp_path: Path, mathlib_sample_dir: Path, mathliblemma_dir: Path) -> None:
    seed_text = _seed(mathlib_sample_dir, MAX)
    placed = place_lemmas(seed_text, [_mined(mathliblemma_dir, 20, "Finset.eq_of_forall_le_iff")], DROPPED)
    assert _applied(tmp_path, MAX, seed_text, placed.text) == placed.text
    placement = placed.placements[0]
    assert placement.anchor == "Finset.le_max_of_eq"
    lemma = _check_read_back(seed_text, placed)["Finset.eq_of_forall_le_iff"]
    assert lemma.written_name == "eq_of_forall_le_iff"


def test_restated_theorems_go_right_after_their_siblings(
        tmp_path: Path, mathlib_sample_dir: Path) -> None:
    seed_text = _seed(mathlib_sample_dir, LATTICE)
    later = _restated(seed_text, "lt_sup_of_lt_right", "lt_sup_of_lt_right'")
    early = _restated(seed_text, "le_sup_of_le_left", "le_sup_of_le_left'")
    placed = place_lemmas(seed_text, [later, early], (*DROPPED, "open BigOperators"))
    assert _applied(tmp_path, LATTICE, seed_text, placed.text) == placed.text
    _check_read_back(seed_text, placed)
    first, second = placed.placements
    assert (first.full_name, first.anchor) == ("le_sup_of_le_left'", "le_sup_of_le_left")
    # `lt_sup_of_lt_left` is about the same constants, but only the original is written the same way.
    assert (second.full_name, second.anchor) == ("lt_sup_of_lt_right'", "lt_sup_of_lt_right")
    assert first.line < second.line and first.section == second.section == "SemilatticeSup"
    assert first.text.startswith("theorem le_sup_of_le_left' (h : c ≤ a) : c ≤ a ⊔ b :=")
    assert "variable" not in first.text and "section" not in first.text


def test_missing_context_comes_in_a_section_without_opens_no_name_needs(
        tmp_path: Path, mathlib_sample_dir: Path) -> None:
    seed_text = _seed(mathlib_sample_dir, LATTICE)
    offer = _restated(seed_text, "le_sup_of_le_left", "le_sup_of_le_left'",
                      context=("open OrderDual", "variable (e : α)"))
    placed = place_lemmas(seed_text, [offer], DROPPED)
    assert _applied(tmp_path, LATTICE, seed_text, placed.text) == placed.text
    _check_read_back(seed_text, placed)
    block = placed.placements[0].text
    assert block.startswith("section\n\nvariable (e : α)\n\ntheorem le_sup_of_le_left' (h : c ≤ a) : c ≤ a ⊔ b :=")
    assert block.endswith("\n\nend") and "open" not in block.split()
    assert "SemilatticeSup α" not in block and "maxHeartbeats" not in placed.text
    assert placed.placements[0].section == ""


def test_an_open_already_in_force_is_not_repeated(mathlib_sample_dir: Path, mathliblemma_dir: Path) -> None:
    seed_text = _seed(mathlib_sample_dir, MAX)
    mined = _mined(mathliblemma_dir, 10, "Finset.max'_filter_le'")
    offer = Offer(mined.candidate_id, mined.statement.replace("import Mathlib\n", "import Mathlib\nopen Function\n"),
                  mined.proof, mined.name)
    placed = place_lemmas(seed_text, [offer], (*DROPPED, "open BigOperators"))
    assert not placed.placements[0].text.startswith("section")
    assert placed.placements[0].section == "MaxMin"


def test_helpers_the_proof_defines_come_before_the_lemma(tmp_path: Path, mathlib_sample_dir: Path) -> None:
    seed_text = _seed(mathlib_sample_dir, LOGIC)
    helpers = ("theorem unused_helper : True := trivial\n\n"
               "theorem imp3_helper {p q : ∀ a b, γ a b → Prop} (h : ∀ a b c, p a b c → q a b c) (a : α) :\n"
               "    (∀ b c, p a b c) → ∀ b c, q a b c :=\n  forall₂_imp <| h a\n\n")
    offer = _restated(seed_text, "forall₃_imp", "forall₃_imp'", helpers=helpers)
    proof = offer.proof.replace("forall_imp fun a ↦ forall₂_imp <| h a", "forall_imp (imp3_helper h)")
    offer = Offer(offer.candidate_id, offer.statement, proof, offer.name)
    placed = place_lemmas(seed_text, [offer], (*DROPPED, "open BigOperators"))
    assert _applied(tmp_path, LOGIC, seed_text, placed.text) == placed.text
    _check_read_back(seed_text, placed)
    placement = placed.placements[0]
    assert (placement.anchor, placement.section) == ("forall₃_imp", "Dependent")
    assert "unused_helper" not in placement.text
    assert placement.text.startswith("theorem imp3_helper")
    assert placement.text.index("theorem imp3_helper") < placement.text.index("theorem forall₃_imp'")
    assert "forall_imp (imp3_helper h)" in placement.text


def test_a_lemma_using_nothing_of_a_root_file_goes_beside_its_sibling(mathlib_sample_dir: Path) -> None:
    seed_text = _seed(mathlib_sample_dir, LOGIC)
    placed = place_lemmas(seed_text, [_restated(seed_text, "forall_swap", "forall_swap'")], DROPPED)
    placement = placed.placements[0]
    assert (placement.anchor, placement.namespace, placement.section) == ("forall_swap", "", "Quantifiers")
    assert placement.text == ("theorem forall_swap' {p : α → β → Prop} : (∀ x y, p x y) ↔ ∀ y x, p x y :=\n"
                              "  ⟨fun f x y ↦ f y x, fun f x y ↦ f y x⟩")
    _check_read_back(seed_text, placed)


def test_a_lemma_of_a_deeper_namespace_is_wrapped_and_one_of_another_is_written_from_the_root(
        tmp_path: Path, mathlib_sample_dir: Path, mathliblemma_dir: Path) -> None:
    seed_text = _seed(mathlib_sample_dir, MAX)
    deeper = _mined(mathliblemma_dir, 0, "max_eq_coe_max'")
    deeper = Offer("deeper", deeper.statement.replace("theorem Finset.max_eq_coe_max'",
                                                      "namespace Finset.Nonempty\n\ntheorem max_eq_coe_max'")
                   + "\nend Finset.Nonempty\n", deeper.proof, deeper.name)
    other = _mined(mathliblemma_dir, 10, "Multiset.max'_filter_le")
    placed = place_lemmas(seed_text, [deeper, other], DROPPED)
    assert _applied(tmp_path, MAX, seed_text, placed.text) == placed.text
    read_back = _check_read_back(seed_text, placed)
    wrapped = next(p for p in placed.placements if p.candidate_id == "deeper")
    assert wrapped.full_name == "Finset.Nonempty.max_eq_coe_max'" and wrapped.namespace == "Finset.Nonempty"
    assert wrapped.text.startswith("namespace Nonempty\n") and wrapped.text.endswith("end Nonempty")
    assert namespace_of(read_back[wrapped.full_name].scopes) == "Finset.Nonempty"
    rooted = read_back["Multiset.max'_filter_le"]
    assert rooted.written_name == "_root_.Multiset.max'_filter_le" and namespace_of(rooted.scopes) == "Finset"


def test_a_lemma_with_no_place_in_the_file_goes_to_its_end_in_its_namespace(
        tmp_path: Path, mathlib_sample_dir: Path) -> None:
    seed_text = _seed(mathlib_sample_dir, LATTICE)
    logic_text = _seed(mathlib_sample_dir, LOGIC)
    offer = _restated(logic_text, "forall_swap", "forall_swap", namespace="Folklore.Logic")
    placed = place_lemmas(seed_text, [offer], DROPPED)
    assert _applied(tmp_path, LATTICE, seed_text, placed.text) == placed.text
    _check_read_back(seed_text, placed)
    placement = placed.placements[0]
    assert placement.anchor is None and placement.full_name == "Folklore.Logic.forall_swap"
    assert placed.text.startswith(seed_text) and placed.text.endswith(placement.text + "\n")
    assert placement.text.startswith("namespace Folklore.Logic\n\nsection\n\nvariable {α β : Sort*} {p : α → Prop}\n\n")


@pytest.mark.parametrize("old, new", [("a\nb\n", "a\nb\nc\n"), ("a\nb", "a\nb\n\nc"), ("a", "a")])
def test_the_patch_of_any_change_applies(tmp_path: Path, old: str, new: str) -> None:
    if old == new:
        assert unified_diff("Mathlib/X.lean", old, new) == ""
        return
    patch = unified_diff("Mathlib/X.lean", old, new)
    header = "diff --git a/Mathlib/X.lean b/Mathlib/X.lean\n--- a/Mathlib/X.lean\n+++ b/Mathlib/X.lean\n"
    assert patch.startswith(header)
    assert _applied(tmp_path, "Mathlib/X.lean", old, new) == new


def test_names_resolve_as_lean_reads_them_at_the_place_they_were_written() -> None:
    known = {"Finset.max'_mem", "Finset.max'", "Set.inclusion", "max'_mem"}
    assert resolve_name("max'_mem", ["Finset.Nonempty"], [], known) == "Finset.max'_mem"
    assert resolve_name("max'_mem", [""], [], known) == "max'_mem"
    assert resolve_name("inclusion", [""], ["Set"], known) == "Set.inclusion"
    assert resolve_name("inclusion", [""], [], known) is None
    # A field of a local (`s.max'`) may be a constant of the file: its tail is looked up too.
    assert constants_meant("(s.max' hs) -- max'_mem", ["Finset"], [], known) == ["Finset.max'"]


def test_a_hypothesis_of_a_structure_s_predicate_or_a_map_type_names_the_namespace_dot_notation_needs() -> None:
    known = {"Finset.card", "Equiv.trans", "OrderIso.refl"}
    # `h.csInf_mem` for `h : s.Nonempty`: Mathlib's `Finset.Nonempty.csInf_mem`; a field in lower case is no namespace.
    assert head_namespaces("{s : Finset α} (h : s.Nonempty) : sInf (s : Set α) ∈ s", known) == ["Finset.Nonempty"]
    assert head_namespaces("{s : Finset α} (h : s.card = 2) : s.Nonempty", known) == ["Finset"]
    assert head_namespaces("(e : α ≃ β) (f : β ≃ γ) : (e.trans f).symm = f.symm.trans e.symm", known) == ["Equiv"]
    assert head_namespaces("{α β : Type*} (e : α ≃o β) (a : α) : e.symm (e a) = a", known) == ["OrderIso"]
    # Relation maps and segments: Mathlib's `PrincipalSeg.subrelIso_apply` and `RelIso.eq_iff_eq`.
    assert head_namespaces("{α : Type*} (f : r ≺i s) (a : α) : f a = f a", known) == ["PrincipalSeg"]
    assert head_namespaces("(f : r ≃r s) {a b} : f a = f b ↔ a = b", known) == ["RelIso"]
    assert head_namespaces("(f : r ↪r s) : Injective f", known) == ["RelEmbedding"]


def test_a_statement_mentions_the_parts_of_its_names_and_of_the_constants_they_stand_for() -> None:
    known = {"Set.Icc", "WithTop.some", "Finset.card"}
    assert mentioned_names("(f : r ≃r s) : (⊤ : LowerSet α) ≤ Icc (WithBot.map f) a", known) == {
        "RelIso", "LowerSet", "Icc", "Set", "WithBot", "map", "f", "r", "s", "a", "α"}
    # `𝓟` is notation scoped in `Filter`: Mathlib's `Filter.principal_mono` is about filters.
    assert mentioned_names("{s t : Set α} : 𝓟 s ≤ 𝓟 t ↔ s ⊆ t", ()) == {"Filter", "𝓟", "Set", "s", "t", "α"}
    # Mathlib's `Finpartition.disjoint` is about `P` of `variable (P : Finpartition a)`; `Q`, unused, says nothing.
    variables = ["variable {a : α} (P : Finpartition a) (Q : Setoid α)"]
    assert mentioned_names(": (P.parts : Set α).PairwiseDisjoint id", (), variables) == {
        "P", "parts", "Set", "α", "PairwiseDisjoint", "id", "Finpartition", "a"}


def _without(seed_text: str, name: str) -> tuple[str, Offer]:
    """The seed text without its theorem `name`, and that theorem offered back at the root as `name`'s last part
    primed, as the re-insertion benchmark offers Mathlib's theorems."""
    theorem = _declaration(seed_text, name)
    stripped = seed_text[: theorem.start] + seed_text[theorem.end :].removeprefix("\n\n")
    return stripped, _restated(seed_text, name, name.rsplit(".", 1)[-1] + "'", namespace="")


def test_a_lemma_goes_into_the_namespace_of_the_type_it_mentions_not_that_of_its_twin(mathlib_sample_dir: Path) -> None:
    # Mathlib's `LowerSet.top_prod_top` sits in `namespace LowerSet`; its closest sibling is `UpperSet.top_prod_top`.
    seed_text = _seed(mathlib_sample_dir, "Mathlib/Order/UpperLower/Basic.lean")
    stripped, offer = _without(seed_text, "LowerSet.top_prod_top")
    placement = place_lemmas(stripped, [offer], DROPPED).placements[0]
    assert (placement.full_name, placement.anchor) == ("LowerSet.top_prod_top'", "LowerSet.prod_bot")


def test_a_lemma_comes_after_the_definition_it_names_as_written_inside_its_namespace(mathlib_sample_dir: Path) -> None:
    # Mathlib's `PrincipalSeg.subrelIso_apply` writes `f.subrelIso`: read inside `namespace PrincipalSeg`, where it
    # goes, that is the definition just before it, so it follows `apply_subrelIso`, not `lt_top` far above.
    seed_text = _seed(mathlib_sample_dir, "Mathlib/Order/InitialSeg.lean")
    stripped, offer = _without(seed_text, "PrincipalSeg.subrelIso_apply")
    placement = place_lemmas(stripped, [offer], DROPPED).placements[0]
    assert (placement.full_name, placement.anchor) == ("PrincipalSeg.subrelIso_apply'", "PrincipalSeg.apply_subrelIso")


def test_a_lemma_proved_by_unfolding_a_definition_goes_among_the_lemmas_right_after_it(
        mathlib_sample_dir: Path) -> None:
    # Mathlib's `SupHom.coe_id := rfl` follows `SupHom.id`; its closest sibling `SupHom.dual_id` is 170 declarations on.
    seed_text = _seed(mathlib_sample_dir, "Mathlib/Order/Hom/Lattice.lean")
    stripped, offer = _without(seed_text, "SupHom.coe_id")
    placement = place_lemmas(stripped, [offer], DROPPED).placements[0]
    assert (placement.full_name, placement.anchor) == ("SupHom.coe_id'", "SupHom.id_apply")
    assert [holds_by_definition(body) for body in (":= rfl", ":=\n  Iff.rfl", ":= by rfl", ":= by simp")] == [
        True, True, True, False]


def test_a_sibling_named_for_dot_notation_on_a_type_the_lemma_does_not_mention_lends_no_namespace(
        mathlib_sample_dir: Path) -> None:
    # Mathlib's `le_of_inf_le_sup_le` sits at the root; its closest sibling is `Monotone.…`, written at the root.
    seed_text = _seed(mathlib_sample_dir, LATTICE)
    stripped, offer = _without(seed_text, "le_of_inf_le_sup_le")
    placement = place_lemmas(stripped, [offer], DROPPED).placements[0]
    assert (placement.full_name, placement.namespace) == ("le_of_inf_le_sup_le'", "")


def test_the_types_of_the_conclusion_s_variables_name_no_namespace() -> None:
    # Mathlib's `maximal_mem_iff` (Order/Minimal) and `finSuccEquiv_eq_some` (Logic/Equiv/Fin) sit at the root although
    # their conclusions are about an `s : Set α` and an `i : Fin (n + 1)`.
    known = {"Set.mem_setOf_eq", "Fin.succ", "finSuccEquiv"}
    assert head_namespaces("{s : Set α} : Maximal (· ∈ s) x ↔ x ∈ s ∧ ∀ ⦃y⦄, y ∈ s → x ≤ y → x = y", known) == []
    assert head_namespaces("{i : Fin (n + 1)} {j : Fin n} : finSuccEquiv n i = j ↔ i = j.succ", known) == []


def test_an_open_is_kept_only_with_the_namespaces_a_name_of_the_lemma_needs(mathlib_sample_dir: Path) -> None:
    seed_text = _seed(mathlib_sample_dir, LOGIC)
    plain = _restated(seed_text, "forall_swap", "forall_swap'", context=("open Classical Nat",))
    # `some_spec₂` is declared in `namespace Classical` of the file: written unqualified, it needs `open Classical`.
    proof = plain.proof.replace(":=\n  ⟨fun", ":= by\n  have := @some_spec₂\n  exact ⟨fun")
    needing = Offer("needing", plain.statement, proof, "forall_swap''")
    placed = place_lemmas(seed_text, [plain, needing], (*DROPPED, "open BigOperators"))
    _check_read_back(seed_text, placed)
    kept, opened = placed.placements
    assert (kept.anchor, kept.section) == ("forall_swap", "Quantifiers")
    # A lemma never comes before what it uses: this one follows its closest sibling after `Classical.some_spec₂`.
    assert opened.anchor == "forall_and_left"
    assert kept.text.startswith("theorem forall_swap' {p : α → β → Prop}")
    assert opened.text.startswith("section\n\nvariable {α β : Sort*} {p : α → Prop}\nopen Classical\n\n"
                                  "theorem forall_swap'' {p : α → β → Prop}")
    assert opened.text.endswith("\n\nend") and opened.section == ""


def test_a_scoped_notation_needs_its_namespace_open_outside_it_and_a_variable_spelled_like_it_does_not() -> None:
    assert needed_opens(["(x : ℝ) : x < π", "by simp"], ["Real", "Nat", "Topology"], [""], [], set()) == ["Real"]
    assert needed_opens(["(n : ℕ) : 0 < n !", "by positivity"], ["Real", "Nat"], [""], [], set()) == ["Nat"]
    assert needed_opens(["(n : ℕ) : 0 < n !", "by positivity"], ["Real", "Nat"], ["Nat"], [], set()) == []
    assert needed_opens(["{π : ι → Type*} (x : π 0) : x = x", "rfl"], ["Real"], [""], [], set()) == []
