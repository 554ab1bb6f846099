"""The `lean` section (the Lean pool or a Kimina server, with the simulator's own knobs) and `verify`, how an
accepted proof is replayed apart from the warm REPL.
"""

from __future__ import annotations

from typing import Literal

from conf.schema.fields import section, setting


@section
class Kimina:
    """The Kimina Lean Server that checks in place of Folklore's pool (`lean=kimina`)."""

    api_key_env: str | None = setting("environment variable holding the server's API key; null: send none",
                                      speed=True)
    http_timeout_s: float = setting("seconds to wait for one HTTP answer: the server's queue, a cold import, the check",
                                    at_least=0, speed=True)
    max_in_flight: int = setting("requests one process keeps open at once; at most the server's MAX_REPLS",
                                 at_least=1, speed=True)
    probe_timeout_s: float = setting("seconds to wait for `GET /health` and the key probe when the job starts",
                                     at_least=0, speed=True)
    url: str = setting("the server's http(s) root, e.g. http://lean-box:8000; checks go to URL/api/check",
                       speed=True)


@section
class ReplayTools:
    """The tools of the replay (`verify.replay`): each a path relative to lean.project_dir, absolute, or a bare name
    looked up on PATH; a missing one stops the job at start."""

    comparator: str = setting("leanprover/comparator (verify.replay=comparator only)", speed=True)
    landrun: str = setting("comparator's sandbox (verify.replay=comparator only)", speed=True)
    lean: str = setting("the `lean` that compiles the whole file to an .olean (`lean --json -o`)", speed=True)
    lean4checker: str = setting("the kernel replay of the compiled file (verify.replay=fresh)", speed=True)
    lean4checker_args: list[str] = setting("arguments to lean4checker; [--fresh] also replays all imports (hours)")
    lean4export: str = setting("comparator's exporter, built for this toolchain (verify.replay=comparator only)",
                               speed=True)


@section(speed=True)
class ReplResources:
    """What Ray reserves for each REPL process (and each replay slot) of a pool worker."""

    memory_gb: float = setting("memory in GB (a Mathlib REPL needs about 6.5)", at_least=0)
    num_cpus: float = setting("logical CPUs; a share below 1 will do for a REPL that mostly idles", at_least=0)


@section(speed=True)
class Sandbox:
    """The fences around each REPL process, behind the refusal rules (docs/lean-backends.md, "The sandbox")."""

    enabled: bool = setting("false: no namespace, private directory or process/file-size limits")
    env_allowlist: list[str] = setting("the only environment variables a REPL sees (applied even when disabled)")
    max_file_size_mb: int = setting("RLIMIT_FSIZE in MB: the largest file a REPL may write", at_least=1)
    max_processes: int = setting("RLIMIT_NPROC: the user's processes and threads at most (not enforced for root)",
                                 at_least=1)
    network: Literal['auto', 'bwrap', 'unshare', 'off'] = setting(
        "auto: bwrap, else unshare, else one warning; bwrap|unshare: required; off: keep network")


@section(speed=True)
class LeanSimulatorFaults:
    """Random faults of the Lean simulator for chaos runs, drawn per delivery of a check."""

    crash_rate: float = setting("share of checks that crash the REPL", at_least=0, at_most=1)
    hang_rate: float = setting("share of checks the REPL never answers (the pool's timeout ends them)", at_least=0,
                               at_most=1)
    seed: int | None = setting("null: a fresh seed per process, printed on stderr; an integer replays draws (tests)",
                               unranged="a random seed")


@section
class SimErrorRule:
    """A rule of the Lean simulator: a check whose text matches `pattern` gets an error saying `message`."""

    message: str = setting("the error message the check gets")
    pattern: str = setting("a regular expression searched in the checked text")


