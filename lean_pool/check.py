"""Command line: check Lean files through the pool and print one JSON line per file.

`python -m lean_pool.check FILE_OR_DIR... [lean=sim|repl|kimina] [statement=PATH] [replay=true] [key=value ...]`.
Arguments with `=` are Hydra overrides of `conf/check.yaml`, unless they name an existing file or directory or come
after `--`; the rest are files or directories (searched for `*.lean`). With `statement=`, each proof must prove that
statement unchanged (a changed statement, a missing target or a context that changes its meaning is an `error`). With
`replay=true`, a file the warm REPL verified is replayed in a fresh Lean process (`verify.replay`) and is only
`verified` when both accept it.

stdout holds only the JSON lines, in the order the paths were given (a directory's files sorted), each with the same
keys, so it pipes into `jq`; the closing counts, errors and notes go to stderr, and Ray's own notices to a log file.
"""

from __future__ import annotations

from lean_pool.command_line import hold_stops

if __name__ == "__main__":
    hold_stops()  # the imports below take seconds: a Ctrl-C or SIGTERM meanwhile stops the job in one line

import asyncio
import json
import os
import stat
import sys
import tempfile
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from conf import compose_config
from lean_pool.command_line import SetupError, WorkWritten, lean_checks_line, run_command
from lean_pool.kimina import KiminaPool
from lean_pool.launch import LeanSetupError
from lean_pool.pool import LeanPool, checker_provenance, plain_config
from lean_pool.ray_start import init_ray_logging_to, ray_init_options
from lean_pool.replay import OFF, ReplayResult
from lean_pool.session_check import CheckResult
from lean_pool.verdict import precheck

