"""Command line: check Lean files through the pool and print one JSON line per file.

`python -m lean_pool.check FILE_OR_DIR... [lean=sim|repl] [statement=PATH] [replay=true] [key=value ...]`.
Arguments with `=` are Hydra overrides of `conf/check.yaml`; the rest are files or directories (searched for
`*.lean`). With `statement=`, each proof must prove that statement unchanged (a changed statement, a missing target
or a context that changes its meaning is an `error`). With `replay=true`, a file the warm REPL verified is replayed in a fresh Lean process (`verify.replay`) and is only
`verified` when both accept it.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import ray
from omegaconf import DictConfig

from conf import ConfigError, compose_config, ray_init_options
from lean_pool.launch import LeanSetupError
from lean_pool.pool import LeanPool
from lean_pool.replay import OFF, ReplayResult
from lean_pool.session_check import CheckResult
from lean_pool.verdict import precheck

PASSED = "passed"
# The field that must be true of every file for exit status 0, per mode.
GOAL = {"statement": "compiles", "proof": "verified"}
# The `replay` field of a file the warm check did not verify: there is nothing to replay.
NOT_REPLAYED = "skipped: the warm check did not verify it"


def split_arguments(argv: Sequence[str]) -> tuple[list[str], list[str]]:
    """Separate Hydra overrides (`key=value`, `+key=value`, `~key`) from paths."""
    overrides = [arg for arg in argv if "=" in arg or arg.startswith("~")]
    paths = [arg for arg in argv if arg not in overrides]
    return paths, overrides


def lean_files(paths: Sequence[str]) -> Iterator[Path]:
    """Each named file, and every `.lean` file under each named directory, in a stable order."""
    for name in paths:
        path = Path(name)
        if path.is_dir():
            yield from sorted(path.rglob("*.lean"))
        else:
            yield path


def load_config(overrides: Sequence[str]) -> DictConfig:
    """`conf/check.yaml` with the command line's overrides; a `ConfigError` (one line) when they do not compose."""
    return compose_config("check", overrides)


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


def result_line(path: Path, snippet: str, result: CheckResult, mode: str, replay: ReplayResult | str | None = None,
                statement: str | None = None) -> dict[str, Any]:
    """The JSON object printed for one file: each field says one thing, whatever the mode (`status` the verdict
    word, `compiles` Lean's errors, `verified` a proof the kernel accepted sorry-free and axiom-clean, and replayed
    when `replay` is on; `replay` the fresh process's verdict, null when the replay is off)."""
    replayed = replay.summary if isinstance(replay, ReplayResult) else replay
    return {
        "path": str(path),
        "status": result.status,
        "compiles": compiles(result, precheck(snippet, mode, statement) is not None),
        "verified": mode == "proof" and result.status == PASSED and (replay is None or replayed == "accepted"),
        "replay": replayed,
        "reasons": result.reasons,
        "messages": result.messages,
        "seconds": round(result.seconds, 3),
        "axioms": result.axioms,
        "provenance": result.provenance,
    }


async def check_files(pool: LeanPool, files: Sequence[Path], cfg: DictConfig) -> int:
    """Check every file concurrently, print each line as its verdict arrives; return how many fell short of the
    mode's goal (statement: it compiles; proof: it is verified)."""
    goal = GOAL[cfg.mode]

    async def one(path: Path) -> dict[str, Any]:
        statement_path = statement_for(path, cfg.statement)
        try:
            snippet = path.read_text(encoding="utf-8")
            statement = statement_path.read_text(encoding="utf-8") if statement_path else None
        except (OSError, UnicodeDecodeError) as error:
            return {"path": str(path), "status": "error", "compiles": None, "verified": False,
                    "replay": NOT_REPLAYED if cfg.replay else None, "reasons": [f"unreadable file: {error}"],
                    "messages": [], "seconds": 0.0}
        result = await pool.check(snippet, timeout=cfg.timeout_s, mode=cfg.mode, statement=statement)
        if not cfg.replay:
            return result_line(path, snippet, result, cfg.mode, statement=statement)
        replay = await pool.replay(snippet, statement=statement) if result.status == PASSED else NOT_REPLAYED
        return result_line(path, snippet, result, cfg.mode, replay, statement)

    failed = 0
    for finished in asyncio.as_completed([one(path) for path in files]):
        line = await finished
        failed += line[goal] is not True
        print(json.dumps(line, ensure_ascii=False), flush=True)
    return failed


def main(argv: Sequence[str] | None = None) -> int:
    """Exit status 0 when every file reached the mode's goal (statement: compiles; proof: verified), 1 when some
    did not, 2 when nothing could be checked."""
    paths, overrides = split_arguments(sys.argv[1:] if argv is None else argv)
    if not paths:
        print("usage: python -m lean_pool.check FILE_OR_DIR... [lean=sim|repl] [overrides]", file=sys.stderr)
        return 2
    try:
        cfg = load_config(overrides)
    except ConfigError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    if cfg.mode not in GOAL:
        print(f"error: mode={cfg.mode} is not one of {sorted(GOAL)}", file=sys.stderr)
        return 2
    if cfg.replay and (cfg.mode != "proof" or cfg.verify.replay == OFF):
        print(f"error: replay=true replays verified proofs: it needs mode=proof and verify.replay other than {OFF}",
              file=sys.stderr)
        return 2
    if cfg.statement is not None and (cfg.mode != "proof" or not Path(cfg.statement).exists()):
        print(f"error: statement={cfg.statement} needs mode=proof and an existing .lean file or directory",
              file=sys.stderr)
        return 2
    files = list(lean_files(paths))
    # stdout is one JSON line per file: Ray's notices stay out of the way, its errors still reach stderr.
    logging.getLogger("ray").setLevel(logging.ERROR)
    options, note = ray_init_options(cfg.ray)
    if note:
        print(note, file=sys.stderr)
    ray.init(include_dashboard=False, log_to_driver=False, configure_logging=False, **options)
    try:
        pool = LeanPool.start(cfg.lean, verify=cfg.verify if cfg.replay else None)
    except LeanSetupError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    try:
        failed = asyncio.run(check_files(pool, files, cfg))
    finally:
        pool.shutdown()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