@section
class LeanSimulator:
    """The Lean simulator (`lean=sim`): speaks the REPL protocol, decides nothing, every verdict scripted."""

    burn_cpu: bool = setting("true: spin the CPU for the cost; false: sleep", speed=True)
    busy_log: str | None = setting("file each cost's wall-clock span is appended to (benchmarks); null: none",
                                   speed=True)
    check_s: float = setting("seconds of every other command (a `#print axioms` lookup is free)", at_least=0,
                             speed=True)
    crash_pattern: str = setting("a check containing this exits without answering (fault tests)", speed=True)
    error_rules: list[SimErrorRule] = setting("the scripted errors: text matching a rule's pattern gets its message")
    faults: LeanSimulatorFaults = setting("random crashes and hangs for chaos runs", speed=True)
    garbage_pattern: str = setting("a check containing this is answered with text that is not JSON", speed=True)
    grow_mb: int = setting("MB a `grow_pattern` check keeps for the rest of the process's life", at_least=0,
                           speed=True)
    grow_pattern: str = setting("a check containing this makes the process grow by grow_mb", speed=True)
    hang_pattern: str = setting("a check containing this is never answered", speed=True)
    import_s: float = setting("seconds of a command that carries imports", at_least=0, speed=True)
    noise_pattern: str = setting("a check containing this writes noise to stderr, then answers normally", speed=True)


@section
class Lean:
    """The Lean checker: the pool of REPLs (real or simulated) or a Kimina server, and its limits."""

    backend: Literal['sim', 'repl', 'kimina'] = setting(
        "sim: the simulator; repl: real Lean and Mathlib in a pool; kimina: a running Kimina Lean Server")
    checks_in_flight_per_repl: int = setting(
        "checks handed to a REPL's worker at once, so the next needs no round trip", at_least=1, speed=True)
    import_timeout_s: float = setting("seconds a header import (`import Mathlib`) may take", at_least=0, speed=True)
    kimina: Kimina = setting("lean=kimina: the server and how to talk to it")
    lake: str = setting("the lake executable (from elan); REPLs run as `lake env REPL_BINARY`", speed=True)
    mathlib_rev: str | None = setting("Mathlib revision recorded in each row; null: read from the project (repl)")
    max_queued: int = setting("checks waiting in a worker for a REPL before callers are made to wait", at_least=1,
                              speed=True)
    max_rss_gb: float = setting("GB: a REPL whose process tree grows past this is recycled", at_least=0, speed=True)
    max_uses: int = setting("checks a REPL serves before it is recycled", at_least=1, speed=True)
    memory_limit_gb: float = setting("GB: RLIMIT_AS of each REPL process", at_least=0, speed=True)
    node_resource: str | None = setting("custom Ray resource marking Lean nodes (e.g. lean); null: any node",
                                        speed=True)
    prewarm_headers: list[str] = setting("headers imported at pool start, e.g. [\"import Mathlib\"]", speed=True)
    prewarm_repls: int = setting("REPLs warmed per header of prewarm_headers", at_least=0, speed=True)
    project_dir: str = setting("the Lake project holding lean-toolchain and .lake/, with Mathlib and the REPL built",
                               speed=True)
    repl_binary: str = setting("the REPL executable, relative to project_dir", speed=True)
    replay: ReplayTools = setting("the replay's tools (verify.replay)")
    repls_per_worker: int = setting("REPL processes owned by each pool worker", at_least=1, speed=True)
    resources_per_repl: ReplResources = setting("what Ray reserves per REPL", speed=True)
    sandbox: Sandbox = setting("the fences around each REPL", speed=True)
    sim: LeanSimulator = setting("lean=sim: the simulator's costs, triggers and scripted errors")
    simulated: bool = setting("whether verdicts are simulated; recorded in every row's provenance")
    timeout_s: float = setting("seconds per check after the header is imported (Kimina: the import too)", at_least=0,
                               speed=True)
    toolchain: str | None = setting("Lean toolchain recorded in each row; null: read from the project (repl)")
    workers: int = setting("pool workers (Ray actors), each owning repls_per_worker REPLs", at_least=1, speed=True)


@section
class Verify:
    """How an accepted proof is replayed in a Lean process started for it alone (docs/checking-lean.md, "Replay")."""

    replay: Literal['off', 'fresh', 'comparator'] = setting(
        "off; fresh: compile to an .olean, then lean4checker; comparator: leanprover/comparator")
    sim_reject: SimErrorRule = setting("lean=sim only: an error rule of the replay alone, so a replay can disagree")
    slots_per_worker: int = setting("replays at once per pool worker; each reserves one more REPL's resources",
                                    at_least=1, speed=True)
    timeout_s: float | None = setting("seconds per replay; null: lean.import_timeout_s + lean.timeout_s", at_least=0,
                                      speed=True)
