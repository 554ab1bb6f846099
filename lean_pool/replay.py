"""The replay: a proof the warm REPL accepted is checked once more by a Lean process started for it alone.

A warm REPL reports what its long-lived process saw; the replay compiles the whole file (header, statement,
proof) in a new process and has the kernel re-check the declarations that compilation produced, so a proof that
relied on the warm process or slipped a declaration past the kernel is not recorded as proved. The judgements
are plain functions; the process work per backend is at the end:
- `lean=sim` (any mode but off): a new simulator process, launched and fenced like a REPL, runs the file as one
  command and is stopped. `verify.sim_reject` is an error rule only that process has, so a test can make the
  replay disagree with the warm REPL; the simulator decides nothing by itself.
- `lean=repl`, `fresh`: in a private directory, `lake env lean --json -o M.olean M.lean` (the file plus one
  `#print axioms` line per target), then `lake env lean4checker M`, which replays M's declarations through the
  kernel on top of its imports.
- `lean=repl`, `comparator`: leanprover/comparator on a scratch Lake project whose `Challenge` is the statement
  and whose `Solution` is the file, reusing the project's packages.
"""

from __future__ import annotations

import json
import re
import shutil
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from lean_pool import verdict
from lean_pool.busy_log import replay_busy_log
from lean_pool.launch import LeanSetupError, build_launch, lean_tool, real_lean_paths
from lean_pool.repl import EXEC_FAILED_CODE, CommandOutcome, ReplProcess, run_command

OFF, FRESH, COMPARATOR = "off", "fresh", "comparator"
MODES = (OFF, FRESH, COMPARATOR)
ACCEPTED, REJECTED, ERROR_INFRA = "accepted", "rejected", "error_infra"
# Module names of the replayed file (fresh) and of comparator's two sides.
MODULE = "FolkloreReplay"
CHALLENGE, SOLUTION = "Challenge", "Solution"
COMPARATOR_REPORT = "comparator-report.json"
# Prefix of each replay's private working directory.
WORKDIR_PREFIX = "lean-replay-"
# Characters of a tool's output quoted in a reason.
OUTPUT_EXCERPT_CHARS = 500
# `lean --json` names the info severity in full; the REPL (and the verdict rules) say "info".
_SEVERITY = {"information": "info"}
_MISSING_OLEAN = re.compile(r"object file .* does not exist")


@dataclass(frozen=True)
class ReplaySettings:
    """`verify:` resolved against the Lean backend: the mode, the limit per replay, how many replays a pool worker
    runs at once, the simulator's replay-only rule, and the absolute paths of the real tools."""

    mode: str
    timeout_s: float
    slots_per_worker: int
    sim_reject: dict[str, str] | None = None
    tools: dict[str, str] = field(default_factory=dict)
    checker_args: tuple[str, ...] = ()

    @property
    def enabled(self) -> bool:
        return self.mode != OFF


@dataclass
class ReplayResult:
    """What one replay came to: `verdict` is accepted, rejected or error_infra (the replay could not decide, so
    the row is retried on resume), `reasons` say why, `pid` is the process that replayed (stopped since)."""

    verdict: str
    reasons: list[str]
    seconds: float = 0.0
    mode: str = FRESH
    messages: list[dict[str, Any]] = field(default_factory=list)
    pid: int | None = None

    @property
    def accepted(self) -> bool:
        return self.verdict == ACCEPTED

    @property
    def infra_failure(self) -> bool:
        return self.verdict == ERROR_INFRA

    @property
    def summary(self) -> str:
        """One line for a row or a JSON report: `accepted`, or the verdict and its reasons."""
        return self.verdict if self.accepted else f"{self.verdict}: {'; '.join(self.reasons)}"


