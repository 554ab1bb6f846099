"""Sweeps over a whole fixture of ../shared (the 601 files of the Mathlib sample, every Lean file of the fixtures) run
in the `sweep` tier; the fast tier runs the same test over a fixed sample of the same files, every `SAMPLE_STEP`-th in
name order, plus the files a test names for what only they hold."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import pytest

SAMPLE_STEP = 20
# The step a sweep test is run with: every file, in the sweep tier; every SAMPLE_STEP-th, in the fast tier.
EVERY_FILE = pytest.param(1, id="every file", marks=pytest.mark.sweep)
SAMPLED = pytest.param(SAMPLE_STEP, id=f"every {SAMPLE_STEP}th file")


def files_of(folder: Path, step: int, also: Iterable[str] = ()) -> list[Path]:
    """The `.lean` files under `folder` a test with this `step` reads: every `step`-th in name order, then each file
    of `also` (paths relative to `folder`) the sample left out."""
    every = sorted(folder.rglob("*.lean"))
    chosen = every[::step]
    return chosen + [folder / name for name in also if folder / name not in chosen]
