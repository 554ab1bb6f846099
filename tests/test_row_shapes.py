"""Each table's row type (a TypedDict next to its Arrow schema) is the schema's shape, and the code that builds a row
of the table gives exactly the row type's columns with values of their types: a column added, renamed or retyped on
one side only fails here, before a run writes a table its readers do not expect."""

from __future__ import annotations

import types
import typing
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NotRequired, TypedDict, is_typeddict

import pyarrow as pa
import pytest

from lean_pool.session_check import CheckResult
from operators.decontaminate import MatchSettings, Problem, StatementJudge
from operators.discover import DISCOVERY_SCHEMA, DiscoveryRow, answered, new_discovery
from operators.llm.calls import LLMResult
from operators.repair import attempt_entry, no_code_entry
from operators.retrieval.declaration_index import DECLARATION_SCHEMA, DeclarationRow
from operators.rows.benchmark_items import candidate_row, layout_item
from operators.rows.candidates import (
    ATTEMPT,
    CANDIDATE_SCHEMA,
    COMPILED,
    LLM_CALL,
    Attempt,
    CandidateRow,
    LLMCall,
    Provenance,
    llm_call_entry,
    new_candidate,
)
from operators.rows.contributions import CONTRIBUTION_SCHEMA, ContributionRow, new_contribution
from operators.rows.formalizations import (
    FORMALIZATION_SCHEMA,
    FormalizationRow,
    InputRules,
    jsonl_rows,
    with_unique_ids,
)
from operators.split import subgoal_candidates
from pipelines.decontaminate import SUMMARY_SCHEMA, SummaryRow, summary_rows
from pipelines.index import parse_file
from pipelines.runtime.benchmarks import Benchmark, Decontaminator
from pipelines.runtime.table_schemas import TABLE_SCHEMAS

# Every table a job writes, with its Arrow schema and its row type.
TABLES: dict[str, tuple[pa.Schema, type]] = {
    "candidates": (CANDIDATE_SCHEMA, CandidateRow),
    "discoveries": (DISCOVERY_SCHEMA, DiscoveryRow),
    "formalizations": (FORMALIZATION_SCHEMA, FormalizationRow),
    "contributions": (CONTRIBUTION_SCHEMA, ContributionRow),
    "declarations": (DECLARATION_SCHEMA, DeclarationRow),  # the index's
    "summary": (SUMMARY_SCHEMA, SummaryRow),  # decontaminate's
}
# The Python type each Arrow type of these schemas holds.
SCALARS: dict[pa.DataType, type] = {
    pa.string(): str, pa.int32(): int, pa.int64(): int, pa.float64(): float, pa.bool_(): bool,
    pa.timestamp("us", tz="UTC"): datetime,
}
NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
PROVENANCE: Provenance = {
    "run_id": "run", "project_version": "0.1", "llm_backend": "sim", "llm_simulated": True, "models": "{}",
    "sampling": "{}", "lean_backend": "sim", "lean_simulated": True, "toolchain": None, "mathlib_rev": None,
    "dedup": None, "grounding": None,
}
PARENT_STATEMENT = """import Mathlib

theorem card_pos_of_mem {α : Type*} (s : Finset α) (a : α) (h : a ∈ s) : 0 < s.card := by
  sorry
"""
GOAL = "α : Type u_1\ns : Finset α\na : α\nh : a ∈ s\n⊢ s.Nonempty"


def hints(row_type: type) -> dict[str, Any]:
    """The row type's columns and their Python types, `NotRequired` unwrapped."""
    return typing.get_type_hints(row_type)


def members(hint: Any) -> tuple[Any, ...]:
    """The types a hint allows: `X | None` is (X, NoneType), any other hint itself."""
    return typing.get_args(hint) if isinstance(hint, types.UnionType) else (hint,)


def shape_mismatches(arrow: pa.DataType, hint: Any, nullable: bool, where: str) -> list[str]:
    """Where `hint` is not the Python side of `arrow`: a scalar of another type, a list or struct on one side only, a
    struct's columns, or `None` allowed where Arrow allows no null. Empty when they agree, recursively."""
    allowed = members(hint)
    if type(None) in allowed and not nullable:
        return [f"{where}: None allowed, the Arrow field is not nullable"]
    inner = [member for member in allowed if member is not type(None)]
    if len(inner) != 1:
        return [f"{where}: {hint} is not one type or that type or None"]
    (python,) = inner
    if pa.types.is_list(arrow):
        if typing.get_origin(python) is not list:
            return [f"{where}: Arrow {arrow}, Python {python}"]
        (item,) = typing.get_args(python)
        return shape_mismatches(arrow.value_type, item, arrow.value_field.nullable, f"{where}[]")
    if pa.types.is_struct(arrow):
        if not is_typeddict(python):
            return [f"{where}: Arrow {arrow}, Python {python}"]
        return struct_mismatches(list(arrow), python, where)
    if SCALARS.get(arrow) is not python:
        return [f"{where}: Arrow {arrow}, Python {python}"]
    return []


