"""The declaration index a run reads (dedup and grounding): where every actor finds it, which Mathlib revision it
must come from, and whether the one at `index.dir` can serve the run, checked before anything starts.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from lean_pool.pool import checker_provenance
from operators.retrieval.declaration_index import StaleIndex, node_local, read_manifest, stale_reasons
from operators.storage import first_line, is_uri
from pipelines.runtime.cli import SetupError


def index_location(location: str) -> str:
    """`index.dir` as every actor reads it: a URI as given, a local path made absolute (actors may start in another
    working directory)."""
    return location if is_uri(location) else str(Path(location).expanduser().resolve())


def index_revision(lean_cfg: Mapping[str, Any]) -> str | None:
    """The Mathlib revision a declaration index must come from: the one the run's Lean checks against (None,
    any index, for the simulator, which has no Mathlib, or a Lean project whose revision is unknown)."""
    lean = checker_provenance(lean_cfg)
    return None if lean["simulated"] else lean["mathlib_rev"]


def checked_index(cfg: DictConfig, revision: str | None) -> dict[str, Any]:
    """The revision and model of the declaration index dedup and grounding read, checked before the run starts
    (empty when neither reads one); a missing, stale or foreign index is a `SetupError` that says how to build the
    right one."""
    users = [name for name in ("dedup", "grounding") if cfg[name].enabled]
    index_dir = cfg.index.dir
    if "grounding" in users and index_dir is None:
        raise SetupError("grounding.enabled=true needs index.dir (build one with `folklore index`)")
    if not users or index_dir is None:
        return {}
    try:
        manifest = read_manifest(node_local(str(index_dir)))
    except (StaleIndex, OSError) as error:
        raise SetupError(f"index.dir={index_dir}: {first_line(error)}") from error
    reasons = stale_reasons(manifest, revision, str(cfg.embedding.model_id))
    if reasons:
        raise SetupError(f"index.dir={index_dir} cannot serve {' and '.join(users)}: {'; '.join(reasons)}. Build it "
                         f"with `folklore index mathlib_dir=<the Mathlib checkout Lean uses> out={index_dir}`")
    assert manifest is not None  # stale_reasons names a missing index
    return {"index_rev": manifest["mathlib_rev"], "model_id": manifest["model_id"]}
