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
