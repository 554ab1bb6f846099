"""One readable Lean file per seed: its proved lemmas, each with a docstring, inside one namespace for the seed.

Material for a human preparing a Mathlib PR, not a checked artifact: every proof passed Lean on its
own, and here each keeps its own context (`open`, `variable`, `universe` ...) in a `section` of its
own, so nothing leaks from one lemma to the next. Imports and the prover environment's lines shared
by all proofs are written once at the top.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from lean_pool.lean_source import THEOREM_KINDS, leading_imports, read_commands, without_imports

_LINE_COMMENT = "--"


@dataclass(frozen=True)
class ProvedLemma:
    """One proved candidate as it goes into its seed's file."""

    candidate_id: str
    proof: str
    prover: str
    model: str | None
    success_at: int | None


def namespace_for(seed_id: str, root: str, dropped_prefix: str) -> str:
    """The seed's namespace: `Mathlib.Data.Nat.Triangle` -> `Folklore.Data.Nat.Triangle` (root `Folklore`)."""
    rest = seed_id[len(dropped_prefix):] if seed_id.startswith(dropped_prefix) else seed_id
    return f"{root}.{rest}" if rest else root


def with_docstring(body: str, fallback: str) -> str:
    """The body with a docstring on its last `theorem`/`lemma` (the target; helpers come first): the `--`
    comment lines right above it become the docstring, else `fallback` does; an existing docstring stays."""
    commands = read_commands(body)
    targets = [index for index, command in enumerate(commands) if command.kind in THEOREM_KINDS]
    if not targets:
        return body
    target = commands[targets[-1]]
    if target.text.startswith("/-"):
        return body
    previous_end = commands[targets[-1] - 1].end if targets[-1] > 0 else 0
    gap = body[previous_end : target.start].split("\n")
    above = gap[:-1]
    comments: list[str] = []
    while above and above[-1].strip().startswith(_LINE_COMMENT):
        comments.insert(0, above.pop().strip()[len(_LINE_COMMENT) :].strip())
    indent = gap[-1]
    doc = f"{indent}/-- {' '.join(comments).strip() or fallback} -/"
    return body[:previous_end] + "\n".join([*above, doc, indent]) + body[target.start :]


def _imports(line: str) -> list[str]:
    return [f"import {module}" for module in leading_imports(line)[0]]


def split_proof(proof: str, shared_lines: Sequence[str]) -> tuple[list[str], str]:
    """A checked proof file as (its imports, its body without them and without the shared environment lines)."""
    shared = {line.strip() for line in shared_lines}
    modules, rest = without_imports(proof)
    body = [line for line in rest.split("\n") if line.strip() not in shared or not line.strip()]
    return [f"import {module}" for module in modules], "\n".join(body).strip("\n")


def seed_file(seed_id: str, namespace: str, lemmas: Sequence[ProvedLemma], env_lines: Sequence[str],
              header: str) -> str:
    """The Lean file of one seed: a header comment, the imports, the shared environment lines, then one
    section per lemma inside the seed's namespace; identical proofs appear once."""
    environment = [line for line in env_lines if not _imports(line)]
    imports: dict[str, None] = dict.fromkeys(line for env_line in env_lines for line in _imports(env_line))
    sections: list[str] = []
    seen: set[str] = set()
    for lemma in lemmas:
        lemma_imports, body = split_proof(lemma.proof, environment)
        if body in seen:
            continue
        seen.add(body)
        imports.update(dict.fromkeys(lemma_imports))
        fallback = f"A folklore lemma about `{seed_id}`."
        note = (f"-- {lemma.candidate_id}: proved by {lemma.prover} ({lemma.model}) "
                f"after {lemma.success_at} repair(s)")
        sections.append(f"section\n\n{note}\n{with_docstring(body, fallback)}\n\nend")
    parts = [f"/-\n{header}\n-/", "\n".join(imports), "\n".join(environment), f"namespace {namespace}",
             *sections, f"end {namespace}"]
    return "\n\n".join(part for part in parts if part) + "\n"
