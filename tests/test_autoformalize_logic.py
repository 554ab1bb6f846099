"""The autoformalize job's pure logic on real ProofNet rows, without Ray, Lean or an endpoint: the file Lean checks
(the input's header, then the model's theorem), agreement with the human reference, the row once its repair loop
stopped, and reading the input (one row per line whatever is wrong with it, ids unique)."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from lean_pool.session_check import CheckResult
from operators.autoformalize.direct import AutoformalizeOperator, compiled, reference_match, under_header
from operators.formalize import rejection
from operators.llm.calls import LLMResult
from operators.llm.sim.scripts import last_lean_block
from operators.repair import RepairLoop, run_loop
from operators.rows.formalizations import (
    InputRules,
    formalizations_table,
    jsonl_rows,
    problem_id,
    problem_row,
    theorem_name,
    with_unique_ids,
)
from tests.autoformalize_support import (
    ERROR_MARK,
    TextPool,
    autoformalize_settings,
    job_config,
    llm_settings,
    pending_row,
)
from tests.loop_script import Script

MARKER = "error-free code"
NOW = datetime(2025, 6, 1, 12, 0, tzinfo=UTC)
RULES = InputRules(max_tokens=500, chars_per_token=3.5, default_header="import Mathlib\n")
PROVENANCE = {"git_commit": "abc123"}
SOURCE = "proofnet.jsonl"

COMPILES = CheckResult(status="sorry", ok=True, reasons=[])
TIMEOUT = CheckResult(status="timeout", ok=False, reasons=["timeout: no answer within 60 s"])
REFUSED = CheckResult(status="refused", ok=False, reasons=["`#eval` runs programs"])


def lean_error(text: str) -> CheckResult:
    return CheckResult(status="error", ok=False, reasons=["Lean reported errors"],
                       messages=[{"severity": "error", "pos": {"line": 6, "column": 2}, "data": text}])


UNKNOWN = lean_error("unknown identifier 'Complex.cubeRoot'")


def answer(code: str) -> LLMResult:
    return LLMResult(text=f"The cube of the point.\n{MARKER}\n```lean\n{code}\n```", model="sim/formalizer")


@pytest.fixture(scope="session")
def proofnet_bytes(shared_dir: Path) -> bytes:
    return (shared_dir / "fixtures" / "proofnet-lean4-sample" / "proofnet.jsonl").read_bytes()


@pytest.fixture(scope="session")
def proofnet(proofnet_bytes: bytes) -> dict[str, dict[str, Any]]:
    return {record["name"]: record for record in map(json.loads, proofnet_bytes.decode("utf-8").splitlines())}


# --- the file Lean checks ------------------------------------------------------------------------------------


def test_a_repeated_header_appears_once_and_the_theorem_follows(proofnet):
    record = proofnet["Shakarchi_exercise_1_13a"]
    repeated = f"import Mathlib\n\n{record['header'].removeprefix('import Mathlib')}\n{record['formal_statement']}"
    file = under_header(record["header"], repeated)
    assert file == f"{record['header']}\n{record['formal_statement']}\n"
    assert file.count("import Mathlib") == 1
    assert file.count("open Complex Filter Function Metric Finset") == 1
    assert file.count("open scoped BigOperators Topology") == 1


def test_a_header_line_written_again_with_other_spacing_is_still_dropped(proofnet):
    record = proofnet["Pugh_exercise_2_12a"]  # header ends with `noncomputable section`
    repeated = ("import Mathlib\nopen  Filter   Real Function\n  open scoped Topology\nnoncomputable section\n\n"
                + record["formal_statement"])
    assert under_header(record["header"], repeated) == f"{record['header']}\n{record['formal_statement']}\n"


def test_the_answers_own_opens_stay_and_its_imports_give_way_to_the_headers(proofnet):
    record = proofnet["Putnam_exercise_1998_b6"]
    code = f"import Mathlib.Data.Real.Sqrt\nimport Mathlib\n\nopen Real\n\n{record['formal_statement']}"
    file = under_header(record["header"], code)
    assert file == f"{record['header']}\nopen Real\n\n{record['formal_statement']}\n"
    assert "Mathlib.Data.Real.Sqrt" not in file, "Lean reads imports only at the head: the header's are the file's"


def test_comments_and_docstrings_inside_the_answers_commands_are_kept(proofnet):
    record = proofnet["Shakarchi_exercise_1_13a"]
    theorem = record["formal_statement"].replace(":\n  f a = f b", ": -- f is constant on Ω\n  f a = f b")
    code = f"import Mathlib -- everything\n\n/-- Shakarchi 1.13 (a). -/\n{theorem}"
    file = under_header(record["header"], code)
    assert f"/-- Shakarchi 1.13 (a). -/\n{theorem}" in file and "-- f is constant on Ω" in file


def test_a_comment_line_before_the_theorem_is_kept(proofnet):
    record = proofnet["Shakarchi_exercise_1_13a"]
    code = f"-- holomorphic with constant real part\n{record['formal_statement']}"
    assert "-- holomorphic with constant real part" in under_header(record["header"], code)


# --- agreement with the reference ----------------------------------------------------------------------------


def test_the_reference_reformatted_is_still_the_reference(proofnet):
    record = proofnet["Shakarchi_exercise_1_13a"]
    reference = record["formal_statement"]
    one_line = " ".join(reference.split())
    spaced = reference.replace("(", "( ").replace(")", " )").replace(" : ", "  :\n   ")
    assert one_line != reference and spaced != reference
    assert reference_match(reference, one_line) is True
    assert reference_match(reference, spaced) is True
    assert reference_match(reference, under_header(record["header"], one_line)) is True, "header in the statement"


def test_the_axler_statement_as_the_text_says_it_differs_from_its_reference(proofnet):
    reference = proofnet["Axler_exercise_1_2"]["formal_statement"]
    as_the_text_says = reference.replace("= -1", "= 1")
    assert as_the_text_says != reference
    assert reference_match(reference, as_the_text_says) is False


def test_another_theorem_name_is_not_the_reference(proofnet):
    reference = proofnet["Axler_exercise_1_2"]["formal_statement"]
    assert reference_match(reference, reference.replace("Axler_exercise_1_2", "cube_root")) is False


@pytest.mark.parametrize(("reference", "statement"), [(None, "s"), ("r", None), ("", "s"), ("r", "")])
def test_without_a_reference_or_a_statement_there_is_no_agreement_to_report(proofnet, reference, statement):
    reference = proofnet["Axler_exercise_1_2"]["formal_statement"] if reference else reference
    statement = proofnet["Axler_exercise_1_2"]["formal_statement"] if statement else statement
    assert reference_match(reference, statement) is None


# --- the row once the loop stopped ------------------------------------------------------------------------------


def pending(proofnet, name: str = "Axler_exercise_1_2", **changes: Any) -> dict[str, Any]:
    return {**problem_row(proofnet[name], SOURCE, RULES, PROVENANCE), **changes}


async def autoformalize(row: dict[str, Any], script: Script, max_repairs: int = 2) -> dict[str, Any]:
    """The row after the draft-and-repair loop ran on the script (as AutoformalizeOperator runs it)."""
    loop = RepairLoop(max_repairs, MARKER, partial(under_header, row["header"]), rejection)
    stop = await run_loop(loop, loop.ask(), script.check, script.ask)
    return compiled(row, stop, loop, NOW)


async def test_a_draft_that_compiles_is_compiled_under_the_header_and_matches_its_reference(proofnet):
    row = pending(proofnet)
    script = Script([COMPILES], [answer(row["reference"])])
    done = await autoformalize(row, script)
    assert (done["status"], done["repairs"], done["reference_match"]) == ("compiled", 0, True)
    assert done["statement"] == f"{row['header']}\n{row['reference']}\n" == script.checked[0]
    assert [attempt["status"] for attempt in done["attempts"]] == ["sorry"]
    assert done["finished_at"] is None, "the faithfulness stage finishes the row"
    assert row["status"] == "pending" and row["statement"] is None, "the input row is left as it was"
    assert formalizations_table([done]).num_rows == 1


async def test_a_statement_repaired_to_say_what_the_text_says_disagrees_with_the_unfaithful_reference(proofnet):
    row = pending(proofnet)
    faithful = row["reference"].replace("= -1", "= 1")
    script = Script([UNKNOWN, COMPILES], [answer("theorem Axler_exercise_1_2 : Complex.cubeRoot 1 = 1 := sorry"),
                                          answer(faithful)])
    done = await autoformalize(row, script)
    assert (done["status"], done["repairs"], done["reference_match"]) == ("compiled", 1, False)
    assert done["statement"].endswith(f"{faithful}\n")
    assert [attempt["status"] for attempt in done["attempts"]] == ["error", "sorry"]
    assert script.asked[1].history[0]["diagnostics"][0]["message"] == "unknown identifier 'Complex.cubeRoot'"
    assert script.used_up()


async def test_a_problem_without_a_reference_compiles_with_no_agreement_to_report(proofnet):
    row = pending(proofnet, reference=None)
    done = await autoformalize(row, Script([COMPILES], [answer(proofnet["Axler_exercise_1_2"]["formal_statement"])]))
    assert (done["status"], done["reference_match"]) == ("compiled", None)


async def test_refused_code_is_final_at_once_and_never_repaired(proofnet):
    row = pending(proofnet)
    script = Script([REFUSED], [answer("#eval 1\ntheorem Axler_exercise_1_2 : True := sorry")])
    done = await autoformalize(row, script)
    assert done["status"] == "refused" and done["reason"].startswith("refused before Lean")
    assert "`#eval` runs programs" in done["reason"]
    assert (done["finished_at"], done["repairs"], done["statement"]) == (NOW, 0, None)
    assert len(script.asked) == 1 and script.used_up()


async def test_a_restated_mathlib_name_is_not_compilable_not_refused(proofnet):
    row = pending(proofnet)
    script = Script([lean_error("'Complex.ext' has already been declared")], [answer("theorem Complex.ext : True")])
    done = await autoformalize(row, script)
    assert done["status"] == "not_compilable" and "Complex.ext" in done["reason"]
    assert "repair rounds" not in done["reason"] and len(script.asked) == 1


@pytest.mark.parametrize("max_repairs", [0, 2])
async def test_a_statement_that_never_compiles_says_how_many_repair_rounds_it_had(proofnet, max_repairs):
    row = pending(proofnet)
    script = Script([UNKNOWN] * (max_repairs + 1), [answer("theorem Axler_exercise_1_2 : x = 1 := sorry")]
                    * (max_repairs + 1))
    done = await autoformalize(row, script, max_repairs)
    assert (done["status"], done["repairs"], done["finished_at"]) == ("not_compilable", max_repairs, NOW)
    assert done["reason"] == (f"Lean still reports errors after {max_repairs} repair rounds "
                              f"(attempt {max_repairs + 1}: error: Lean reported errors)")
    assert len(done["attempts"]) == max_repairs + 1 and script.used_up()
    assert formalizations_table([done]).num_rows == 1


async def test_drafts_that_never_held_code_say_no_lean_check_ran(proofnet):
    row = pending(proofnet)
    script = Script([], [LLMResult(text="The cube roots of unity are 1, ω and ω².")] * 3)
    done = await autoformalize(row, script)
    assert (done["status"], done["repairs"], script.checked) == ("not_compilable", 2, [])
    assert done["reason"] == (f"no answer held `{MARKER}` code in 3 attempts, so no Lean check ran "
                              f"(attempt 3: the answer has no line with `{MARKER}`)")
    assert [attempt["reasons"] for attempt in done["attempts"]] == [[f"the answer has no line with `{MARKER}`"]] * 3
    assert formalizations_table([done]).num_rows == 1


class RecordingOperator(AutoformalizeOperator):
    """The direct-mode operator with its model calls answered from a list and every prompt kept."""

    def __init__(self, answers: list[LLMResult], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.answers, self.sent = list(answers), []

    async def ask(self, row, row_id, stage, role, messages, call):
        self.sent.append((stage, messages[-1]["content"]))
        return self.answers.pop(0)


@pytest.mark.slow
async def test_a_draft_without_code_is_asked_again_with_what_was_wrong_then_repaired_from_the_code():
    cfg = job_config("formalize.max_repairs=3", "formalize.diagnose=false")
    draft = "theorem cube_root : (1 : ℂ) ^ 3 = 1 := sorry  -- " + ERROR_MARK
    answers = [LLMResult(text="The cube of 1 is 1."), LLMResult(text=f"{MARKER}\n```lean\n{draft}\n```"),
               LLMResult(text="Fixed, no code needed."), answer("theorem cube_root : True := sorry")]
    operator = RecordingOperator(answers, settings=llm_settings(cfg, "http://127.0.0.1:9"),
                                 autoformalize=autoformalize_settings(cfg), pool=TextPool())
    try:
        done = await operator.process_row(pending_row("cube_root", "The cube of 1 is 1.", "direct"))
    finally:
        await operator.clients.aclose()
    assert done["status"] == "compiled"
    assert [attempt["status"] for attempt in done["attempts"]] == ["no_code", "error", "no_code", "sorry"]
    (_, first), (_, second), (_, third), (_, fourth) = operator.sent
    assert [stage for stage, _ in operator.sent] == ["draft", "draft", "formalize", "formalize"]
    assert second.startswith(first) and f"the answer has no line with `{MARKER}`" in second
    assert "> The cube of 1 is 1." in second, "the draft is asked again, told what its answer lacked"
    assert fourth.startswith(third[: third.index("Attempt 1 gave no code")])
    assert "> Fixed, no code needed." in fourth and last_lean_block(fourth) == last_lean_block(third)
    assert ERROR_MARK in last_lean_block(fourth), "the repair still works on the code Lean rejected"


@pytest.mark.parametrize(("verdicts", "answers", "error"), [
    ([TIMEOUT], [answer("theorem Axler_exercise_1_2 : x = 1 := sorry")],
     "Lean timeout: timeout: no answer within 60 s"),
    ([UNKNOWN], [answer("theorem Axler_exercise_1_2 : x = 1 := sorry"),
                 LLMResult(text=None, error_kind="connection", error="connection refused")],
     "connection: connection refused"),
], ids=["lean", "endpoint"])
async def test_an_infrastructure_failure_is_error_infra_for_the_resumed_run(proofnet, verdicts, answers, error):
    row = pending(proofnet)
    script = Script(verdicts, answers)
    done = await autoformalize(row, script)
    assert (done["status"], done["reason"], done["error"]) == ("error_infra", "autoformalize: infrastructure failure",
                                                                error)
    assert done["statement"] is None and done["finished_at"] is None and script.used_up()
    assert row["status"] == "pending"


# --- reading the input -------------------------------------------------------------------------------------------


def test_every_proofnet_row_becomes_a_pending_problem_stated_without_its_proof(proofnet_bytes, proofnet):
    rows = jsonl_rows(proofnet_bytes, SOURCE, RULES, PROVENANCE)
    assert len(rows) == 70
    assert [row["id"] for row in rows] == list(proofnet)
    for row in rows:
        record = proofnet[row["id"]]
        assert row["informal"] == record["informal_stmt"].split("\\begin{proof}")[0].strip()
        assert "\\begin{proof}" not in row["informal"] and row["informal"]
        assert (row["header"], row["reference"]) == (record["header"], record["formal_statement"])
        assert (row["status"], row["reason"], row["theorem_name"]) == ("pending", None, record["name"])
        assert (row["source"], row["provenance"]) == (record["source"], PROVENANCE)
    assert rows[[row["id"] for row in rows].index("Axler_exercise_1_2")]["informal"] == (
        "Show that $\\frac{-1 + \\sqrt{3}i}{2}$ is a cube root of 1 (meaning that its cube equals 1).")


def test_unusable_lines_keep_their_place_as_bad_input_with_the_reason(proofnet_bytes):
    assert proofnet_bytes.endswith(b"\n") and proofnet_bytes.count(b"\n") == 70
    bad = [b"{\"name\": \"latin1\", \"informal\": \"caf\xe9\"}", b"{\"name\": \"cut\", \"informal\": ",
           b"[\"not\", \"an object\"]", b"", json.dumps({"name": "blank", "informal_stmt": "  \n"}).encode(),
           json.dumps({"name": "long", "informal": "Prove that " + "x" * 4000}).encode(),
           json.dumps({"name": "last", "informal": "Prove that 1 + 1 = 2."}).encode()]
    rows = jsonl_rows(proofnet_bytes + b"\n".join(bad) + b"\n", SOURCE, RULES, PROVENANCE)
    assert len(rows) == 70 + 6, "the empty line is no row"
    tail = {row["id"]: row for row in rows[70:]}
    unreadable = list(tail)[:3]
    assert list(tail)[3:] == ["blank", "long", "last"]
    assert all(name.startswith(f"{SOURCE}:unreadable_") for name in unreadable) and len(set(unreadable)) == 3
    assert tail[unreadable[0]]["reason"].startswith("line 71 is not UTF-8")
    assert tail[unreadable[1]]["reason"].startswith("line 72 is not JSON")
    assert tail[unreadable[2]]["reason"] == "line 73 is not a JSON object"
    shifted = jsonl_rows(b"{\"informal\": \"A new first row.\"}\n" + b"\n".join(bad), SOURCE, RULES, PROVENANCE)
    assert [row["id"] for row in shifted[1:4]] == unreadable, "an unreadable line keeps its id when lines move"
    assert tail["blank"]["reason"] == "no informal text (`informal` or `informal_stmt`)"
    assert "longer than autoformalize.max_input_tokens=500" in tail["long"]["reason"]
    assert all(row["status"] == "bad_input" for row in rows[70:75])
    assert (tail["last"]["status"], tail["last"]["header"]) == ("pending", "import Mathlib\n")
    assert all(row["source"] == SOURCE and row["provenance"] == PROVENANCE for row in rows[70:])
    assert formalizations_table(rows).column("id").to_pylist() == [row["id"] for row in rows]


def test_a_repeated_id_keeps_its_place_as_bad_input_under_a_numbered_id(proofnet):
    first, second = (problem_row(proofnet[name], SOURCE, RULES, PROVENANCE)
                     for name in ("Axler_exercise_1_2", "Axler_exercise_1_3"))
    rows = with_unique_ids([first, second, first, first])
    assert [row["id"] for row in rows] == ["Axler_exercise_1_2", "Axler_exercise_1_3", "Axler_exercise_1_2#2",
                                           "Axler_exercise_1_2#3"]
    assert [row["status"] for row in rows] == ["pending", "pending", "bad_input", "bad_input"]
    assert rows[2]["reason"] == "the id Axler_exercise_1_2 is already used by an earlier row"
    assert first["id"] == "Axler_exercise_1_2" and first["status"] == "pending", "the input row is left as it was"


def test_a_problem_without_a_name_gets_a_stable_id_from_its_text():
    text = "Prove that there are infinitely many primes."
    assert problem_id({}, text) == problem_id({"informal": "ignored"}, text)
    assert re.fullmatch(r"problem_[0-9a-f]{16}", problem_id({}, text))
    assert problem_id({}, text) != problem_id({}, text + " ")
    assert problem_id({"name": "Euclid"}, text) == "Euclid" and problem_id({"id": 7}, text) == "7"
    row = problem_row({"informal": text}, SOURCE, RULES, PROVENANCE)
    assert row["id"] == problem_id({}, text) == row["theorem_name"]


@pytest.mark.parametrize(("row_id", "name"), [
    ("Axler_exercise_1_2", "Axler_exercise_1_2"), ("2x-y", "problem_2x_y"), ("a.b c", "a_b_c"),
    ("---", "statement"), ("proofnet.jsonl:72", "proofnet_jsonl_72"), ("Axler_exercise_1_2#2", "Axler_exercise_1_2_2"),
])
def test_a_theorem_name_is_a_lean_identifier_made_from_the_id(row_id, name):
    assert theorem_name(row_id) == name
    assert re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name)


def test_the_table_takes_every_row_the_reader_builds(proofnet_bytes):
    rows = with_unique_ids(jsonl_rows(proofnet_bytes + proofnet_bytes[:400] + b"\n\xff\n", SOURCE, RULES, PROVENANCE))
    table = formalizations_table(rows)
    assert table.num_rows == len(rows) == 72
    assert table.column("status").to_pylist().count("bad_input") == 2
