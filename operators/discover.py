"""discover: the full text of a seed file goes to an LLM, which brainstorms missing lemmas after a marker.

One row in per (seed, sample), one discovery row out: the answer, its split into candidate statements,
and a status that says what happened (a bad seed, an answer without the marker, an endpoint that was
down). Discoveries are written as their own table so a resumed run never asks for them again.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypedDict, cast

import pyarrow as pa

from operators.base import LLMOperator
from operators.llm import prompts
from operators.llm.answers import CodeShape
from operators.llm.calls import CUT_FINISH_REASON, LLMResult
from operators.llm.settings import LLMSettings
from operators.rows import seeds
from operators.rows.candidates import (
    ERROR_INFRA,
    LLM_CALL,
    PROVENANCE,
    TIMESTAMP,
    LLMCall,
    Provenance,
    llm_call_entry,
    settle_operator_error,
    unit_id,
)
from operators.split import DISCOVERED, SEED_DISCOVERED, SEED_TO_DISCOVER, split_answer
from operators.stage import Config, Shared, Stage
from operators.storage import resolve

STAGE = "discover"
NO_ANSWER = "no_answer"
# Discovery statuses a resumed run asks again for.
RETRIED_STATUSES = frozenset({ERROR_INFRA})

DISCOVERY_SCHEMA = pa.schema(
    [
        ("unit_id", pa.string()),
        ("seed_id", pa.string()),
        ("seed_path", pa.string()),
        ("domain", pa.string()),
        ("sample", pa.int32()),
        ("round", pa.int32()),
        ("seed_status", pa.string()),
        ("seed_chars", pa.int64()),
        ("status", pa.string()),
        ("reason", pa.string()),
        ("error", pa.string()),
        ("response", pa.string()),
        ("finish_reason", pa.string()),
        ("code", pa.string()),
        ("snippets", pa.list_(pa.string())),
        ("dropped_lemmas", pa.int32()),  # lemmas of the answer beyond discover.max_lemmas; null in older runs
        ("llm_calls", pa.list_(LLM_CALL)),
        ("prompt_tokens", pa.int64()),
        ("completion_tokens", pa.int64()),
        ("provenance", PROVENANCE),
        ("finished_at", TIMESTAMP),
    ]
)


class DiscoveryRow(TypedDict):
    """One row of the discoveries table (tests/test_row_shapes.py holds it equal to the schema): the seed's status
    and size once it was read, the answer's columns once the model answered."""

    unit_id: str
    seed_id: str
    seed_path: str
    domain: str
    sample: int
    round: int
    seed_status: str | None
    seed_chars: int | None
    status: str | None
    reason: str | None
    error: str | None
    response: str | None
    finish_reason: str | None
    code: str | None
    snippets: list[str]
    dropped_lemmas: int | None
    llm_calls: list[LLMCall]
    prompt_tokens: int
    completion_tokens: int
    provenance: Provenance
    finished_at: datetime | None


def new_discovery(unit: Mapping[str, Any], provenance: Provenance) -> DiscoveryRow:
    """The discovery of one unit (`seed_units`) before its seed is read: no call, no snippet yet."""
    # Every column null to begin with: the schema's names are the row type's keys (tests/test_row_shapes.py holds
    # them equal), which mypy cannot see through `fromkeys`.
    nulls = cast(DiscoveryRow, dict.fromkeys(DISCOVERY_SCHEMA.names))
    return {**nulls, "unit_id": unit["unit_id"], "seed_id": unit["seed_id"], "seed_path": unit["seed_path"],
            "domain": unit["domain"], "sample": unit["sample"], "round": unit["round"], "llm_calls": [],
            "prompt_tokens": 0, "completion_tokens": 0, "snippets": [], "provenance": provenance}


# What discover takes, one row per seed: where the seed is, which samples are still to draw, and the files that
# split will need for it (`operators.split.SEED_ITEM_SCHEMA`: earlier discoveries and finished candidates).
SEED_WORK_SCHEMA = pa.schema([
    ("seed_id", pa.string()),
    ("seed_path", pa.string()),
    ("seed_file", pa.string()),
    ("domain", pa.string()),
    ("samples", pa.list_(pa.int32())),
    ("round", pa.int32()),
    ("known", pa.list_(pa.string())),  # the lemmas earlier rounds proved for the seed, for the prompt
    ("paths", pa.list_(pa.string())),
    ("finished_files", pa.list_(pa.string())),
])


def seed_units(batch: pa.Table) -> pa.Table:
    """The discover calls of seed work items (`SEED_WORK_SCHEMA`): one unit per (seed, sample still to draw)."""
    shared = ("seed_id", "seed_path", "seed_file", "domain", "round", "known")
    units = [{"unit_id": unit_id(seed["seed_id"], sample, seed["round"]), "sample": sample,
              **{key: seed[key] for key in shared}}
             for seed in batch.to_pylist() for sample in seed["samples"]]
    schema = pa.schema([("unit_id", pa.string()), *(SEED_WORK_SCHEMA.field(key) for key in shared),
                        ("sample", pa.int32())])
    return pa.Table.from_pylist(units, schema=schema)


