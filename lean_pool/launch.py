"""How to start a REPL process for the configured backend, and what to record about it.

Both backends end in a `ReplLaunch`, so everything above this module treats the simulator and a
real Lean + Mathlib project the same way; only this file knows the difference.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from lean_pool.repl import ReplLaunch
from lean_pool.sandbox import README_SECTION, SandboxUnavailable, sandbox_from_config

GIB = 1024**3


class LeanSetupError(RuntimeError):
    """The Lean configuration cannot start: it points at something that is not there (a project, a binary, a
    required sandbox) or asks for a pool no node of the cluster can hold. Callers print it as one `error:` line."""


def scrubbed_env(allowlist: Sequence[str]) -> dict[str, str]:
    """The caller's environment reduced to the allowlisted variables, so API keys never reach a REPL."""
    return {name: os.environ[name] for name in allowlist if name in os.environ}


def build_launch(lean_cfg: Mapping[str, Any]) -> ReplLaunch:
    """Translate a `conf/lean/*.yaml` mapping into the command that starts one REPL."""
    memory_limit_bytes = int(float(lean_cfg["memory_limit_gb"]) * GIB)
    env = scrubbed_env(lean_cfg["sandbox"]["env_allowlist"])
    if lean_cfg["backend"] == "sim":
        argv = [sys.executable, "-m", "lean_pool.simulator", "--config", json.dumps(dict(lean_cfg["sim"]))]
        cwd = None
    elif lean_cfg["backend"] == "repl":
        project_dir, repl_binary, lake = real_lean_paths(lean_cfg)
        # A sandboxed REPL runs in its private directory, so lake is told the project and elan the toolchain
        # (elan otherwise reads lean-toolchain from the working directory, and ELAN_HOME from HOME).
        argv = [lake, "--dir", str(project_dir), "env", str(repl_binary)]
        cwd = str(project_dir)
        env["ELAN_TOOLCHAIN"] = (project_dir / "lean-toolchain").read_text().strip()
        elan_home = Path(lake).parent.parent
        if "ELAN_HOME" not in env and (elan_home / "toolchains").is_dir():
            env["ELAN_HOME"] = str(elan_home)
    else:
        raise ValueError(f"unknown lean backend {lean_cfg['backend']!r}: expected 'sim' or 'repl'")
    try:
        sandbox = sandbox_from_config(lean_cfg["sandbox"])
    except SandboxUnavailable as error:
        raise LeanSetupError(str(error)) from error
    return ReplLaunch(argv=argv, cwd=cwd, env=env, memory_limit_bytes=memory_limit_bytes, sandbox=sandbox)


def real_lean_paths(lean_cfg: Mapping[str, Any]) -> tuple[Path, Path, str]:
    """Check that the Lake project, its REPL binary and `lake` exist; name the first thing missing."""
    if lean_cfg.get("project_dir") in (None, "", "???"):
        raise LeanSetupError(f"lean=repl needs lean.project_dir=/path/to/lake/project; see {README_SECTION}")
    project_dir = Path(str(lean_cfg["project_dir"])).expanduser().resolve()
    if not (project_dir / "lean-toolchain").is_file():
        missing = project_dir / "lean-toolchain"
        raise LeanSetupError(f"no Lake project at {project_dir} (missing {missing}); see {README_SECTION}")
    repl_binary = project_dir / str(lean_cfg["repl_binary"])
    if not repl_binary.is_file():
        raise LeanSetupError(
            f"REPL binary not built: {repl_binary} is missing (run `lake build repl`); see {README_SECTION}"
        )
    lake = shutil.which(str(lean_cfg["lake"]))
    if lake is None:
        raise LeanSetupError(f"`{lean_cfg['lake']}` not found on PATH (install elan); see {README_SECTION}")
    return project_dir, repl_binary, lake


def lean_tool(project_dir: Path, configured: str, what: str) -> str:
    """The absolute path of a tool a replay runs: `configured` is a path (relative to the Lake project unless
    absolute) or a bare name looked up on PATH; a `LeanSetupError` naming it and `what` it is for when it is absent."""
    if os.sep in configured:
        path = project_dir / Path(configured).expanduser()
        if path.is_file():
            return str(path)
        raise LeanSetupError(f"{what}: {path} is missing; see {README_SECTION}")
    found = shutil.which(configured)
    if found is None:
        raise LeanSetupError(f"{what}: `{configured}` not found on PATH; see {README_SECTION}")
    return found


def provenance(lean_cfg: Mapping[str, Any]) -> dict[str, Any]:
    """What every result records about the checker that produced it."""
    if lean_cfg["backend"] == "sim":
        return {"lean_backend": "sim", "toolchain": "sim", "mathlib_rev": "sim", "simulated": True}
    project_dir = Path(str(lean_cfg["project_dir"])).expanduser()
    toolchain = lean_cfg.get("toolchain") or (project_dir / "lean-toolchain").read_text().strip()
    return {
        "lean_backend": "repl",
        "toolchain": toolchain,
        "mathlib_rev": lean_cfg.get("mathlib_rev") or _mathlib_rev(project_dir),
        "simulated": False,
    }


def _mathlib_rev(project_dir: Path) -> str | None:
    """The Mathlib commit pinned in the project's lake manifest, if it records one."""
    manifest = project_dir / "lake-manifest.json"
    if not manifest.is_file():
        return None
    packages = json.loads(manifest.read_text()).get("packages", [])
    return next((p.get("rev") for p in packages if p.get("name", "").lower() == "mathlib"), None)
