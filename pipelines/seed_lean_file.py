"""One readable Lean file per seed: its proved lemmas, each with a docstring, inside one namespace for the seed.

Material for a human preparing a Mathlib PR, not a checked artifact: every proof passed Lean on its
own, and here each keeps its own context (`open`, `variable`, `universe` ...) in a `section` of its
own, so nothing leaks from one lemma to the next. Imports and the prover environment's lines shared
by all proofs are written once at the top.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

_IMPORT = re.compile(r"^\s*import\s+\S+")
_DECLARATION = re.compile(
    r"^\s*(?:@\[[^\]]*\]\s*)?(?:(?:private|protected|noncomputable|nonrec)\s+)*(?:theorem|lemma)\s+\S+"
)
_COMMENT = re.compile(r"^\s*--\s?(.*)$")


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
    lines = body.split("\n")
    targets = [index for index, line in enumerate(lines) if _DECLARATION.match(line)]
    if not targets:
        return body
    target = targets[-1]
    if target > 0 and lines[target - 1].rstrip().endswith("-/"):
        return body
    start = target
    while start > 0 and _COMMENT.match(lines[start - 1]):
        start -= 1
    comment = " ".join(_COMMENT.match(line).group(1).strip() for line in lines[start:target]).strip()
    indent = lines[target][: len(lines[target]) - len(lines[target].lstrip())]
    doc = f"{indent}/-- {comment or fallback} -/"
    return "\n".join([*lines[:start], doc, *lines[target:]])


def split_proof(proof: str, shared_lines: Sequence[str]) -> tuple[list[str], str]:
    """A checked proof file as (its imports, its body without them and without the shared environment lines)."""
    shared = {line.strip() for line in shared_lines}
    imports, body = [], []
    for line in proof.split("\n"):
        if _IMPORT.match(line):
            imports.append(line.strip())
        elif line.strip() not in shared or not line.strip():
            body.append(line)
    return imports, "\n".join(body).strip("\n")


def seed_file(seed_id: str, namespace: str, lemmas: Sequence[ProvedLemma], env_lines: Sequence[str],
              header: str) -> str:
    """The Lean file of one seed: a header comment, the imports, the shared environment lines, then one
    section per lemma inside the seed's namespace; identical proofs appear once."""
    environment = [line for line in env_lines if not _IMPORT.match(line)]
    imports: dict[str, None] = {line.strip(): None for line in env_lines if _IMPORT.match(line)}
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
