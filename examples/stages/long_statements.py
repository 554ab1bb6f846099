"""A stage declared outside Folklore, as a lab would write one: an open candidate whose raw statement is longer than
the lab allows is set aside with a status of the lab's own, `too_long_for_mathlib`, before any LLM call or Lean check
is spent on it; every other row passes untouched. `pipeline:` lists it after split as
`examples.stages.long_statements:STAGE`, with the repository's root on PYTHONPATH; docs/extending.md walks through it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from operators.rows.candidates import DISCOVERED, candidates_table, is_open
from operators.stage import Config, Execution, Shared, Stage

# The status a set-aside candidate ends with. No Folklore stage takes it, so the row is written as this stage left it.
TOO_LONG = "too_long_for_mathlib"
# The lab's limit on a candidate's `statement_raw` in characters (its `import` line and context included); this module
# is the lab's own config. Chosen so that the demo's simulated statements (77 to 110 characters) fall on both sides.
MAX_CHARS = 100


@dataclass(frozen=True)
class LongStatementSettings:
    """How long, in characters, a candidate's raw statement may be before the stage sets it aside."""

    max_chars: int = MAX_CHARS


def set_aside_long(rows: Iterable[Mapping[str, Any]], settings: LongStatementSettings) -> list[dict[str, Any]]:
    """`rows` with each open (`discovered`) candidate whose `statement_raw` is longer than `settings.max_chars` made
    `too_long_for_mathlib`, its reason saying how long it is; the others as they were."""
    out = []
    for row in rows:
        done = dict(row)
        length = len(done["statement_raw"] or "")
        if is_open(done, DISCOVERED) and length > settings.max_chars:
            done.update(status=TOO_LONG, reason=f"statement_raw is {length} characters, over the lab's limit of "
                                                f"{settings.max_chars} ({__name__}.MAX_CHARS)")
        out.append(done)
    return out


def mark_long_statements(batch: pa.Table, settings: LongStatementSettings) -> pa.Table:
    """Ray Data `map_batches` function over candidate rows: `set_aside_long` on a batch."""
    return candidates_table(set_aside_long(batch.to_pylist(), settings))


def long_statement_arguments(cfg: Config, shared: Shared) -> dict[str, Any]:
    """The stage's typed settings, at the lab's values; it reads nothing of the job's config."""
    return {"settings": LongStatementSettings()}


STAGE = Stage(
    name="long_statements", operator=mark_long_statements, arguments=long_statement_arguments,
    execution=Execution.TASKS, takes=frozenset({DISCOVERED}), gives=frozenset({DISCOVERED, TOO_LONG}))
