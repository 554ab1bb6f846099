"""shorten: before a lemma is offered, the pool tries short closing tactics on its statement.

A reviewer prefers `by simp` to forty lines a prover found. Each tactic of `contribute.shorten.tactics` shorter than
the mined proof goes in place of the statement's `sorry`, shortest first, and must pass the same sound verdict as
any proof (sorry-free, axiom-clean, the statement unchanged, and the replay in a fresh Lean when the run has one);
the first that does is offered. When none does, the mined proof is kept. Lean giving no verdict ends the tries and
keeps the mined proof: it says nothing about the tactic.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from lean_pool.lean_source import THEOREM_KINDS, body_start, read_commands
from operators.rows.contributions import PENDING, contributions_table
from operators.stage import Config, Shared, Stage
from operators.trivial import with_tactic

STAGE = "shorten"
# How a proof body starts: what is measured of a proof is what follows it.
ASSIGN = ":="

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ShortenSettings:
    """`contribute.shorten:` as the step reads it: the closing tactics to try and each check's time limit."""

    tactics: tuple[str, ...]
    timeout_s: float


def proof_text(body: str) -> str:
    """A declaration body without its `:=`: what a reader sees as the proof."""
    return body[len(ASSIGN):].strip() if body.startswith(ASSIGN) else body.strip()


def mined_proof(statement: str, proof: str) -> str:
    """The mined proof of the statement's theorem as offered: the proof file's helper declarations (those before the
    target, which it may use) and the target's own proof."""
    target = next((c for c in read_commands(statement) if c.kind in THEOREM_KINDS), None)
    commands = [c for c in read_commands(proof) if c.kind in THEOREM_KINDS or c.kind == "def"]
    names = [c.name for c in commands]
    if target is None or target.name not in names:
        return proof.strip()
    at = names.index(target.name)
    helpers = [c.text.strip() for c in commands[:at]]
    return "\n\n".join([*helpers, proof_text(commands[at].text[body_start(commands[at]):])])


def candidate_tactics(tactics: Sequence[str], mined: str) -> list[tuple[str, str]]:
    """(tactic, proof text) for each tactic whose proof is shorter than the mined one, shortest first (ties in the
    configured order)."""
    proofs = [(tactic, f"by {tactic}") for tactic in tactics]
    return sorted([pair for pair in proofs if len(pair[1]) < len(mined)], key=lambda pair: len(pair[1]))


class ShortenOperator:
    """Async callable for `map_batches`: tries the closing tactics on every offered lemma of a batch, concurrently."""

    def __init__(self, *, shorten: ShortenSettings, pool: Any) -> None:
        self.shorten = shorten
        self.pool = pool

    async def process_row(self, row: dict[str, Any]) -> dict[str, Any]:
        if row["status"] != PENDING:
            return row
        mined = mined_proof(row["statement"], row["proof"])
        row.update(proof_offered=mined, proof_chars=len(mined), mined_proof_chars=len(mined))
        for tactic, text in candidate_tactics(self.shorten.tactics, mined):
            code = with_tactic(row["statement"], tactic)
            result = await self.pool.check(code, timeout=self.shorten.timeout_s, mode="proof",
                                           statement=row["statement"])
            row["lean_checks"] += 1
            if result.infra_failure:
                row["reason"] = f"{STAGE}: Lean gave no verdict on `{tactic}` ({result.status}); mined proof kept"
                return row
            if not result.ok:
                continue
            replay = await self.pool.replay(code, statement=row["statement"])
            if replay is not None:
                row["lean_checks"] += 1
                if replay.infra_failure:
                    row["reason"] = f"{STAGE}: the replay of `{tactic}` gave no verdict; mined proof kept"
                    return row
                if not replay.accepted:
                    continue
            return {**row, "proof_offered": text, "proof_chars": len(text), "proof_tactic": tactic}
        return row

    async def _guarded(self, row: dict[str, Any]) -> dict[str, Any]:
        try:
            return await self.process_row(row)
        except Exception as error:  # a bad row must not fail the block: it keeps its mined proof
            logger.warning("shorten: row %s failed in the operator: %s", row.get("candidate_id"), error)
            return {**row, "reason": f"{STAGE}: operator error: {error!r}; mined proof kept"}

    async def __call__(self, batch: pa.Table) -> pa.Table:
        return contributions_table(await asyncio.gather(*(self._guarded(row) for row in batch.to_pylist())))


def shorten_arguments(cfg: Config, shared: Shared) -> dict[str, Any]:
    """`contribute.shorten:` as the operator takes it."""
    section = cfg["contribute"]["shorten"]
    return {"shorten": ShortenSettings(tactics=tuple(section["tactics"]), timeout_s=float(section["timeout_s"]))}


DECLARATION = Stage(
    name=STAGE, operator=ShortenOperator, arguments=shorten_arguments, resources=f"contribute.{STAGE}.resources",
    checks_lean=True,
    takes=frozenset({PENDING}), gives=frozenset({PENDING}))
