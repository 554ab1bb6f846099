"""Typed settings of the declaration index and of grounding, shared by the dedup, formalize and prove steps.

Built by the pipeline from `index:`, `embedding:` and `grounding:` of the config (`pipelines.runtime.stage_settings`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class IndexSettings:
    """The declaration index a step reads: `dir` a URI or an absolute path (None: no index), `revision` the Mathlib
    revision it must come from (None: any), `embedding` the encoder's config section (`conf/embedding/`)."""

    dir: str | None
    revision: str | None
    embedding: Mapping[str, Any]


@dataclass(frozen=True)
class GroundingSettings:
    """Grounding of the formalize and prove prompts (`conf/grounding/`): how many related declarations, how many
    real names per unknown one for at most `max_missing` unknown names, the section's headers, and the index."""

    k: int
    k_missing: int
    max_missing: int
    header: str
    missing_header: str
    index: IndexSettings
