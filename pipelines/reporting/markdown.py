"""Markdown tables of a run's numbers that more than one job prints: the report's page, and the evaluate job's
Success@t table (the paper's Table 3), so both lay out the same figures the same way."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import polars as pl

NONE = "—"


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A GitHub-flavoured Markdown table; `|` inside cells is escaped."""
    def cell(value: Any) -> str:
        return NONE if value is None else str(value).replace("|", "\\|")

    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(cell(value) for value in row) + " |" for row in rows]
    return "\n".join(lines)


def count_pct(count: int | None, pct: float | None) -> str:
    """`4 (80.0%)`; a dash when the step did not run."""
    if count is None:
        return NONE
    return f"{count} ({pct:.1f}%)" if pct is not None else str(count)


def number(value: float | int | None) -> str:
    """Integers as they are, other numbers with one decimal, a dash for None."""
    if value is None:
        return NONE
    return str(value) if isinstance(value, int) else f"{value:.1f}"


def success_markdown(success: pl.DataFrame, max_repairs: int) -> str:
    """The paper's Table 3: per prover (and union) and domain, Success@0..K as count and % of attempted."""
    ts = range(max_repairs + 1)
    rows = [
        [r["prover"], r["domain"], r["attempted"], *[count_pct(r[f"solved_at_{t}"], r[f"success_at_{t}"]) for t in ts]]
        for r in success.iter_rows(named=True)
    ]
    table = markdown_table(["Prover", "Domain", "Attempted", *[f"Success@{t}" for t in ts]], rows)
    return (table + "\n\nSuccess@t: proved within t repairs, as a share of the statements sent to the provers "
            "(compiled, non-trivial); `union`: proved by any prover.")