def struct_mismatches(fields: list[pa.Field], row_type: type, where: str) -> list[str]:
    """Where a row type differs from Arrow fields: columns on one side only, then each column's type."""
    python = hints(row_type)
    arrow = {field.name: field for field in fields}
    problems = [f"{where}.{name}: in the Arrow type only" for name in arrow.keys() - python.keys()]
    problems += [f"{where}.{name}: in the row type only" for name in python.keys() - arrow.keys()]
    for name in arrow.keys() & python.keys():
        problems += shape_mismatches(arrow[name].type, python[name], arrow[name].nullable, f"{where}.{name}")
    return sorted(problems)


def value_mismatches(value: Any, hint: Any, where: str) -> list[str]:
    """Where a built value is not of its declared type: a scalar of another type (a bool is no int), a list item,
    or a struct whose keys are not exactly its type's required ones, give or take its optional ones."""
    allowed = members(hint)
    if value is None:
        return [] if type(None) in allowed else [f"{where}: None where {hint} is declared"]
    found: list[str] = [f"{where}: {value!r} is not {hint}"]
    for python in allowed:
        if typing.get_origin(python) is list and isinstance(value, list):
            (item,) = typing.get_args(python)
            return [problem for n, entry in enumerate(value)
                    for problem in value_mismatches(entry, item, f"{where}[{n}]")]
        if is_typeddict(python) and isinstance(value, dict):
            return row_mismatches(value, python, where)
        if isinstance(python, type) and type(value) is python:
            return []
    return found


def row_mismatches(row: dict[str, Any], row_type: type, where: str) -> list[str]:
    """Where a built row is not of its row type: keys missing or extra, or a value of another type."""
    python = hints(row_type)
    required = row_type.__required_keys__
    problems = [f"{where}.{name}: missing" for name in required - row.keys()]
    problems += [f"{where}.{name}: not a column of {row_type.__name__}" for name in row.keys() - python.keys()]
    for name in row.keys() & python.keys():
        problems += value_mismatches(row[name], python[name], f"{where}.{name}")
    return sorted(problems)


def check_with_open_goal() -> CheckResult:
    """A check of `PARENT_STATEMENT` that left `GOAL` open, as Lean reports it."""
    return CheckResult(status="sorry", ok=False, reasons=["the proof uses sorry"],
                       messages=[{"severity": "error", "pos": {"line": 3, "column": 2}, "data": "unsolved goals\n"
                                  + GOAL}],
                       sorries=[{"goal": GOAL}])


def discovery() -> dict[str, Any]:
    """A discovery as the candidates' builder reads it back from Parquet."""
    return {**new_discovery({"unit_id": "Mathlib.X/s0", "seed_id": "Mathlib.X", "seed_path": "Mathlib/X.lean",
                             "domain": "algebra", "sample": 0, "round": 1}, PROVENANCE),
            "status": "discovered", "snippets": [PARENT_STATEMENT], "finished_at": NOW}


def candidates() -> list[dict[str, Any]]:
    """A mined candidate, the sub-goal its failed proof leaves, and a benchmark statement as a candidate."""
    mined = dict(new_candidate(discovery(), 0, PARENT_STATEMENT))
    attempt = attempt_entry(PARENT_STATEMENT, check_with_open_goal(), "an answer")
    parent = {**mined, "status": COMPILED, "statement": PARENT_STATEMENT, "finished_at": NOW,
              "proofs": [{"role": "prover", "model": "m", "proved": False, "proof": None, "success_at": None,
                          "reason": "exhausted", "attempts": [attempt], "replay": None, "replay_seconds": None}]}
    subgoals = [dict(row) for row in subgoal_candidates(parent, max_per_candidate=1)]
    item = layout_item("algebra/Algebra/Group/Basic/3.lean", "Mathlib")
    benchmark = dict(candidate_row(item, PARENT_STATEMENT, PROVENANCE, NOW))
    assert len(subgoals) == 1
    return [mined, parent, *subgoals, benchmark]


def formalizations() -> list[dict[str, Any]]:
    """An input line that is read, one that is not JSON, and one repeating the first's id."""
    rules = InputRules(max_tokens=1000, chars_per_token=4.0, default_header="import Mathlib")
    data = (b'{"name": "p1", "informal": "Every group of order 2 is abelian."}\nnot json\n'
            b'{"name": "p1", "informal": "x"}\n')
    return [dict(row) for row in with_unique_ids(jsonl_rows(data, "input.jsonl", rules, PROVENANCE))]


def contributions() -> list[dict[str, Any]]:
    proved = {**candidates()[0], "status": "proved", "statement": PARENT_STATEMENT, "proof": PARENT_STATEMENT,
              "proved_by": ["prover"], "faithfulness_score": 0.9}
    return [dict(new_contribution(proved, "run", True, NOW))]


