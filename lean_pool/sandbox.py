"""Fences around each REPL process: no network, one private writable directory, a read-only filesystem,
and limits on processes and file sizes.

REPLs run LLM-written Lean, and Lean can run arbitrary code; the refusal rules stop the known ways
before Lean sees the text, and this is the defence behind them. Which fences hold depends on the
machine: a network namespace needs `bwrap` or user namespaces (`unshare`), and only `bwrap` makes the
filesystem read-only. Both are tried once per process; without either, REPLs keep the network and
one warning says so. The sandbox wraps any argv, so tests fence a plain Python script the same way.
"""

from __future__ import annotations

import functools
import logging
import shutil
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, get_args

Isolation = Literal["bwrap", "unshare"]
# `network:` values: auto tries bwrap then unshare and warns when neither works; bwrap or unshare must work.
NETWORK_MODES = ("auto", "bwrap", "unshare", "off")
# How long the one trial run of a fence (`true` inside it) may take.
PROBE_TIMEOUT_S = 10.0
MIB = 1024**2
README_SECTION = 'docs/lean-backends.md, section "lean=repl: real Lean + Mathlib"'

logger = logging.getLogger(__name__)


class SandboxUnavailable(RuntimeError):
    """The configuration requires a network fence that this machine does not allow."""


@dataclass(frozen=True)
class NetworkFence:
    """A way to start a program in its own network namespace; `program` is the resolved bwrap/unshare."""

    kind: Isolation
    program: str

    def prefix(self, private_dir: str) -> list[str]:
        """Arguments that run the command after them fenced in, `private_dir` its only writable host path."""
        if self.kind == "unshare":
            return [self.program, "--user", "--net", "--map-root-user", "--"]
        # The whole host filesystem read-only; /dev and /proc are the sandbox's own; --unshare-pid and
        # --die-with-parent make everything inside die when bwrap does.
        return [
            self.program, "--unshare-net", "--unshare-pid", "--die-with-parent",
            "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
            "--bind", private_dir, private_dir, "--chdir", private_dir, "--",
        ]


@dataclass(frozen=True)
class Sandbox:
    """What each REPL process gets on top of its process group and address-space limit."""

    fence: NetworkFence | None
    max_processes: int
    max_file_size_bytes: int

    def limits(self) -> dict[str, int]:
        """Resource limits (names of `resource` constants) set in the REPL's process before it starts."""
        return {"RLIMIT_NPROC": self.max_processes, "RLIMIT_FSIZE": self.max_file_size_bytes}

    def command(self, argv: Sequence[str], private_dir: str) -> list[str]:
        """`argv` run inside the network fence (unchanged when there is none)."""
        return [*(self.fence.prefix(private_dir) if self.fence else []), *argv]

    def environment(self, env: Mapping[str, str], private_dir: str) -> dict[str, str]:
        """`env` with HOME and TMPDIR pointing at the REPL's private directory."""
        return {**env, "HOME": private_dir, "TMPDIR": private_dir}


def sandbox_from_config(cfg: Mapping[str, Any]) -> Sandbox | None:
    """The `lean.sandbox:` block as a Sandbox (None when disabled); raises SandboxUnavailable as configured."""
    if not cfg["enabled"]:
        return None
    return Sandbox(
        fence=network_fence(str(cfg["network"])),
        max_processes=int(cfg["max_processes"]),
        max_file_size_bytes=int(float(cfg["max_file_size_mb"]) * MIB),
    )


@functools.cache
def network_fence(mode: str) -> NetworkFence | None:
    """The fence `mode` asks for, tried once per process; with `auto` and none working, warn once and return None."""
    if mode not in NETWORK_MODES:
        raise ValueError(f"lean.sandbox.network={mode!r}: expected one of {', '.join(NETWORK_MODES)}")
    if mode == "off":
        return None
    kinds = [kind for kind in get_args(Isolation) if mode in ("auto", kind)]
    failures = []
    for kind in kinds:
        fence, failure = _try_fence(kind)
        if fence is not None:
            return fence
        failures.append(f"{kind}: {failure}")
    reasons = "; ".join(failures)
    if mode != "auto":
        raise SandboxUnavailable(f"lean.sandbox.network={mode} does not work here ({reasons}); see {README_SECTION}")
    logger.warning(
        "Lean REPLs will have network access: no network namespace is available (%s). Install bubblewrap or "
        "allow user namespaces; see %s", reasons, README_SECTION,
    )
    return None


def _try_fence(kind: Isolation) -> tuple[NetworkFence | None, str]:
    """Run `true` inside the fence once: the fence when that works, else None and why not."""
    program = shutil.which(kind)
    if program is None:
        return None, "not installed"
    fence = NetworkFence(kind, program)
    with tempfile.TemporaryDirectory() as private_dir:
        try:
            done = subprocess.run([*fence.prefix(private_dir), "true"], capture_output=True, timeout=PROBE_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            return None, f"no answer within {PROBE_TIMEOUT_S:g} s"
    if done.returncode != 0:
        return None, done.stderr.decode(errors="replace").strip() or f"exit code {done.returncode}"
    return fence, ""
