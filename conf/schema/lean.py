"""The `lean` section (the Lean pool or a Kimina server, with the simulator's own knobs) and `verify`, how an
accepted proof is replayed apart from the warm REPL.
"""

from __future__ import annotations

from typing import Any, Literal

from conf.schema.fields import section, setting


@section
class LeanKimina:
    """lean.kimina"""

    api_key_env: str = setting("environment variable holding the server's API key; null: send none", speed=True)
    http_timeout_s: float = setting("wait for one HTTP answer: the server's queue, a cold header import and the check", at_least=0, speed=True)
    max_in_flight: int = setting("", at_least=1, speed=True)
    probe_timeout_s: float = setting("wait for `GET /health` and the key probe when the job starts", at_least=0, speed=True)
    url: Any = setting("e.g. http://lean-box:8000 (the server's root; checks go to URL/api/check)", speed=True)


@section
class LeanReplay:
    """The replay (`verify.replay`, docs/checking-lean.md): tools run as `lake --dir PROJECT env TOOL` in a private directory. Each is a path relative to project_dir (or absolute), or a bare name looked up on PATH; a missing one is an error when the job starts."""

    comparator: str = setting("verify.replay=comparator only", speed=True)
    landrun: str = setting("comparator's sandbox (verify.replay=comparator only)", speed=True)
    lean: str = setting("compiles the whole file to an .olean (`lean --json -o`), found on lake env's PATH", speed=True)
    lean4checker: str = setting("", speed=True)
    lean4checker_args: list[Any] = setting("[--fresh] also replays every imported declaration (all of Mathlib: hours per proof)")
    lean4export: str = setting("comparator's exporter, built for this toolchain (verify.replay=comparator only)", speed=True)


@section(speed=True)
class LeanResourcesPerRepl:
    """speed"""

    memory_gb: float = setting("", at_least=0)
    num_cpus: float = setting("", at_least=0)


@section(speed=True)
class LeanSandbox:
    """speed"""

    enabled: bool = setting("false: no namespace, private directory or process/file-size limits")
    env_allowlist: list[Any] = setting("The only variables a REPL sees (always applied); HOME and TMPDIR then point at its private directory.")
    max_file_size_mb: int = setting("RLIMIT_FSIZE: largest file a REPL may write", at_least=1)
    max_processes: int = setting("RLIMIT_NPROC: counts every process and thread of the user, not root's", at_least=1)
    network: Literal['auto', 'bwrap', 'unshare', 'off'] = setting("auto: bwrap, else unshare, else one warning; bwrap|unshare: required; off: keep network")


@section(speed=True)
class LeanSimFaults:
    """speed"""

    crash_rate: float = setting("", at_least=0, at_most=1)
    hang_rate: float = setting("", at_least=0, at_most=1)
    seed: Any | None = setting("")


@section
class LeanSim:
    """lean.sim"""

    burn_cpu: bool = setting("true: spin the CPU for the cost; false: sleep", speed=True)
    busy_log: Any | None = setting("", speed=True)
    check_s: float = setting("cost of every other command (a `#print axioms` lookup is free)", at_least=0, speed=True)
    crash_pattern: str = setting("Triggers: a check whose text contains the pattern misbehaves on purpose (fault tests).", speed=True)
    error_rules: list[Any] = setting("")
    faults: LeanSimFaults = setting("", speed=True)
    garbage_pattern: str = setting("", speed=True)
    grow_mb: int = setting("", at_least=0, speed=True)
    grow_pattern: str = setting("", speed=True)
    hang_pattern: str = setting("", speed=True)
    import_s: float = setting("cost of a command that carries imports", at_least=0, speed=True)
    noise_pattern: str = setting("", speed=True)


@section
class Lean:
    """lean"""

    backend: Literal['sim', 'repl', 'kimina'] = setting("A running Kimina Lean Server (github.com/project-numina/kimina-lean-server) checks instead of Folklore's pool")
    checks_in_flight_per_repl: int = setting("handed to a REPL's worker at once, so the next check starts without a round trip", at_least=1, speed=True)
    import_timeout_s: float = setting("", at_least=0, speed=True)
    kimina: LeanKimina = setting("")
    lake: str = setting("lake executable (from elan); REPLs run as `lake env REPL_BINARY`", speed=True)
    mathlib_rev: str | None = setting("the server's Mathlib revision, recorded likewise")
    max_queued: int = setting("checks waiting in a worker for a REPL before callers are made to wait", at_least=1, speed=True)
    max_rss_gb: float = setting("", at_least=0, speed=True)
    max_uses: int = setting("", at_least=1, speed=True)
    memory_limit_gb: float = setting("", at_least=0, speed=True)
    node_resource: Any | None = setting("", speed=True)
    prewarm_headers: list[Any] = setting("", speed=True)
    prewarm_repls: int = setting("", at_least=0, speed=True)
    project_dir: Any = setting("the Lake project (holds lean-toolchain, lakefile, .lake/)", speed=True)
    repl_binary: str = setting("relative to project_dir", speed=True)
    replay: LeanReplay = setting("The replay (`verify.replay`, docs/checking-lean.md): tools run as `lake --dir PROJECT env TOOL` in a private directory")
    repls_per_worker: int = setting("", at_least=1, speed=True)
    resources_per_repl: LeanResourcesPerRepl = setting("", speed=True)
    sandbox: LeanSandbox = setting("", speed=True)
    sim: LeanSim = setting("")
    simulated: bool = setting("")
    timeout_s: float = setting("per check; Kimina applies it to the header import of a cold REPL too", at_least=0, speed=True)
    toolchain: str | None = setting("the server's Lean toolchain, recorded in every row's provenance (Kimina does not report it)")
    workers: int = setting("", at_least=1, speed=True)


@section
class VerifySimReject:
    """lean=sim only: text matching this pattern gets this error in the replay's fresh simulator and nowhere else, so tests can make a replay disagree with the warm REPL (the simulator decides nothing by itself)."""

    message: str = setting("")
    pattern: str = setting("")


@section
class Verify:
    """How `replay=true` replays a verified file (same section as in conf/mine.yaml; docs/checking-lean.md, "Replay"): a Lean process started for it alone compiles the whole file and the kernel replays its declarations."""

    replay: Literal['off', 'fresh', 'comparator'] = setting("off | fresh (lean --json -o, then lean4checker) | comparator (leanprover/comparator)")
    sim_reject: VerifySimReject = setting("lean=sim only: text matching this pattern gets this error in the replay's fresh simulator and nowhere else, so tests can make a replay disagree with the warm REPL (the simulator decides nothing by itself).")
    slots_per_worker: int = setting("", at_least=1, speed=True)
    timeout_s: Any | None = setting("", at_least=0, speed=True)
