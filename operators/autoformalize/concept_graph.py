"""The concept graph of Aria's Graph-of-Thought, as plain data: read, checked, ordered bottom-up, recorded.

A statement that needs notions Mathlib lacks or names differently is decomposed by a model into concepts, each
depending on others. The graph is only usable if it is finite, acyclic and within the configured depth and size,
so those rules are decided here on the parsed answer, with the reason a graph is refused. The same module turns
grounding answers and the definitions made for missing concepts into the row's `concept_graph` and
`definitions` columns, and reads those definitions back as declarations for the faithfulness check.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from lean_pool.lean_source import identifiers
from operators.retrieval.declarations import parse_declarations

# A concept's status in the row's graph.
GROUNDED = "grounded"  # an existing declaration of the index is the concept
SYNTHESIZED = "synthesized"  # a definition made for it compiled
FAILED = "failed"  # no definition of it compiled, or one it depends on failed


@dataclass(frozen=True)
class Concept:
    """One node: `name` a Lean name (the Mathlib one the model expects, or the name a new definition gets), what
    it means in words, and the names of the concepts it is built from."""

    name: str
    description: str
    depends_on: tuple[str, ...] = ()


@dataclass(frozen=True)
class ConceptGraph:
    """A checked graph: its concepts in the order given, or, when refused, why (and no concepts)."""

    concepts: tuple[Concept, ...] = ()
    refused: str | None = None


@dataclass
class ConceptOutcome:
    """What became of one concept: its status, the declaration that stands for it (grounded: the index's name;
    synthesized: the definition's), why, in a few words, the nearest declarations the model was shown, and
    whether a failed definition was refused by the refusal rules."""

    status: str
    declaration: str | None = None
    reason: str = ""
    candidates: list[str] = field(default_factory=list)
    refused: bool = False


def is_lean_name(name: str) -> bool:
    """True when `name` is one Lean identifier (dots allowed), as the project's Lean reader reads names."""
    return bool(name) and name.strip() == name and name in identifiers(name)


def cycle_of(concepts: Sequence[Concept]) -> list[str] | None:
    """A dependency cycle as the names along it (first name repeated at the end), or None when there is none."""
    depends = {concept.name: concept.depends_on for concept in concepts}
    done: set[str] = set()

    def visit(name: str, path: list[str]) -> list[str] | None:
        if name in path:
            return [*path[path.index(name):], name]
        if name in done:
            return None
        for other in depends.get(name, ()):
            found = visit(other, [*path, name])
            if found:
                return found
        done.add(name)
        return None

    for concept in concepts:
        found = visit(concept.name, [])
        if found:
            return found
    return None


def depth_of(concepts: Sequence[Concept]) -> int:
    """The number of concepts on the longest dependency chain of an acyclic graph (1 for concepts without
    dependencies, 0 for no concepts)."""
    depends = {concept.name: concept.depends_on for concept in concepts}
    memo: dict[str, int] = {}

    def depth(name: str) -> int:
        if name not in memo:
            memo[name] = 1 + max((depth(other) for other in depends[name]), default=0)
        return memo[name]

    return max((depth(concept.name) for concept in concepts), default=0)


def read_concept_graph(answer: object, max_concepts: int, max_depth: int) -> ConceptGraph:
    """The graph a model answered (`{"concepts": [{"name", "description", "depends_on"}]}`), checked: every name a
    Lean name given once, every dependency a concept of the graph, no cycle, at most `max_concepts` concepts and
    `max_depth` on the longest chain. Otherwise the graph is refused, with the first rule it breaks."""
    entries = answer.get("concepts") if isinstance(answer, Mapping) else None
    if not isinstance(entries, list) or not entries:
        return ConceptGraph(refused="the answer holds no `concepts` list")
    concepts = []
    for entry in entries:
        if not isinstance(entry, Mapping) or not isinstance(entry.get("name"), str):
            return ConceptGraph(refused=f"a concept without a name: {entry!r}")
        depends = entry.get("depends_on") or []
        if not isinstance(depends, list) or not all(isinstance(name, str) for name in depends):
            return ConceptGraph(refused=f"`{entry['name']}`: depends_on is not a list of names")
        concepts.append(Concept(entry["name"].strip(), str(entry.get("description") or "").strip(),
                                tuple(dict.fromkeys(name.strip() for name in depends))))
    names = [concept.name for concept in concepts]
    bad = [name for name in names if not is_lean_name(name)]
    if bad:
        return ConceptGraph(refused=f"not Lean names: {bad}")
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        return ConceptGraph(refused=f"concepts given more than once: {repeated}")
    unknown = sorted({other for concept in concepts for other in concept.depends_on} - set(names))
    if unknown:
        return ConceptGraph(refused=f"dependencies that are not concepts of the graph: {unknown}")
    if len(concepts) > max_concepts:
        return ConceptGraph(refused=f"{len(concepts)} concepts, more than the limit of {max_concepts}")
    cycle = cycle_of(concepts)
    if cycle:
        return ConceptGraph(refused=f"a dependency cycle: {' -> '.join(cycle)}")
    depth = depth_of(concepts)
    if depth > max_depth:
        return ConceptGraph(refused=f"a dependency chain of {depth} concepts, deeper than the limit of {max_depth}")
    return ConceptGraph(tuple(concepts))


def bottom_up(concepts: Sequence[Concept]) -> list[Concept]:
    """The concepts of an acyclic graph with every concept after the ones it depends on, otherwise in the order
    given (so a definition is always made in an environment holding its dependencies')."""
    by_name = {concept.name: concept for concept in concepts}
    ordered: dict[str, Concept] = {}

    def place(concept: Concept) -> None:
        if concept.name in ordered:
            return
        for other in concept.depends_on:
            place(by_name[other])
        ordered[concept.name] = concept

    for concept in concepts:
        place(concept)
    return list(ordered.values())


def confirmed_match(answer: object, candidates: Sequence[str]) -> str | None:
    """The candidate a grounding answer (`{"match": NAME or null}`) confirms; a name outside the candidates is no
    confirmation (models invent names)."""
    match = answer.get("match") if isinstance(answer, Mapping) else None
    return match if isinstance(match, str) and match in candidates else None


def failed_dependencies(concept: Concept, outcomes: Mapping[str, ConceptOutcome]) -> list[str]:
    """The concepts `concept` depends on that failed: it cannot be defined in terms of them (in bottom-up order
    every dependency has its outcome already)."""
    return [other for other in concept.depends_on if outcomes[other].status == FAILED]


def graph_column(concepts: Sequence[Concept], outcomes: Mapping[str, ConceptOutcome]) -> list[dict[str, Any]]:
    """The row's `concept_graph`: every concept in the order given, with its dependencies and what became of it."""
    return [{"name": concept.name, "description": concept.description, "depends_on": list(concept.depends_on),
             "status": outcomes[concept.name].status, "declaration": outcomes[concept.name].declaration,
             "candidates": outcomes[concept.name].candidates, "reason": outcomes[concept.name].reason}
            for concept in concepts]


def defined_declarations(definitions: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """The declarations the synthesized definitions make, by full name, with signature and docstring: the
    faithfulness check looks them up like Mathlib's, so its labeller sees what a new name means."""
    found: dict[str, dict[str, Any]] = {}
    for definition in definitions:
        for declaration in parse_declarations(str(definition.get("code") or "")).declarations:
            found[declaration.name] = {"name": declaration.name, "signature": declaration.signature,
                                       "docstring": declaration.docstring or None}
    return found