def replay_settings(verify: Mapping[str, Any] | None, lean_cfg: Mapping[str, Any]) -> ReplaySettings:
    """The replay a job runs (`verify` is its `verify:` section; None: no replay). The tools the mode needs are
    looked up now, so a missing one is one `LeanSetupError` when the job starts, never a failure per row."""
    if verify is None:
        return ReplaySettings(mode=OFF, timeout_s=0.0, slots_per_worker=0)
    mode = str(verify["replay"])
    if mode not in MODES:
        raise LeanSetupError(f"verify.replay={mode!r}: expected one of {list(MODES)}")
    timeout = verify.get("timeout_s")
    timeout_s = float(timeout) if timeout is not None else float(lean_cfg["import_timeout_s"]) + float(
        lean_cfg["timeout_s"])
    settings = ReplaySettings(mode=mode, timeout_s=timeout_s, slots_per_worker=int(verify["slots_per_worker"]))
    if mode == OFF or lean_cfg["backend"] == "sim":
        return replace(settings, sim_reject=dict(verify["sim_reject"]) if verify.get("sim_reject") else None)
    project_dir, _, _ = real_lean_paths(lean_cfg)
    tools = lean_cfg["replay"]
    wanted = {"lean": "the compiler the replay runs"}
    if mode == FRESH:
        wanted["lean4checker"] = "verify.replay=fresh needs lean4checker (`lake build lean4checker`)"
    else:
        wanted.update(comparator="verify.replay=comparator needs leanprover/comparator built",
                      landrun="verify.replay=comparator needs landrun", lean4export="verify.replay=comparator needs "
                      "lean4export built for this toolchain")
    resolved = {name: lean_tool(project_dir, str(tools[name]), what) for name, what in wanted.items()
                if name != "lean"}
    resolved["lean"] = str(tools["lean"])  # resolved on the PATH `lake env` gives, inside the replay
    return replace(settings, tools=resolved, checker_args=tuple(str(arg) for arg in tools["lean4checker_args"]))


def replay_names(snippet: str, statement: str | None, names: Sequence[str] | None) -> list[str]:
    """The declarations a replay must find axiom-clean: those given, else the statement's target, else every
    theorem the file declares (the warm check's own choice)."""
    if names is not None:
        return list(names)
    if statement is not None:
        target = verdict.target_name(statement)
        return [target] if target else []
    return verdict.declared_names(snippet)


def judge_answer(answer: dict[str, Any], axioms: dict[str, dict[str, Any]],
                 names: Sequence[str]) -> tuple[str, list[str]]:
    """The replay's verdict on a Lean answer, by the warm check's own rules (no error, no sorry, axioms allowed)."""
    judged = verdict.proof_verdict(answer, axioms, list(names))
    return (ACCEPTED, []) if judged.ok else (REJECTED, list(judged.reasons))


def with_axiom_queries(snippet: str, names: Sequence[str]) -> tuple[str, dict[str, int]]:
    """The file a fresh compile runs: the snippet, then one `#print axioms` per name, and the line of each query
    (its answer is the info message on that line)."""
    text = snippet if snippet.endswith("\n") else snippet + "\n"
    first = text.count("\n") + 2
    lines = {name: first + index for index, name in enumerate(names)}
    return text + "\n" + "".join(f"#print axioms {name}\n" for name in names), lines


def lean_json_messages(stdout: str) -> list[dict[str, Any]]:
    """The messages `lean --json` printed (one JSON object a line), in the REPL's shape; other lines are skipped."""
    messages = []
    for line in stdout.splitlines():
        try:
            message = json.loads(line)
        except ValueError:
            continue
        if isinstance(message, dict) and "severity" in message:
            severity = str(message["severity"])
            messages.append({**message, "severity": _SEVERITY.get(severity, severity)})
    return messages


def infra_reason(outcome: CommandOutcome, step: str) -> str | None:
    """Why a tool's run says nothing about the proof (timeout, killed by a signal, not started), or None."""
    if outcome.returncode is None:
        return f"{step}: {outcome.stderr}"
    if outcome.returncode < 0:
        return f"{step}: killed by signal {-outcome.returncode}{_excerpt(outcome.stderr)}"
    if outcome.returncode == EXEC_FAILED_CODE:
        return f"{step}: could not be started{_excerpt(outcome.stderr)}"
    return None


def judge_compile(outcome: CommandOutcome, names: Sequence[str],
                  query_lines: Mapping[str, int]) -> tuple[str, list[str]]:
    """The fresh compile's verdict: its messages judged like a REPL answer, each target's axioms read from the info
    message on its query's line. Lean exiting non-zero without an error message to show for it is infra."""
    infra = infra_reason(outcome, "lean")
    if infra is not None:
        return ERROR_INFRA, [infra]
    messages = lean_json_messages(outcome.stdout)
    axioms = {name: {"messages": [m for m in messages if (m.get("pos") or {}).get("line") == line]}
              for name, line in query_lines.items()}
    body = [m for m in messages if (m.get("pos") or {}).get("line") not in query_lines.values()]
    verdict_word, reasons = judge_answer({"messages": body}, axioms, names)
    if verdict_word == ACCEPTED and outcome.returncode != 0:
        return ERROR_INFRA, [f"lean exited with code {outcome.returncode} without an error{_excerpt(outcome.stderr)}"]
    return verdict_word, reasons