def discoveries() -> list[dict[str, Any]]:
    """A discovery whose endpoint failed and one whose answer held no marker, as the discover step settles them."""
    failed = LLMResult(text=None, model="m", error_kind="timeout", error="no answer in 60 s")
    unmarked = LLMResult(text="no lemma here", model="m", finish_reason="stop", prompt_tokens=3, completion_tokens=4)
    return [{**discovery(), **answered(result, "LEMMAS:", 5)} for result in (failed, unmarked)]


def declarations(tmp_path: Path) -> list[dict[str, Any]]:
    (tmp_path / "X.lean").write_text("/-- Addition is commutative. -/\n"
                                     "theorem add_comm' (a b : Nat) : a + b = b + a := Nat.add_comm a b\n",
                                     encoding="utf-8")
    rows, skipped = parse_file(tmp_path, "X.lean")
    assert rows and not skipped
    return [dict(row) for row in rows]


def summaries() -> list[dict[str, Any]]:
    problems = [Problem("bench", "p1", "theorem p1 (a b : Nat) : a + b = b + a := by sorry")]
    settings = MatchSettings(exact=True, notation=False, embedding=False, embedding_threshold=0.9, ngram=False,
                             ngram_n=3, ngram_threshold=0.5, embed_batch=8)
    judge = StatementJudge(problems, settings, None)
    benchmark = Benchmark("bench", "benchmarks/bench", "abc123", "given", problems)
    return [dict(row) for row in summary_rows(Decontaminator([benchmark], judge), [])]


def test_every_table_a_job_checks_on_resume_has_a_row_type() -> None:
    assert TABLE_SCHEMAS.keys() <= TABLES.keys()
    assert all(TABLE_SCHEMAS[name] is TABLES[name][0] for name in TABLE_SCHEMAS)


@pytest.mark.parametrize("table", TABLES)
def test_a_row_type_has_its_schemas_columns_with_their_types(table: str) -> None:
    schema, row_type = TABLES[table]
    assert struct_mismatches(list(schema), row_type, table) == []


@pytest.mark.parametrize(("arrow", "row_type"), [(ATTEMPT, Attempt), (LLM_CALL, LLMCall)])
def test_a_struct_type_has_its_arrow_fields_with_their_types(arrow: pa.StructType, row_type: type) -> None:
    assert struct_mismatches(list(arrow), row_type, row_type.__name__) == []


def test_the_shape_check_names_a_column_a_row_type_lacks_adds_or_retypes() -> None:
    # the functional form: a class body's annotations are text here, in which `NotRequired` goes unseen at run time
    Shape = TypedDict("Shape", {"a": int | None, "b": list[str], "c": NotRequired[str]})  # noqa: UP013
    schema = pa.schema([("a", pa.int32()), ("b", pa.list_(pa.int64())), ("d", pa.string())])
    assert struct_mismatches(list(schema), Shape, "t") == [
        "t.b[]: Arrow int64, Python <class 'str'>", "t.c: in the row type only", "t.d: in the Arrow type only"]
    assert shape_mismatches(pa.string(), str | None, False, "t.e") == ["t.e: None allowed, the Arrow field is not "
                                                                        "nullable"]
    assert row_mismatches({"a": True, "b": ["x", 1], "e": 0}, Shape, "r") == [
        "r.a: True is not int | None", "r.b[1]: 1 is not <class 'str'>", "r.e: not a column of Shape"]


@pytest.mark.parametrize("table", ["candidates", "discoveries", "formalizations", "contributions", "declarations",
                                   "summary"])
def test_a_built_row_has_exactly_its_row_types_columns_with_values_of_their_types(table: str, tmp_path: Path) -> None:
    built = {"candidates": candidates, "discoveries": discoveries, "formalizations": formalizations,
             "contributions": contributions, "declarations": lambda: declarations(tmp_path), "summary": summaries}
    rows = built[table]()
    row_type = TABLES[table][1]
    assert rows
    assert [row_mismatches(row, row_type, f"{table}[{n}]") for n, row in enumerate(rows)] == [[] for _ in rows]
    pa.Table.from_pylist(rows, schema=TABLES[table][0])  # and Arrow takes them as they are


def test_a_built_attempt_and_llm_call_are_of_their_struct_types() -> None:
    attempts = [attempt_entry(PARENT_STATEMENT, check_with_open_goal(), None), no_code_entry("no code", "no marker")]
    call = llm_call_entry("discover", 1, LLMResult(text="x", model="m", prompt_tokens=1, completion_tokens=2))
    assert [row_mismatches(dict(entry), Attempt, "attempt") for entry in attempts] == [[], []]
    assert row_mismatches(dict(call), LLMCall, "llm_call") == []