PASSED = "passed"
# The field that must be true of every file for exit status 0, per mode.
GOAL = {"statement": "compiles", "proof": "verified"}
# The `replay` field of a file the warm check did not verify: there is nothing to replay.
NOT_REPLAYED = "skipped: the warm check did not verify it"
# Exit status when some file fell short of the mode's goal (0: none did; 2 and 130 come from `run_command`, which also
# ends a Ctrl-C after the last file's line with 0, the verdicts' status then standing).
SOME_FELL_SHORT = 1
USAGE = "folklore check FILE_OR_DIR... [lean=sim|repl|kimina] [key=value ...] [-- PATH...]"
# After it every argument is a path, `=` or not.
END_OF_OVERRIDES = "--"
# Where the driver's Ray log lines go: a check has no run directory, and stdout must stay JSON lines. Appended to,
# so two checks at once both keep theirs.
RAY_LOG = Path(tempfile.gettempdir()) / "folklore" / "logs" / "check-ray.log"
# What a Ctrl-C before the last line leaves: a check writes nothing but its lines.
INTERRUPTED_NOTE = "the lines printed are final; run the same command again to check every file"
# What a path that is not a regular file is, by `stat`'s test of its mode (after following symlinks).
FILE_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
              (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


class UnreadableFile(Exception):
    """A file the check cannot read as Lean text: not a regular file, above `max_file_bytes`, unreadable or not
    UTF-8; its message says which, for the file's line."""


def split_arguments(argv: Sequence[str]) -> tuple[list[str], list[str]]:
    """Separate paths from Hydra overrides (`key=value`, `+key=value`, `~key`; a flag too, which the config refuses
    in one line): every argument after `--` is a path, and before it so is one naming an existing file or directory
    (`x=1.lean`), whatever it looks like."""
    paths: list[str] = []
    overrides: list[str] = []
    for position, arg in enumerate(argv):
        if arg == END_OF_OVERRIDES:
            return [*paths, *argv[position + 1 :]], overrides
        looks_like_override = "=" in arg or arg.startswith(("~", "-"))
        (overrides if looks_like_override and not os.path.lexists(arg) else paths).append(arg)
    return paths, overrides


def lean_files(paths: Sequence[str]) -> list[Path]:
    """The files to check in the order given: each named file, and each named directory's `.lean` files sorted
    (a file named twice is checked once). No path, a missing one or a directory without a `.lean` file is a
    `SetupError` naming every such path, raised before Ray starts."""
    if not paths:
        raise SetupError(f"no file or directory to check (usage: {USAGE})")
    files: list[Path] = []
    problems = []
    for name in paths:
        path = Path(name)
        if path.is_dir():
            found = sorted(path.rglob("*.lean"))
            files.extend(found)
            if not found:
                problems.append(f"{name}: no .lean file in this directory")
        elif path.exists():
            files.append(path)
        else:
            problems.append(f"{name}: no such file or directory")
    if problems:
        raise SetupError("; ".join(problems))
    return list(dict.fromkeys(files))


def not_checkable(path: Path, max_bytes: int) -> str | None:
    """Why `path` cannot be read as a Lean file, found by `os.stat` alone (nothing is opened, so a FIFO cannot block
    and a device is never read): not a regular file, or above `max_bytes`; None when it may be read."""
    try:
        info = os.stat(path)
    except OSError as error:
        return f"unreadable file: {error}"
    if not stat.S_ISREG(info.st_mode):
        kind = next((name for is_kind, name in FILE_KINDS if is_kind(info.st_mode)), "another kind of file")
        return f"not a regular file: {kind} (after following symlinks)"
    if info.st_size > max_bytes:
        return f"file too large: {info.st_size} bytes, above max_file_bytes={max_bytes}"
    return None


def read_lean_file(path: Path, max_bytes: int) -> str:
    """The text of `path`, read only when it is a regular file of at most `max_bytes` (checked before it is opened,
    and again on the open file, which is never read past `max_bytes` + 1 bytes); else an `UnreadableFile`."""
    problem = not_checkable(path, max_bytes)
    if problem:
        raise UnreadableFile(problem)
    try:
        # Non-blocking: a path swapped for a FIFO since the `stat` opens at once, and is refused below.
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        with open(descriptor, "rb") as file:
            if not stat.S_ISREG(os.fstat(descriptor).st_mode):
                raise UnreadableFile("not a regular file (changed while being opened)")
            data = file.read(max_bytes + 1)
    except OSError as error:
        raise UnreadableFile(f"unreadable file: {error}") from error
    if len(data) > max_bytes:
        raise UnreadableFile(f"file too large: above max_file_bytes={max_bytes} bytes")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise UnreadableFile(f"unreadable file: {error}") from error


def load_config(overrides: Sequence[str]) -> DictConfig:
    """`conf/check.yaml` with the command line's overrides, checked for combinations that cannot run (a
    `ConfigError` or `SetupError`, one line)."""
    cfg = compose_config("check", overrides)
    if cfg.replay and (cfg.mode != "proof" or cfg.verify.replay == OFF):
        raise SetupError(f"replay=true replays verified proofs: it needs mode=proof and verify.replay other than {OFF}")
    if cfg.statement is not None and (cfg.mode != "proof" or not Path(cfg.statement).exists()):
        raise SetupError(f"statement={cfg.statement} needs mode=proof and an existing .lean file or directory")
    return cfg


def statement_for(path: Path, statement: str | None) -> Path | None:
    """The statement file `path` must prove: `statement` itself when it is a file, the file of the same name in it
    when it is a directory, None when no statement was given."""
    if statement is None:
        return None
    given = Path(statement)
    return given / path.name if given.is_dir() else given


def compiles(result: CheckResult, text_decided: bool) -> bool | None:
    """Whether Lean reported no error for the file; None when Lean gave no answer to read: the text alone
    decided (a refusal, or a proof's written `sorry`), or the checker failed (timeout, crash)."""
    if text_decided or result.infra_failure:
        return None
    return not any(message.get("severity") == "error" for message in result.messages)


def result_line(path: Path, result: CheckResult, mode: str, text_decided: bool,
                replay: ReplayResult | str | None = None) -> dict[str, Any]:
    """The JSON object printed for one file: each field says one thing, whatever the mode (`status` the verdict
    word, `compiles` Lean's errors, `verified` a proof the kernel accepted sorry-free and axiom-clean, and replayed
    when `replay` is on; `replay` the fresh process's verdict, null when the replay is off)."""
    replayed = replay.summary if isinstance(replay, ReplayResult) else replay
    return {
        "path": str(path),
        "status": result.status,
        "compiles": compiles(result, text_decided),
        "verified": mode == "proof" and result.status == PASSED and (replay is None or replayed == "accepted"),
        "replay": replayed,
        "reasons": result.reasons,
        "messages": result.messages,
        "seconds": round(result.seconds, 3),
        "axioms": result.axioms,
        "provenance": result.provenance,
    }


def unreadable_line(path: Path, reason: str, replay_on: bool) -> dict[str, Any]:
    """The line of a file that could not be read as Lean text (`reason` says why): `result_line`'s keys, null where
    no check ran."""
    return {"path": str(path), "status": "error", "compiles": None, "verified": False,
            "replay": NOT_REPLAYED if replay_on else None, "reasons": [reason],
            "messages": [], "seconds": 0.0, "axioms": None, "provenance": None}


@dataclass
class Tally:
    """What the closing line counts: files per verdict, the Lean runs they took, and those short of the goal."""

    statuses: Counter[str] = field(default_factory=Counter)
    checks: int = 0  # warm checks Lean ran (the text alone decided the others)
    replays: int = 0
    short: int = 0

    def closing_line(self, replay_on: bool, simulated: bool, ray_log: Path | None) -> str:
        """One line for stderr after the last JSON line, its cost in the words of every job's closing block (no Ray
        log when no file could be read, so Ray never started)."""
        counts = " ".join(f"{status}={count}" for status, count in sorted(self.statuses.items()))
        cost = lean_checks_line(self.checks + self.replays, self.replays if replay_on else None)
        sim = "; SIMULATED Lean (lean=sim): no verdict here says anything about mathematics" if simulated else ""
        log = f"; ray log: {ray_log}" if ray_log else ""
        return f"files: {sum(self.statuses.values())} ({counts}); {cost}{sim}{log}"


async def check_files(pool: LeanPool | KiminaPool | None, files: Sequence[Path], problems: Mapping[Path, str],
                      cfg: DictConfig, tally: Tally) -> None:
    """Check every file concurrently and print each line in the order of `files`, as soon as it and the lines
    before it are known, counting what was printed into `tally`. A file in `problems` is its line without being
    opened (`pool` is None when every file is)."""
    goal = GOAL[cfg.mode]
    max_bytes = int(cfg.max_file_bytes)

    async def one(path: Path) -> dict[str, Any]:
        if path in problems or pool is None:
            return unreadable_line(path, problems[path], cfg.replay)
        statement_path = statement_for(path, cfg.statement)
        try:
            snippet = read_lean_file(path, max_bytes)
            statement = read_lean_file(statement_path, max_bytes) if statement_path else None
        except UnreadableFile as error:
            return unreadable_line(path, str(error), cfg.replay)
        text_decided = precheck(snippet, cfg.mode, statement) is not None
        tally.checks += not text_decided
        result = await pool.check(snippet, timeout=cfg.timeout_s, mode=cfg.mode, statement=statement)
        if not cfg.replay:
            return result_line(path, result, cfg.mode, text_decided)
        if result.status != PASSED:
            return result_line(path, result, cfg.mode, text_decided, NOT_REPLAYED)
        tally.replays += 1
        replay = await pool.replay(snippet, statement=statement)
        return result_line(path, result, cfg.mode, text_decided, replay)

    for task in [asyncio.ensure_future(one(path)) for path in files]:
        line = await task
        tally.statuses[line["status"]] += 1
        tally.short += line[goal] is not True
        print(json.dumps(line, ensure_ascii=False), flush=True)


def check(argv: Sequence[str], tally: Tally, work: WorkWritten) -> None:
    """Check the files `argv` names, counting into `tally`; `work` is marked once every file's line is printed."""
    paths, overrides = split_arguments(argv)
    cfg = load_config(overrides)
    files = lean_files(paths)
    found = {path: not_checkable(path, int(cfg.max_file_bytes)) for path in files}
    problems = {path: problem for path, problem in found.items() if problem}
    pool = start_pool(cfg) if len(problems) < len(files) else None
    try:
        asyncio.run(check_files(pool, files, problems, cfg, tally))
        work.mark()
        simulated = checker_provenance(plain_config(cfg.lean))["simulated"]
        print(tally.closing_line(cfg.replay, simulated, None if pool is None else RAY_LOG), file=sys.stderr, flush=True)
    finally:
        if pool is not None:
            pool.shutdown()


def start_pool(cfg: DictConfig) -> LeanPool | KiminaPool:
    """Ray, its notices into `RAY_LOG`, and the Lean pool `cfg` asks for: only once some file can be read."""
    options, note = ray_init_options(cfg.ray)
    if note:
        print(note, file=sys.stderr, flush=True)
    init_ray_logging_to(RAY_LOG, include_dashboard=False, log_to_driver=False, **options)
    return LeanPool.start(cfg.lean, verify=cfg.verify if cfg.replay else None)


def main(argv: Sequence[str] | None = None) -> int:
    """Exit status 0 when every file reached the mode's goal (statement: compiles; proof: verified), 1 when some
    did not, 2 when nothing could be checked (one `error:` line, before Ray starts when the paths or the config
    are wrong), 130 on a Ctrl-C before every file's line was printed (after it, the verdicts' status)."""
    tally, work = Tally(), WorkWritten()
    status = run_command(lambda: check(sys.argv[1:] if argv is None else argv, tally, work), (LeanSetupError,), work,
                         interrupted=INTERRUPTED_NOTE)
    return status or (SOME_FELL_SHORT if tally.short else 0)


if __name__ == "__main__":
    sys.exit(main())