def judge_checker(outcome: CommandOutcome) -> tuple[str, list[str]]:
    """lean4checker's verdict: exit 0 is acceptance; an exception it raises (a kernel error) is a rejection; a
    missing .olean, a timeout or a signal is infra."""
    infra = infra_reason(outcome, "lean4checker")
    if infra is None and _MISSING_OLEAN.search(outcome.stderr + outcome.stdout):
        infra = f"lean4checker did not find the compiled file{_excerpt(outcome.stderr)}"
    if infra is not None:
        return ERROR_INFRA, [infra]
    if outcome.returncode == 0:
        return ACCEPTED, []
    return REJECTED, [f"lean4checker (exit {outcome.returncode}){_excerpt(outcome.stderr or outcome.stdout)}"]


def judge_comparator(outcome: CommandOutcome, report: dict[str, Any] | None) -> tuple[str, list[str]]:
    """comparator's verdict from its JSON report: a failed target or a kernel refusal is a rejection, every target
    clean with the kernel accepting is acceptance; no report (it stopped before comparing) is infra."""
    infra = infra_reason(outcome, "comparator")
    if infra is not None:
        return ERROR_INFRA, [infra]
    if report is None:
        return ERROR_INFRA, [f"comparator wrote no report (exit {outcome.returncode})"
                             f"{_excerpt(outcome.stderr or outcome.stdout)}"]
    failed = [f"{entry.get('target')}: {entry.get('failureCategory')}: {entry.get('failureMessage')}"
              for entry in report.get("reports", []) if entry.get("failureCategory")]
    if report.get("kernelAccepted") is False:
        failed.append(f"kernel: {report.get('kernelFailureMessage')}")
    if failed:
        return REJECTED, failed
    if outcome.returncode == 0 and report.get("kernelAccepted"):
        return ACCEPTED, []
    return ERROR_INFRA, [f"comparator ended with exit {outcome.returncode} before the kernel replay"
                         f"{_excerpt(outcome.stderr or outcome.stdout)}"]


def comparator_files(snippet: str, statement: str | None, names: Sequence[str], project_dir: Path,
                     toolchain: str) -> dict[str, str]:
    """A scratch Lake project for comparator: the statement as `Challenge` (the file itself without one), the file
    as `Solution`, the config, and a lakefile that reuses the project's packages instead of fetching any."""
    packages = project_dir / ".lake" / "packages"
    lakefile = (f'name = "folklore_replay"\npackagesDir = {json.dumps(str(packages))}\n\n'
                f'[[require]]\nname = "mathlib"\npath = {json.dumps(str(packages / "mathlib"))}\n\n'
                f'[[lean_lib]]\nname = "{CHALLENGE}"\n\n[[lean_lib]]\nname = "{SOLUTION}"\n')
    config = {"challenge_module": CHALLENGE, "solution_module": SOLUTION, "theorem_names": list(names),
              "permitted_axioms": sorted(verdict.ALLOWED_AXIOMS), "enable_nanoda": False,
              "json_output_path": COMPARATOR_REPORT}
    return {"lakefile.toml": lakefile, "lean-toolchain": toolchain + "\n", f"{CHALLENGE}.lean": statement or snippet,
            f"{SOLUTION}.lean": snippet, "config.json": json.dumps(config, indent=2)}


def _excerpt(text: str) -> str:
    text = " ".join(text.split())
    return f": {text[-OUTPUT_EXCERPT_CHARS:]}" if text else ""


# --- the processes ------------------------------------------------------------------------------------------


