"""Grounding text: unknown names read from Lean's diagnostics, real names near them, the prompt section."""

from __future__ import annotations

from pathlib import Path

from omegaconf import OmegaConf

from operators.llm import prompts
from operators.llm.prompts import with_preamble
from operators.llm.sim.scripts import last_lean_block
from operators.retrieval.grounding import NameIndex, grounding_text, name_tokens, unknown_names

REPO = Path(__file__).resolve().parents[1]
TEMPLATES = {"header": "Real declarations:", "missing_header": "`{name}` is unknown; close names:"}


def test_unknown_names_are_read_in_old_and_new_wording_once_each() -> None:
    diagnostics = [
        {"severity": "error", "message": "unknown identifier 'Nat.add_comm_of'"},
        {"severity": "error", "data": "Unknown constant `Real.sqrt_lt_sqrt_iff'`"},
        {"severity": "error", "message": "unknown identifier 'Nat.add_comm_of'"},
        {"severity": "error", "message": "type mismatch"},
    ]
    assert unknown_names(diagnostics) == ["Nat.add_comm_of", "Real.sqrt_lt_sqrt_iff'"]


def test_name_tokens_split_namespaces_snake_and_camel_case() -> None:
    assert name_tokens("Nat.succ_le_iff") == {"nat", "succ", "le", "iff"}
    assert name_tokens("IsOpen.inter") == {"is", "open", "inter"}


def test_nearest_names_share_words_and_spelling_with_the_missing_one() -> None:
    index = NameIndex(["Nat.add_comm", "Nat.mul_comm", "Int.add_comm", "Nat.add_assoc", "Set.union_comm"])
    assert index.nearest("Nat.add_comm'", 2) == ["Nat.add_comm", "Int.add_comm"]
    assert index.nearest("Totally.unrelated", 3) == []


def test_grounding_section_lists_declarations_then_nearest_names() -> None:
    text = grounding_text(
        TEMPLATES,
        [{"name": "Nat.add_comm", "signature": "(n m : ℕ) : n + m = m + n"}],
        {"Nat.add_com": ["Nat.add_comm"], "Nowhere.x": []},
    )
    assert text == (
        "Real declarations:\n```lean\nNat.add_comm (n m : ℕ) : n + m = m + n\n```\n\n"
        "`Nat.add_com` is unknown; close names:\n- Nat.add_comm"
    )
    assert grounding_text(TEMPLATES, [], {}) == ""


def test_grounding_goes_first_in_the_last_message_only_when_there_is_some() -> None:
    messages = [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]
    assert with_preamble(messages, "") == messages
    assert with_preamble(messages, "g") == [{"role": "system", "content": "s"}, {"role": "user", "content": "g\n\nu"}]
    assert messages[-1]["content"] == "u"


def test_the_code_to_repair_stays_the_last_lean_block_of_a_grounded_prompt() -> None:
    templates = OmegaConf.to_container(OmegaConf.load(REPO / "conf" / "mine.yaml").prompts)
    current = "theorem t (n : ℕ) : n + 0 = n := sorry"
    attempts = [{"code": current, "diagnostics": [{"severity": "error", "message": "unknown identifier 'Nat.foo'"}]}]
    messages = prompts.formalize_messages(templates, attempts, "error-free code")
    section = grounding_text(TEMPLATES, [{"name": "Nat.add_zero", "signature": "(n : ℕ) : n + 0 = n"}],
                             {"Nat.foo": ["Nat.add_zero"]})
    grounded = with_preamble(messages, section)
    assert "Nat.add_zero (n : ℕ) : n + 0 = n" in grounded[-1]["content"]
    assert last_lean_block(grounded[-1]["content"]) == current


def test_a_name_declared_twice_is_offered_once() -> None:
    index = NameIndex(["Nat.add_comm", "Nat.add_comm", "Nat.add_assoc"])
    assert index.nearest("Nat.add_com", 3) == ["Nat.add_comm", "Nat.add_assoc"]
