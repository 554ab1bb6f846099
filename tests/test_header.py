"""Header/body split and position shifting, on the MathlibLemma sample and real REPL answers."""

from __future__ import annotations

import json
from pathlib import Path

from lean_pool.header import shift_positions, split_header
from lean_pool.protocol import split_frames


def test_every_sample_file_splits_into_its_imports_and_the_lines_after_them(mathliblemma_dir: Path) -> None:
    files = sorted(mathliblemma_dir.rglob("*.lean"))
    assert files
    for path in files:
        text = path.read_text()
        lines = text.splitlines()
        split = split_header(text)
        imports = [line for line in lines if line.startswith("import ")]
        assert imports, path
        assert split.header == "\n".join(imports), path
        assert split.body.splitlines() == lines[split.line_offset:], path
        assert not split.body.lstrip().startswith("import"), path


def test_comments_before_and_among_imports_are_not_part_of_the_header() -> None:
    snippet = (
        "-- a file comment\n"
        "/- a block /- nested -/ comment\n"
        "   over lines -/\n"
        "import Mathlib  -- trailing remark\n"
        "\n"
        "import Aesop\n"
        "\n"
        "theorem t : True := trivial\n"
    )
    split = split_header(snippet)
    assert split.header == "import Mathlib\nimport Aesop"
    assert split.body == "theorem t : True := trivial\n"
    assert snippet.splitlines()[split.line_offset] == "theorem t : True := trivial"


def test_snippets_differing_only_in_comments_share_a_header() -> None:
    plain = split_header("import Mathlib\nexample : True := trivial")
    commented = split_header("/- copyright -/\nimport   Mathlib -- all of it\nexample : True := trivial")
    assert plain.header == commented.header == "import Mathlib"


def test_body_starting_on_a_comment_line_keeps_its_columns() -> None:
    split = split_header("import Mathlib\n/- note -/ theorem t : True := trivial")
    assert split.line_offset == 1
    assert split.body == "           theorem t : True := trivial"
    assert split.body.index("theorem") == len("/- note -/ ")


def test_snippet_without_imports_has_an_empty_header_and_keeps_its_lines() -> None:
    snippet = "\n  theorem t : True := trivial\n"
    split = split_header(snippet)
    assert split.header == ""
    assert split.line_offset == 1
    assert split.body == "  theorem t : True := trivial\n"


def test_doc_comments_belong_to_the_body() -> None:
    for doc in ("/-- The answer. -/", "/-! # Module doc -/"):
        split = split_header(f"import Mathlib\n{doc}\ntheorem t : True := trivial")
        assert split.body.startswith(doc)
        assert split.line_offset == 1


def test_imports_after_the_first_command_stay_in_the_body_for_lean_to_reject() -> None:
    split = split_header("import Mathlib\nopen Nat\nimport Aesop\n")
    assert split.header == "import Mathlib"
    assert split.body == "open Nat\nimport Aesop\n"


def test_unterminated_block_comment_stays_in_the_body_for_lean_to_report() -> None:
    split = split_header("import Mathlib\n/- never closed\ntheorem t : True := trivial")
    assert split.header == "import Mathlib"
    assert split.body.startswith("/- never closed")


def test_header_only_snippet_has_an_empty_body() -> None:
    split = split_header("import Mathlib\n")
    assert split.header == "import Mathlib"
    assert split.body.strip() == ""


def test_shift_positions_moves_every_position_line_and_leaves_the_input_alone(transcripts_dir: Path) -> None:
    recorded = (transcripts_dir / "self_proof_check.expected.out").read_text()
    answers = [json.loads(frame) for frame in split_frames(recorded)]
    answer = next(a for a in answers if "tactics" in a and "sorries" in a and "messages" in a)
    original = json.loads(json.dumps(answer))
    shifted = shift_positions(answer, 4)
    assert answer == original
    for field in ("messages", "sorries", "tactics"):
        for before, after in zip(answer[field], shifted[field], strict=True):
            assert after["pos"]["line"] == before["pos"]["line"] + 4
            assert after["endPos"]["line"] == before["endPos"]["line"] + 4
            assert after["pos"]["column"] == before["pos"]["column"]
    assert shifted["env"] == answer["env"]


def test_shifted_diagnostics_point_at_the_callers_line() -> None:
    snippet = "import Mathlib\n\n-- intro\ntheorem t : 1 = 1 := by\n  sorry\n"
    split = split_header(snippet)
    body_answer = {"sorries": [{"pos": {"line": 2, "column": 2}, "endPos": {"line": 2, "column": 7}}], "env": 1}
    sorry_line = shift_positions(body_answer, split.line_offset)["sorries"][0]["pos"]["line"]
    assert snippet.splitlines()[sorry_line - 1] == "  sorry"
