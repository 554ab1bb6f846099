"""The naming checker on real Mathlib text: Mathlib's own names pass, names taken from other theorems fail with a
reason naming what is wrong, and the rules come from conf/naming/mathlib.yaml."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
from omegaconf import OmegaConf

from lean_pool.lean_source import THEOREM_KINDS, namespace_of, read_commands
from operators.contribute.naming import check_name, naming_rules, rules_text, suggested_name

RULES_FILE = Path(__file__).resolve().parents[1] / "conf/naming/mathlib.yaml"
PARTIAL_ORDER = "Mathlib/Order/Defs/PartialOrder.lean"
LINEAR_ORDER = "Mathlib/Order/Defs/LinearOrder.lean"
SUGGESTION_FILES = (PARTIAL_ORDER, LINEAR_ORDER, "Mathlib/Data/Finset/Insert.lean", "Mathlib/Algebra/Group/Basic.lean")


@pytest.fixture(scope="module")
def section() -> dict[str, Any]:
    return OmegaConf.to_container(OmegaConf.load(RULES_FILE))


@pytest.fixture(scope="module")
def rules(section: dict[str, Any]):
    return naming_rules(section)


def theorem_statements(path: Path) -> dict[str, tuple[str, str]]:
    """Each theorem of a fixture file by written name: its statement (the section's variables, then the theorem)
    and its namespace."""
    found = {}
    for command in read_commands(path.read_text(encoding="utf-8")):
        if command.kind in THEOREM_KINDS and command.balanced:
            variables = "\n".join(v.text for v in command.context(frozenset({"variable"})))
            found[command.written_name] = (f"{variables}\n{command.text}", namespace_of(command.scopes))
    return found


@pytest.fixture(scope="module")
def partial_order(mathlib_sample_dir: Path) -> dict[str, tuple[str, str]]:
    return theorem_statements(mathlib_sample_dir / PARTIAL_ORDER)


@pytest.fixture(scope="module")
def linear_order(mathlib_sample_dir: Path) -> dict[str, tuple[str, str]]:
    return theorem_statements(mathlib_sample_dir / LINEAR_ORDER)


@pytest.mark.parametrize("name", ["le_of_lt", "lt_of_le_of_ne", "le_trans", "lt_irrefl", "le_of_eq", "lt_of_lt_of_le"])
def test_mathlib_names_pass(partial_order, rules, name):
    statement, namespace = partial_order[name]
    check = check_name(statement, name, rules, namespace)
    assert check.ok, check.reasons
    assert check.reasons == ()


def test_iff_named_after_its_left_side_passes(linear_order, rules):
    statement, namespace = linear_order["not_le"]
    assert check_name(statement, "not_le", rules, namespace).ok


def test_a_swapped_name_fails_naming_the_unexplained_word(partial_order, rules):
    statement, namespace = partial_order["le_of_lt"]
    check = check_name(statement, "tendsto_of_lt", rules, namespace)
    assert not check.ok
    assert "`tendsto` names nothing in the statement" in check.reasons


def test_a_name_from_another_theorem_fails(partial_order, linear_order, rules):
    statement, namespace = partial_order["le_of_lt"]
    assert "max_def" in linear_order
    check = check_name(statement, "max_def", rules, namespace)
    assert not check.ok
    assert any("`max`" in reason for reason in check.reasons)


def test_iff_without_iff_describing_the_right_side_fails(linear_order, rules):
    statement, namespace = linear_order["not_le"]
    check = check_name(statement, "not_le_lt", rules, namespace)
    assert not check.ok
    assert any("`↔` but the name has no `iff`" in reason and "`lt`" in reason for reason in check.reasons)
    assert check_name(statement, "not_le_iff_lt", rules, namespace).ok


def test_a_repeated_namespace_fails(rules):
    statement = "theorem succ_pos (n : ℕ) : 0 < n + 1 := Nat.zero_lt_succ n"
    assert check_name(statement, "succ_pos", rules, "Nat").ok
    check = check_name(statement, "nat_succ_pos", rules, "Nat")
    assert not check.ok
    assert "the name repeats its namespace `Nat`" in check.reasons
    assert check_name(statement, "Nat.succ_pos", rules).ok


def test_snake_case_and_constant_case(rules):
    statement = "theorem foo (a b : ℕ) : Set.Icc a b ⊆ Set.Ici a := sorry"
    assert check_name(statement, "Icc_subset_Ici", rules, "Set").ok
    check = check_name(statement, "IccSubset_Ici", rules, "Set")
    assert not check.ok
    assert any("not snake_case" in reason for reason in check.reasons)


def test_special_forms_explain_their_words(rules):
    statement = "theorem foo {a b : ℤ} (ha : 0 < a) (hb : 0 ≤ b) : 0 < a + b := sorry"
    assert check_name(statement, "add_pos", rules).ok
    check = check_name(statement, "add_neg", rules)
    assert "`neg` names nothing in the statement" in check.reasons


@pytest.mark.slow
def test_suggested_names_pass_the_check(mathlib_sample_dir, rules):
    checked = 0
    for relative in SUGGESTION_FILES:
        for statement, namespace in theorem_statements(mathlib_sample_dir / relative).values():
            name = suggested_name(statement, rules, namespace)
            check = check_name(statement, name, rules, namespace)
            assert check.ok, (name, check.reasons, statement)
            assert name == suggested_name(statement, rules, namespace)
            checked += 1
    assert checked > 100


def test_suggested_name_reads_like_mathlib(partial_order, rules):
    statement, namespace = partial_order["le_of_lt"]
    assert suggested_name(statement, rules, namespace) == "le_of_lt"


def test_a_word_added_to_the_dictionary_changes_the_verdict(partial_order, section):
    statement, namespace = partial_order["le_of_lt"]
    assert not check_name(statement, "le_of_strictly_below", naming_rules(section), namespace).ok
    widened = copy.deepcopy(section)
    widened["symbols"]["<"] = [*widened["symbols"]["<"], "strictly", "below"]
    assert check_name(statement, "le_of_strictly_below", naming_rules(widened), namespace).ok
    narrowed = copy.deepcopy(section)
    narrowed["symbols"]["≤"] = ["leq"]
    check = check_name(statement, "le_of_lt", naming_rules(narrowed), namespace)
    assert "`le` names nothing in the statement" in check.reasons


def test_rules_text_states_the_convention(rules):
    text = rules_text(rules)
    assert "snake_case" in text
    assert "≤ le/ge" in text
    assert "`of`" in text


ADD_COMM = "theorem x (a b : ℕ) (h : 0 < a) : a + b = b + a := sorry"
LE_OF_LT = "theorem x {a b : ℕ} : a < b → a ≤ b := sorry"
ONLY_PROPERTIES = "the name is made of property words alone"


@pytest.mark.parametrize(("name", "reason"), [
    ("aux", f"{ONLY_PROPERTIES} (`aux`): it must name the conclusion's symbols or constants too"),
    ("spec", f"{ONLY_PROPERTIES} (`spec`): it must name the conclusion's symbols or constants too"),
    ("a_b", "`a` names nothing in the statement"),
    ("pos_of_lt", "no word before `of` names the conclusion (it offers `add`); hypotheses come after `of`"),
    ("add_mul", "`mul` names nothing in the statement"),
])
def test_names_the_old_checker_took_for_add_comm_are_refused(rules, name, reason):
    check = check_name(ADD_COMM, name, rules)
    assert not check.ok and reason in check.reasons
    assert check_name(ADD_COMM, "add_comm", rules).ok


def test_a_hypothesis_named_as_the_conclusion_is_refused(rules):
    assert check_name(LE_OF_LT, "le_of_lt", rules).ok
    assert check_name(LE_OF_LT, "lt_of_le", rules).reasons == (
        "no word before `of` names the conclusion (it offers `ge`, `le`); hypotheses come after `of`",
        "`le` stands after `of` but names the conclusion, not a hypothesis")
    assert check_name(LE_OF_LT, "lt_iff_le", rules).reasons == ("`iff` names nothing in the statement",)


def test_reordered_words_are_refused(rules):
    zero = "theorem x (a : ℕ) : a + 0 = a := sorry"
    assert check_name(zero, "add_zero", rules).ok
    assert check_name(zero, "zero_add", rules).reasons == (
        "`add` comes after `zero` in the name but before it in the conclusion: words follow the order of the symbols",)
    assert check_name(ADD_COMM, "comm_add", rules).reasons == (
        "`comm` is a property word: it follows the words it qualifies (`add_comm`, not `comm_add`), it does not open "
        "a name",)
    not_le = "theorem x {a b : ℕ} : ¬a ≤ b ↔ b < a := sorry"
    assert check_name(not_le, "not_le", rules).ok
    assert not check_name(not_le, "le_not", rules).ok
    assert check_name(not_le, "iff_not_le", rules).reasons == (
        "`not` stands after `iff` but names the left side only: the left side is named before `iff`, the right side "
        "after it",
        "the name starts with `iff`: the left side of the `↔` is named first")


def test_property_words_alone_are_refused(rules):
    check = check_name(ADD_COMM, "comm_assoc", rules)
    reason = f"{ONLY_PROPERTIES} (`comm`, `assoc`): it must name the conclusion's symbols or constants too"
    assert not check.ok and reason in check.reasons


def test_a_name_from_the_same_file_is_refused(partial_order, rules):
    statement, namespace = partial_order["le_of_lt"]
    assert check_name(statement, "lt_of_le_of_lt", rules, namespace).reasons == (
        "no word before `of` names the conclusion (it offers `ge`, `le`); hypotheses come after `of`",
        "`le` stands after `of` but names the conclusion, not a hypothesis")


def test_the_namespace_of_a_dotted_name_is_judged(rules):
    assert check_name(LE_OF_LT, "LT.lt.le", rules).ok
    reasons = check_name(ADD_COMM, "Foo.add_comm", rules).reasons
    assert reasons == ("the namespace `Foo` names nothing in the statement",)


@pytest.mark.parametrize(("statement", "namespace", "name"), [
    ("theorem x (a b : ℕ) : a + b = b + a := sorry", "", "add_comm"),
    ("theorem x (a b c : ℕ) : a + b + c = a + (b + c) := sorry", "", "add_assoc"),
    ("theorem x (a : ℕ) : a + 0 = a := sorry", "", "add_zero"),
    ("theorem x {a b : ℤ} (ha : 0 < a) (hb : 0 < b) : 0 < a * b := sorry", "", "mul_pos"),
    ("theorem x (m n : ℕ) (h : m ≤ n) : m < n + 1 := sorry", "Nat", "lt_add_one_of_le"),
    ("theorem x {a b : ℕ} (h : a < b) : a ≤ b := sorry", "", "le_of_lt"),
    ("theorem x (f g : InfTopHom α β) (a : α) : (f ⊓ g) a = f a ⊓ g a := sorry", "InfTopHom", "inf_apply"),
    ("theorem x (f g h : C) : (f.comp g).comp h = f.comp (g.comp h) := sorry", "Hom", "comp_assoc"),
    ("theorem x (a : α) : a ⊓ a = a := sorry", "", "inf_self"),
    ("theorem x {f g : ι → α} (h : ∀ i, f i = g i) : ⨅ i, f i = ⨅ i, g i := sorry", "", "iInf_congr"),
    ("theorem x : a ⊓ b = a ↔ a ≤ b := sorry", "", "inf_eq_iff"),
    ("theorem x (n : ℕ) : (range n).length = n := sorry", "LTSeries", "length_range"),
    ("theorem x {f : α → β} (a b : α) : Ico a b ⊆ Icc a b := sorry", "Set", "Ico_subset_Icc"),
    ("theorem x : (∅ : Set α) = ⊥ := sorry", "", "empty_eq_bot"),
    ("theorem x (f : α → β) (g : β → γ) (s : Set α) : map g (map f s) = map (g ∘ f) s := sorry", "", "map_map"),
    ("theorem x (x : α) : xᶜᶜ = x := sorry", "", "compl_compl"),
    ("theorem x (x y : α) : x ⊓ y ⊓ x \\ y = ⊥ := sorry", "", "inf_inf_sdiff"),
    ("theorem x : sumCongr (Equiv.refl α) (Equiv.refl β) = Equiv.refl (α ⊕ β) := sorry", "Equiv", "sumCongr_refl"),
    ("theorem x (e : α ≃ β) : range e = univ := sorry", "Equiv", "range_eq_univ"),
    ("theorem x (x : α) : Equiv.refl α x = x := sorry", "Equiv", "refl_apply"),
    ("theorem x : IsGLB s a ↔ sInf s = a := sorry", "", "isGLB_iff_sInf_eq"),
    ("theorem x (a b : α) : (Ioc a b : Set α) = Set.Ioc a b := sorry", "Finset", "coe_Ioc"),
    ("theorem x (f : α ≃ β) (g : β ≃ γ) : (f.trans g : α → γ) = g ∘ f := sorry", "Equiv", "coe_trans"),
    ("theorem x (a : α) : (pure a : Filter α) ≤ f ↔ a ∈ f := sorry", "Filter", "pure_le_iff"),
    ("theorem x : Function.Injective (compl : α → α) := sorry", "", "compl_injective"),
    ("theorem x {f g : α → β} : f =ᶠ[l] g ↔ g =ᶠ[l] f := sorry", "Filter", "eventuallyEq_comm"),
    ("theorem x {p : α → Prop} : (∀ᶠ x in f, p x) ↔ {x | p x} ∈ f := sorry", "Filter", "eventually_iff"),
    ("theorem x {f g : ∀ i, α i} : Disjoint f g ↔ ∀ i, Disjoint (f i) (g i) := sorry", "Pi", "disjoint_iff"),
    ("theorem x {f : α → β} (h : Monotone f) : Monotone fun x => f x := sorry", "", "monotone"),
])
def test_suggested_names_are_mathlibs(rules, statement, namespace, name):
    assert suggested_name(statement, rules, namespace) == name


@pytest.mark.parametrize(("statement", "namespace", "name"), [
    # Order/SuccPred/WithBot, Order/Interval/Basic, Order/Heyting/Regular: a cast says `coe` where its bracket opens.
    ("theorem x (a : α) : succ (a : WithBot α) = Order.succ a := sorry", "WithBot", "succ_coe"),
    ("theorem x [BoundedOrder α] : ((⊤ : Interval α) : Set α) = univ := sorry", "Interval", "coe_top"),
    ("theorem x (a : Regular α) : toRegular (a : α) = a := sorry", "Heyting.Regular", "toRegular_coe"),
    # Order/Filter/Prod, Order/Sublattice, Order/Basic: an `↔` whose left side says the same on both sides of its
    # relation is named by that side alone; any other keeps its `iff` (`isTop_toDual_iff`).
    ("theorem x {f₁ f₂ : Filter α} {g₁ g₂ : Filter β} [NeBot f₁] [NeBot g₁] : f₁ ×ˢ g₁ ≤ f₂ ×ˢ g₂ ↔ f₁ ≤ f₂ ∧ g₁ ≤ g₂ "
     ":= sorry", "Filter", "prod_le_prod"),
    ("theorem x (hs_sup hs_inf ht_sup ht_inf) : mk s hs_sup hs_inf ≤ mk t ht_sup ht_inf ↔ s ⊆ t := sorry",
     "Sublattice", "mk_le_mk"),
    ("theorem x : const β a < const β b ↔ a < b := sorry", "Function", "const_lt_const"),
    ("theorem x : IsTop (toDual a) ↔ IsBot a := sorry", "", "isTop_toDual_iff"),
    # Order/Interval/Finset/Basic: a special form with a bracket is said whole (`[[a, b]]` is `uIcc`, not `list`).
    ("theorem x (a b : α) : [[a, b]] = [[b, a]] := sorry", "Finset", "uIcc_comm"),
])
def test_suggested_casts_mirrored_sides_and_bracket_forms_are_mathlibs(rules, statement, namespace, name):
    assert suggested_name(statement, rules, namespace) == name


def test_a_side_named_across_its_head_word_is_refused(rules):
    frequently = "theorem x (f : Filter α) : (∃ᶠ _ in f, True) ↔ NeBot f := sorry"
    assert check_name(frequently, "frequently_true_iff_neBot", rules).ok
    assert check_name(frequently, "neBot_iff_true_frequently", rules).reasons == (
        "`neBot` stands before `iff` but names the right side only: the left side is named before `iff`, the right "
        "side after it",)
    himp = "theorem x : a ⇨ b = unit := rfl"
    assert check_name(himp, "himp_eq", rules, "PUnit").ok
    assert check_name(himp, "eq_himp", rules, "PUnit").reasons == (
        "`himp` stands after `eq` but names the left side only: the left side is named before `eq`, the right side "
        "after it",)
    ioi = "theorem x (a : α) : atTop = comap ((↑) : Ioi a → α) atTop := sorry"
    assert check_name(ioi, "atTop_Ioi_eq", rules, "Filter").ok


def test_a_name_ending_in_of_is_refused(rules):
    sup = ("theorem x (h : ∀ x ∈ s, ∀ y ∈ s, f (x ⊔ y) = f x ⊔ f y) : MonotoneOn f s := sorry")
    assert check_name(sup, "of_map_sup", rules, "MonotoneOn").ok
    assert check_name(sup, "sup_map_of", rules, "MonotoneOn").reasons == (
        "the name ends with `of`: the hypothesis it introduces is named after it",)
    assert check_name("theorem x (X : Type u) : (LinOrd.of X : Type u) = X := rfl", "coe_of", rules, "LinOrd").ok


def test_a_galois_connections_variables_are_words(rules):
    statement = ("variable {l : α → β} {u : β → α} (gc : GaloisConnection l u)\n"
                 "theorem x {s : Set β} : u (sInf s) = ⨅ a ∈ s, u a := sorry")
    assert check_name(statement, "u_sInf", rules, "GaloisConnection").ok
    assert check_name(statement, "sInf_u", rules, "GaloisConnection").reasons == (
        "`u` comes after `sInf` in the name but before it in the conclusion: words follow the order of the symbols",)
    assert check_name(statement, "a_sInf", rules, "GaloisConnection").reasons == (
        "`a` names nothing in the statement",)
    assert check_name(statement.replace("GaloisConnection l u", "Monotone u"), "u_sInf", rules).reasons == (
        "`u` names nothing in the statement",)


@pytest.mark.parametrize(("statement", "namespace", "name"), [
    ("theorem x (h : a ⩿ b) : a ≤ b := h.1", "", "WCovBy.le"),
    ("theorem x {X Y Z : Lat} (f : X ⟶ Y) (g : Y ⟶ Z) (x : X) : (f ≫ g) x = g (f x) := sorry", "Lat", "comp_apply"),
    ("theorem x [Nonempty ι] : ⨅ _ : ι, a = a := sorry", "", "iInf_const"),
])
def test_mathlib_names_of_acronyms_categories_and_constants_pass(rules, statement, namespace, name):
    assert check_name(statement, name, rules, namespace).ok


DIRECTED_MONO_COMP = ("theorem x (r : α → α → Prop) {ι} {rb : β → β → Prop} {g : α → β} {f : ι → α}\n"
                      "    (hg : ∀ ⦃x y⦄, r x y → rb (g x) (g y)) (hf : Directed r f) : Directed rb (g ∘ f) := sorry")


def test_a_property_word_opens_a_name_by_a_side_or_dot_notation(rules):
    ico = "theorem x {a b : α} : a ∈ Ico a b ↔ a < b := sorry"
    assert check_name(ico, "left_mem_Ico", rules, "Set").ok
    assert check_name(ADD_COMM, "left_add", rules).reasons == (
        "`left` is a property word: it follows the words it qualifies (`add_comm`, not `comm_add`), it does not "
        "open a name",)
    assert check_name(DIRECTED_MONO_COMP, "Directed.mono_comp", rules).ok
    assert check_name(DIRECTED_MONO_COMP, "mono_comp", rules).reasons == (
        "`mono` is a property word: it follows the words it qualifies (`add_comm`, not `comm_add`), it does not "
        "open a name",)


def test_root_and_dot_notation_namespaces_pass(rules):
    assert check_name("theorem x : IsCompl x y ↔ IsCompl y x := sorry", "_root_.isCompl_comm", rules, "IsCompl").ok
    image2 = ("theorem x (ha : IsGreatest s a) (hb : IsLeast t b) : IsGreatest (Set.image2 f s t) (f a b) := "
              "sorry")
    assert check_name(image2, "IsGreatest.isGreatest_image2_of_isLeast", rules).ok


def test_a_long_name_may_keep_one_word_no_symbol_names(rules):
    triangle = "theorem x (a b c : α) : a \\ c ≤ a \\ b ⊔ b \\ c := sorry"
    assert check_name(triangle, "sdiff_le_sup_triangle", rules).ok
    assert check_name(triangle, "sdiff_triangle", rules).reasons == ("`triangle` names nothing in the statement",)
    assert check_name(triangle, "sdiff_le_iff", rules).reasons == ("`iff` names nothing in the statement",)
    pairwise = ("theorem x {F} [EquivLike F Y X] (f : F) (p : X → X → Prop) : Pairwise (p on f) ↔ Pairwise p := "
                "sorry")
    assert check_name(pairwise, "pairwise_comp_iff", rules, "EquivLike").ok
    assert check_name(pairwise, "pairwise_le_iff", rules, "EquivLike").reasons == (
        "`le` names nothing in the statement",)


def test_apply_opens_a_name_only_when_the_conclusion_starts_with_an_application(rules):
    injective = "theorem x (f : α ≃ β) {x y : α} : f x = f y ↔ x = y := sorry"
    assert check_name(injective, "apply_eq_iff_eq", rules, "Equiv").ok
    inf = "theorem x (f g : InfTopHom α β) (a : α) : (f ⊓ g) a = f a ⊓ g a := sorry"
    assert check_name(inf, "inf_apply", rules, "InfTopHom").ok
    assert check_name(inf, "apply_inf", rules, "InfTopHom").reasons == (
        "`apply` is a property word: it follows the words it qualifies (`add_comm`, not `comm_add`), it does not "
        "open a name",)