class Replayer:
    """Runs replays for one pool worker: a fresh process per replay, never one of the worker's warm REPLs."""

    def __init__(self, settings: ReplaySettings, lean_cfg: Mapping[str, Any]) -> None:
        self.settings = settings
        self._simulated = lean_cfg["backend"] == "sim"
        if self._simulated:
            sim = dict(lean_cfg["sim"])
            if sim["busy_log"] is not None:
                sim["busy_log"] = replay_busy_log(sim["busy_log"])
            if settings.sim_reject:
                sim["error_rules"] = [*(sim.get("error_rules") or []), settings.sim_reject]
            self._launch = build_launch({**lean_cfg, "sim": sim})
        else:
            self._launch = build_launch(lean_cfg)
            self._project_dir, _, self._lake = real_lean_paths(lean_cfg)
            self._toolchain = (self._project_dir / "lean-toolchain").read_text().strip()

    async def replay(self, snippet: str, statement: str | None = None,
                     names: Sequence[str] | None = None) -> ReplayResult:
        """Replay `snippet` (the file the warm REPL accepted) in a process started for it alone."""
        started = time.perf_counter()
        targets = replay_names(snippet, statement, names)
        if self._simulated:
            result = await self._on_simulator(snippet, targets)
        elif self.settings.mode == FRESH:
            result = await self._fresh(snippet, targets)
        else:
            result = await self._comparator(snippet, statement, targets)
        result.seconds = time.perf_counter() - started
        result.mode = self.settings.mode
        return result

    async def _on_simulator(self, snippet: str, names: list[str]) -> ReplayResult:
        """One file on a new simulator process: the whole file as one command, then each target's axioms."""
        process = ReplProcess(self._launch)
        timeout = self.settings.timeout_s
        try:
            try:
                await process.start()
            except OSError as error:
                return ReplayResult(ERROR_INFRA, [f"the replay's process could not start: {error}"])
            pid = process.pid
            reply = await process.request({"cmd": snippet}, timeout)
            if reply.kind != "ok" or reply.answer is None:
                return ReplayResult(ERROR_INFRA, [f"{reply.kind}: {reply.detail}"], pid=pid)
            axioms: dict[str, dict[str, Any]] = {}
            for name in names:
                query = await process.request({"cmd": f"#print axioms {name}", "env": reply.answer.get("env")}, timeout)
                if query.kind != "ok" or query.answer is None:
                    return ReplayResult(ERROR_INFRA, [f"#print axioms {name}: {query.kind}: {query.detail}"], pid=pid)
                axioms[name] = query.answer
        finally:
            await process.close()
        word, reasons = judge_answer(reply.answer, axioms, names)
        return ReplayResult(word, reasons, messages=list(reply.answer.get("messages", [])), pid=pid)

    async def _fresh(self, snippet: str, names: list[str]) -> ReplayResult:
        """Compile the file to an .olean in a private directory, then have lean4checker replay its declarations."""
        text, query_lines = with_axiom_queries(snippet, names)
        with _workdir({f"{MODULE}.lean": text}) as workdir:
            lake = [self._lake, "--dir", str(self._project_dir), "env"]
            compiled = await run_command(
                self._launch, [*lake, self.settings.tools["lean"], "--json", "--root=.", "-o", f"{MODULE}.olean",
                               f"{MODULE}.lean"], workdir, self.settings.timeout_s)
            word, reasons = judge_compile(compiled, names, query_lines)
            messages = lean_json_messages(compiled.stdout)
            if word != ACCEPTED:
                return ReplayResult(word, reasons, messages=messages)
            checked = await run_command(
                self._launch, [*lake, self.settings.tools["lean4checker"], *self.settings.checker_args, MODULE],
                workdir, self.settings.timeout_s, extra_env={"LEAN_PATH": workdir})
        word, reasons = judge_checker(checked)
        return ReplayResult(word, reasons, messages=messages)

    async def _comparator(self, snippet: str, statement: str | None, names: list[str]) -> ReplayResult:
        """Run comparator on a scratch project holding the statement and the file."""
        files = comparator_files(snippet, statement, names, self._project_dir, self._toolchain)
        with _workdir(files) as workdir:
            tools = self.settings.tools
            outcome = await run_command(
                self._launch, [self._lake, "--dir", workdir, "env", tools["comparator"], "config.json"], workdir,
                self.settings.timeout_s,
                extra_env={"COMPARATOR_LANDRUN": tools["landrun"], "COMPARATOR_LEAN4EXPORT": tools["lean4export"]})
            report_path = Path(workdir) / COMPARATOR_REPORT
            report = json.loads(report_path.read_text()) if report_path.is_file() else None
        word, reasons = judge_comparator(outcome, report)
        return ReplayResult(word, reasons)


@contextmanager
def _workdir(files: Mapping[str, str]) -> Iterator[str]:
    """A private directory holding `files`, removed afterwards whatever happened."""
    path = tempfile.mkdtemp(prefix=WORKDIR_PREFIX)
    try:
        for name, text in files.items():
            (Path(path) / name).write_text(text, encoding="utf-8")
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)