@dataclass(frozen=True)
class DiscoverSettings:
    """The discover stage's config (`discover:` and the seed limits of `seeds:`): the answer's marker, the lemma
    count the prompt asks for, the most lemmas of one answer kept, the largest seed that fits the model (estimated
    tokens, characters per token), and the prompt templates."""

    marker: str
    min_lemmas: int
    max_lemmas: int
    seed_max_tokens: int
    chars_per_token: float
    prompts: Mapping[str, str]


def answered(result: LLMResult, marker: str, max_lemmas: int) -> dict[str, Any]:
    """The discovery's columns given the discover model's answer: its candidate snippets (at most `max_lemmas`, the
    rest counted as dropped), or why there are none (the endpoint failed, the seed did not fit the model, no answer,
    no marker, no lemma; and whether the answer was cut at its max_tokens, which is often why)."""
    out = {"llm_calls": [llm_call_entry(STAGE, 1, result)], "prompt_tokens": result.prompt_tokens,
           "completion_tokens": result.completion_tokens, "response": result.text,
           "finish_reason": result.finish_reason}
    if result.infra:
        return {**out, "error": f"{result.error_kind}: {result.error}", "status": ERROR_INFRA,
                "reason": "discover: infrastructure failure"}
    if result.error_kind == "context_too_long":
        return {**out, "seed_status": seeds.TOO_LONG, "status": seeds.TOO_LONG,
                "reason": f"the endpoint refused the prompt: {result.error}"}
    if not result.ok:
        return {**out, "status": NO_ANSWER, "reason": f"{result.error_kind}: {result.error}"}
    split = split_answer(result.text or "", marker, max_lemmas)
    cut = split.status != DISCOVERED and result.finish_reason == CUT_FINISH_REASON
    return {**out, "code": split.code, "snippets": list(split.snippets), "status": split.status,
            "reason": f"{split.reason}; it was cut off at the token limit" if cut else split.reason,
            "dropped_lemmas": split.dropped}


class DiscoverOperator(LLMOperator):
    """Reads each unit's seed file, asks the discover model once, and splits its answer."""

    stage = STAGE

    def __init__(self, settings: LLMSettings, *, discover: DiscoverSettings, provenance: Provenance,
                 **kwargs: Any) -> None:
        super().__init__(settings, **kwargs)
        self.discover = discover
        self.provenance = provenance

    async def process_row(self, row: dict[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = dict(new_discovery(row, self.provenance))
        filesystem, path = resolve(row["seed_file"])
        seed = seeds.read_seed(filesystem, path, self.discover.seed_max_tokens, self.discover.chars_per_token)
        out.update(seed_status=seed.status, seed_chars=seed.chars)
        if seed.text is None:
            return _finished(out, seed.status, seed.reason)
        messages = prompts.discover_messages(self.discover.prompts, seed.text, self.discover.marker,
                                             self.discover.min_lemmas, row["known"] or ())
        # The seed's samples share its prompt, so they share a cache key: one replica computes the seed's prefill.
        result = await self.complete(self.settings.request("discover", STAGE, messages, row["unit_id"],
                                                           cache_key=row["seed_id"]))
        out.update(answered(result, self.discover.marker, self.discover.max_lemmas),
                   finished_at=datetime.now(UTC))
        return out

    async def __call__(self, batch: pa.Table) -> pa.Table:
        table = await super().__call__(batch)
        rows = [settle_operator_error(row, STAGE) for row in table.to_pylist()]
        return pa.Table.from_pylist([_stamped(row) for row in rows], schema=DISCOVERY_SCHEMA)


def _finished(out: dict[str, Any], status: str, reason: str | None) -> dict[str, Any]:
    out.update(status=status, reason=reason, finished_at=datetime.now(UTC))
    return out


def _stamped(row: dict[str, Any]) -> dict[str, Any]:
    """Every discovery carries the time it was settled, failed rows included."""
    row["finished_at"] = row.get("finished_at") or datetime.now(UTC)
    return row


def discover_arguments(cfg: Config, shared: Shared) -> dict[str, Any]:
    """`discover:` and the seed limits of `seeds:` as the operator takes them."""
    section, seed_limits = cfg["discover"], cfg["seeds"]
    return {"discover": DiscoverSettings(
        marker=str(section["marker"]), min_lemmas=int(section["min_lemmas"]), max_lemmas=int(section["max_lemmas"]),
        seed_max_tokens=int(seed_limits["max_tokens"]), chars_per_token=float(seed_limits["chars_per_token"]),
        prompts=shared.prompts)}


DECLARATION = Stage(
    name=STAGE, operator=DiscoverOperator, arguments=discover_arguments, resources=f"{STAGE}.resources",
    takes=frozenset({SEED_TO_DISCOVER}), gives=frozenset({SEED_DISCOVERED}),
    calls={STAGE: ("discover",)}, prompts=("system", "discover", "discover_known"), parser=split_answer,
    answer_shapes={STAGE: lambda cfg: CodeShape(str(cfg["discover"]["marker"]))})
