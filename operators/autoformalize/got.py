"""autoformalize mode=got (Aria's Graph-of-Thought): concepts first, missing ones defined bottom-up, then the draft.

The model lays out the concepts the statement needs as a dependency graph (`operators.autoformalize.concept_graph`
checks it). Each concept is grounded in the declaration index: by its exact name, else by the nearest declarations
if the model confirms one. A missing concept gets a Lean definition, dependencies first, each compiled with the repair
loop in a file that holds the definitions made before it; a definition that uses `sorry` does not count, and the
refusal rules (no `axiom`, `opaque`, `partial`, `unsafe`, `implemented_by`, ...) make a refused one final. The
statement is then drafted with the grounded names and the new definitions in view and compiled, definitions
and theorem in one file, with the same loop as `mode=direct`.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from functools import partial
from typing import Any

from lean_pool.lean_source import without_imports, without_repeated
from lean_pool.session_check import CheckResult
from operators.autoformalize.concept_graph import (
    FAILED,
    GROUNDED,
    SYNTHESIZED,
    Concept,
    ConceptOutcome,
    bottom_up,
    confirmed_match,
    failed_dependencies,
    graph_column,
    read_concept_graph,
)
from operators.autoformalize.direct import AutoformalizeOperator, compiled, under_header
from operators.formalize import rejection
from operators.llm import prompts
from operators.llm.answers import extract_json
from operators.llm.calls import LLMResult
from operators.llm.settings import LLMSettings
from operators.repair import INFRA, PASSED, REJECTED, Ask, RepairLoop, exhausted_reason, run_loop
from operators.retrieval.declarations import parse_declarations
from operators.retrieval.grounding import format_declarations
from operators.rows.candidates import fail_infra
from operators.rows.formalizations import NOT_COMPILABLE, PENDING, REFUSED

GRAPH_CALL = "concept_graph"
GROUND_CALL = "ground"
DEFINE_CALL = "define"


@dataclass(frozen=True)
class GraphSettings:
    """`autoformalize.got`: the graph's size and depth limits, and how many nearest declarations a concept the
    index lacks by name is compared with."""

    max_concepts: int
    max_depth: int
    ground_k: int


class InfraFailure(Exception):
    """Lean or the endpoint failed (not the model's work) while a concept was grounded or defined: the row is
    `error_infra`, retried on resume."""

    def __init__(self, call: str, detail: str) -> None:
        super().__init__(f"{call}: {detail}")
        self.call = call
        self.detail = detail


def with_definitions(header: str, definitions: Sequence[str]) -> str:
    """The header a later definition or the statement is compiled under: the input's header, then every
    definition made so far, in order."""
    return "\n\n".join([header.rstrip("\n"), *definitions]) + "\n"


def new_definition(file_start: str, compiled_file: str) -> str:
    """What a compiled definition file adds to the file it was written for (header and earlier definitions)."""
    return without_repeated(without_imports(compiled_file)[1], without_imports(file_start)[1])


def declares(code: str, name: str) -> bool:
    """True when `code` declares `name` (its full name, or its last component under a namespace)."""
    return any(declaration.name == name or declaration.name.endswith(f".{name}")
               for declaration in parse_declarations(code).declarations)


def definition_verdict(result: CheckResult, code: str, name: str) -> CheckResult:
    """A definition compiles only without `sorry` and only if it declares the concept's name: otherwise the check
    counts as failed, so the loop repairs it."""
    if not result.ok:
        return result
    if result.status == "sorry":
        return replace(result, ok=False, reasons=["a definition may not use `sorry`", *result.reasons])
    if not declares(code, name):
        return replace(result, ok=False, status="error", reasons=[f"the file does not declare `{name}`"])
    return result


class GraphAutoformalizeOperator(AutoformalizeOperator):
    """Concept graph, grounding, bottom-up definitions, then the draft and its repairs (`mode=got`)."""

    def __init__(self, settings: LLMSettings, *, graph: GraphSettings, **kwargs: Any) -> None:
        super().__init__(settings, **kwargs)
        self.graph = graph

    @property
    def templates(self) -> dict[str, str]:
        """The prompt templates (`prompts:` of the config), got's own among them."""
        return dict(self.autoformalize.prompts)

    async def ground(self, row: dict[str, Any], concept: Concept, call: int) -> tuple[ConceptOutcome | None, list[str]]:
        """The concept's declaration in the index (its name, else a nearest one the model confirms), or None when it
        is missing (always, without an index); and the nearest declarations the model was shown."""
        if self.grounder is None:
            return None, []
        found = await asyncio.to_thread(self.grounder.index.find, [concept.name])
        if concept.name in found:
            return ConceptOutcome(GROUNDED, concept.name, "the index has a declaration of this name"), []
        query = f"{concept.name}: {concept.description}"
        nearest = await asyncio.to_thread(self.grounder.nearest, query, self.graph.ground_k)
        candidates = [declaration["name"] for declaration in nearest]
        messages = prompts.ground_messages(self.templates, {"name": concept.name, "description": concept.description},
                                           format_declarations(nearest))
        answer = await self.ask(row, row["id"], GROUND_CALL, self.role, messages, call)
        if answer.infra:
            raise InfraFailure(GROUND_CALL, f"{answer.error_kind}: {answer.error}")
        match = confirmed_match(extract_json(answer.text or "") if answer.ok else None, candidates)
        if match is None:
            return None, candidates
        return ConceptOutcome(GROUNDED, match, "the model confirmed a nearest declaration", candidates), candidates

    async def check_definition(self, row: dict[str, Any], name: str, code: str) -> CheckResult:
        """A statement check of a definition file, failed when the definition uses `sorry` or lacks its name."""
        return definition_verdict(await self.check(row, code), code, name)

    async def define(self, row: dict[str, Any], concept: Concept, known: Sequence[str], step: Ask) -> LLMResult:
        """The definition's first version (again, told what was wrong, while no answer had code), then repairs with
        the concept in view."""
        described = {"name": concept.name, "description": concept.description}
        if step.current is None:
            known_text = (f"```lean\n{chr(10).join(known)}\n```" if known
                          else self.templates["no_known_definitions"])
            messages = prompts.define_messages(self.templates, described, row["informal"], row["header"], known_text,
                                               self.formalize.marker)
            messages = prompts.with_retries(self.templates, messages, step.history, self.formalize.marker)
            return await self.ask(row, row["id"], DEFINE_CALL, self.role, messages, step.call)
        preamble = self.templates["concept"].format(concept=json.dumps(described, ensure_ascii=False))
        return await self.repair(row, row["id"], step, preamble)

    async def synthesize(self, row: dict[str, Any], concept: Concept, known: list[str]) -> ConceptOutcome:
        """Define one missing concept under the header and the definitions made before it, with the repair loop;
        the definition is added to `known` when it compiles."""
        file_start = with_definitions(row["header"], known)
        loop = RepairLoop(self.formalize.max_repairs, self.formalize.marker, partial(under_header, file_start),
                          rejection)
        stop = await run_loop(loop, loop.ask(), partial(self.check_definition, row, concept.name),
                              partial(self.define, row, concept, list(known)))
        row["definitions"] = [*row["definitions"], {"concept": concept.name, "code": None,
                                                    "attempts": list(loop.attempts)}]
        if stop.outcome == INFRA:
            raise InfraFailure(DEFINE_CALL, stop.detail or "")
        if stop.outcome != PASSED:
            refused = stop.outcome == REJECTED and loop.attempts[-1]["status"] == "refused"
            reason = stop.detail if stop.outcome == REJECTED else (
                f"{exhausted_reason(loop.attempts, loop.max_repairs, loop.marker)} ({stop.detail})")
            return ConceptOutcome(FAILED, None, reason or "", refused=refused)
        code = new_definition(file_start, stop.code or "")
        row["definitions"][-1]["code"] = code
        known.append(code)
        return ConceptOutcome(SYNTHESIZED, concept.name, "defined and compiled")

    async def concepts(self, row: dict[str, Any], concepts: Sequence[Concept]) -> dict[str, ConceptOutcome]:
        """Ground every concept (all at once: they do not depend on each other), then define the missing ones
        bottom-up; a concept whose dependency failed fails without a try."""
        grounding = await asyncio.gather(*(self.ground(row, concept, call)
                                           for call, concept in enumerate(concepts, start=1)))
        shown = {concept.name: candidates for concept, (_, candidates) in zip(concepts, grounding)}
        outcomes = {concept.name: grounded for concept, (grounded, _) in zip(concepts, grounding)
                    if grounded is not None}
        known: list[str] = []
        for concept in bottom_up(concepts):
            if concept.name in outcomes:
                continue
            failed = failed_dependencies(concept, outcomes)
            if failed:
                outcomes[concept.name] = ConceptOutcome(FAILED, None,
                                                        f"depends on {failed}, which could not be defined")
            else:
                outcomes[concept.name] = await self.synthesize(row, concept, known)
            outcomes[concept.name].candidates = shown[concept.name]
        return outcomes

    async def process_row(self, row: dict[str, Any]) -> dict[str, Any]:
        if row["status"] != PENDING:
            return row
        row["started_at"] = datetime.now(UTC)
        row["definitions"] = []
        retrieved = await self.retrieve(row["informal"])
        row["retrieved"] = None if retrieved is None else [declaration["name"] for declaration in retrieved]
        related = self.templates["related"].format(declarations=format_declarations(retrieved)) if retrieved else ""
        messages = prompts.concept_graph_messages(self.templates, row["informal"], related, self.graph.max_concepts,
                                                  self.graph.max_depth)
        answer = await self.ask(row, row["id"], GRAPH_CALL, self.role, messages, 1)
        if answer.infra:
            return fail_infra(row, GRAPH_CALL, f"{answer.error_kind}: {answer.error}")
        graph = read_concept_graph(extract_json(answer.text or "") if answer.ok else None, self.graph.max_concepts,
                                   self.graph.max_depth)
        if graph.refused is not None:
            return {**row, "status": REFUSED, "reason": f"concept graph refused: {graph.refused}",
                    "finished_at": datetime.now(UTC)}
        try:
            outcomes = await self.concepts(row, graph.concepts)
        except InfraFailure as failure:
            return fail_infra(row, failure.call, failure.detail)
        row["concept_graph"] = graph_column(graph.concepts, outcomes)
        failed = [(name, outcome) for name, outcome in outcomes.items() if outcome.status == FAILED]
        if failed:
            name, outcome = failed[0]
            status = REFUSED if outcome.refused else NOT_COMPILABLE
            return {**row, "status": status, "reason": f"concept `{name}` could not be defined: {outcome.reason}",
                    "finished_at": datetime.now(UTC)}
        definitions = [definition["code"] for definition in row["definitions"]]
        grounded = [outcome.declaration for outcome in outcomes.values() if outcome.status == GROUNDED]
        sections = [related]
        if grounded:
            sections.append(self.templates["grounded"].format(names=", ".join(f"`{name}`" for name in grounded)))
        if definitions:
            sections.append(self.templates["definitions"].format(definitions="\n\n".join(definitions)))
        context = "\n\n".join(section for section in sections if section)
        loop = RepairLoop(self.formalize.max_repairs, self.formalize.marker,
                          partial(under_header, with_definitions(row["header"], definitions)), rejection)
        stop = await run_loop(loop, loop.ask(), partial(self.check, row), partial(self.attempt, row, context))
        return compiled(row, stop, loop, datetime.now(UTC))
