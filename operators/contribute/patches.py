"""From a file's named and shortened lemmas to its patch: free names, the offers placed, what the patch may change.

Pure decisions on the driver, where every lemma of a file is seen at once: two lemmas of one file, or a lemma and a
declaration of the file or of Mathlib, may not share a name; and a patched file must keep every declaration it had,
unchanged and in order, which is read back with the project's Lean reader before Lean ever sees it.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any

from lean_pool.lean_source import DECLARATION_KINDS, THEOREM_KINDS, namespace_of, read_commands
from lean_pool.refusals import refusal_reasons
from operators.contribute.placement import Offer, PlacedFile, place_lemmas
from operators.rows.contributions import PENDING, UNNAMED
from operators.trivial import with_tactic


def full_name(namespace: str, name: str) -> str:
    """A name written inside `namespace`, in full."""
    return f"{namespace}.{name}" if namespace else name


def mined_name(statement: str) -> tuple[str, str]:
    """The full name a statement's theorem was mined under, and the namespace its statement declares it in."""
    target = next((c for c in read_commands(statement) if c.kind in THEOREM_KINDS), None)
    return ("", "") if target is None else (target.name, namespace_of(target.scopes))


def home_namespace(namespace: str, anchor: str | None) -> str:
    """The namespace a lemma lives in: the one its name and statement give it, else (a lemma mined at the root, as the
    discover prompt asks) the namespace of the declaration it is placed after, where a reviewer looks for it."""
    if namespace or anchor is None or "." not in anchor:
        return namespace
    return anchor.rsplit(".", 1)[0]


def declared_names(text: str) -> set[str]:
    """The full names a Lean file declares."""
    return {command.name for command in read_commands(text) if command.kind in DECLARATION_KINDS and command.name}


def claim_names(rows: Sequence[dict[str, Any]], taken: Collection[str], index: Collection[str]) -> None:
    """Mark `unnamed` each row (in order) whose full name its file (`taken`), Mathlib's declaration `index` or an
    earlier row already holds; the others claim theirs."""
    claimed: set[str] = set()
    for row in rows:
        if row["status"] != PENDING:
            continue
        name = full_name(row["namespace"], row["new_name"])
        where = ("this file" if name in taken else "Mathlib (the declaration index)" if name in index
                 else "another lemma of this patch" if name in claimed else None)
        if where is not None:
            row.update(status=UNNAMED, reason=f"`{name}` is already declared in {where}")
        else:
            claimed.add(name)


def offer(row: Mapping[str, Any], renamed: bool) -> Offer:
    """A row as placement takes it: under its new name in its namespace (`renamed`) or its mined one, written
    relative to the namespace its statement opens, with the proof offered (a closing tactic in place of `sorry`, or
    the mined proof)."""
    tactic = row.get("proof_tactic")
    proof = with_tactic(row["statement"], tactic) if tactic else row["proof"]
    name, written_in = mined_name(row["statement"])
    if renamed:
        name = full_name(row["namespace"], row["new_name"])
    prefix = f"{written_in}."
    return Offer(candidate_id=row["candidate_id"], statement=row["statement"], proof=proof,
                 name=name[len(prefix):] if written_in and name.startswith(prefix) else name)


def placed(seed_text: str, rows: Sequence[Mapping[str, Any]], dropped_context: Sequence[str],
           renamed: bool = True) -> PlacedFile:
    """The seed file with these rows' lemmas placed in it."""
    return place_lemmas(seed_text, [offer(row, renamed) for row in rows], dropped_context)


def refused_blocks(result: PlacedFile) -> dict[str, list[str]]:
    """Candidate id -> why the block placed for it must not reach Lean: what a patch adds was written by a model, and
    is held to the refusal rules of any model's code, while the rest of the file is the user's checkout, checked by
    Lean as it is (`session_check` mode "file")."""
    refused = {placement.candidate_id: refusal_reasons(placement.text) for placement in result.placements}
    return {candidate: reasons for candidate, reasons in refused.items() if reasons}


def changed_declarations(original: str, patched: str, added: Collection[str]) -> list[str]:
    """What is wrong with a patched file besides the lemmas it adds: an original declaration missing, altered or out
    of its order, or an `added` name it does not declare; empty when the patch only adds what it offers."""
    before = [(c.name, c.text) for c in read_commands(original) if c.kind in DECLARATION_KINDS]
    after = [(c.name, c.text) for c in read_commands(patched) if c.kind in DECLARATION_KINDS]
    kept = [entry for entry in after if entry in before]
    problems = [f"`{name}` is missing or changed" for name, text in before if (name, text) not in kept]
    if not problems and kept != before:
        problems.append("the file's declarations are no longer in their order")
    names = {name for name, _ in after}
    return problems + [f"`{name}` is not declared in the patched file" for name in added if name not in names]
