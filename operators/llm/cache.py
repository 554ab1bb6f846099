"""LLM answers a run already paid for, kept in SQLite under the run directory so a resumed run replays them.

A killed run loses the rows that were in flight (a formalize loop five rounds deep, a judge halfway through its
samples); started again, those rows are asked again from the start. With this cache (DESIGN §6, after datatrove's
per-worker inference cache) every successful answer is stored under (candidate id, stage, attempt, sha256 of the
payload: messages, model, sampling), and the resumed run's loop gets the same answers back without a request until
it reaches the point where the killed run stopped. Each actor process writes its own file (`RUN_DIR/llm_cache/
<host>-<pid>-<random>.sqlite`, WAL mode, so processes never contend for a write lock) and reads every file that was
there when it started. Failures are never stored: a resumed run asks again for them.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import socket
import sqlite3
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

CACHE_DIR = "llm_cache"
SUFFIX = ".sqlite"

_SCHEMA = """CREATE TABLE IF NOT EXISTS answers (
    candidate_id TEXT NOT NULL,
    stage TEXT NOT NULL,
    attempt INTEGER NOT NULL,
    payload_sha256 TEXT NOT NULL,
    answer TEXT NOT NULL,
    PRIMARY KEY (candidate_id, stage, attempt, payload_sha256)
)"""


@dataclass(frozen=True)
class CacheKey:
    """What identifies a call across runs: the row and the step it belongs to, and the exact payload sent."""

    candidate_id: str
    stage: str
    attempt: int
    payload_sha256: str

    @classmethod
    def of(cls, candidate_id: str, stage: str, attempt: int, payload: Mapping[str, Any]) -> "CacheKey":
        """The key of a call whose payload (messages, model, sampling) is `payload`, hashed in a canonical form."""
        canonical = json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
        return cls(candidate_id, stage, attempt, hashlib.sha256(canonical.encode()).hexdigest())


def cache_dir(run_uri: str, enabled: bool) -> str | None:
    """`RUN_DIR/llm_cache` for a local run directory; None when the cache is off, or (with a warning) when the run
    directory is a URI: SQLite needs a local (or shared POSIX) filesystem."""
    if not enabled:
        return None
    if "://" in run_uri:
        logger.warning("llm cache is off: run_dir %s is not a local path, so a resumed run asks again for the "
                       "answers of rows that were in flight", run_uri)
        return None
    return str(Path(run_uri) / CACHE_DIR)


def stored_answers(directory: str) -> int:
    """How many answers the cache files under `directory` hold (0 when there are none), read-only."""
    total = 0
    for path in sorted(Path(directory).glob(f"*{SUFFIX}")):
        connection = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            total += connection.execute("SELECT COUNT(*) FROM answers").fetchone()[0]
        except sqlite3.OperationalError:  # a file whose writer died before creating the table
            pass
        finally:
            connection.close()
    return total


class RequestCache:
    """One process's view of a run's cache: its own file to write, and every file present at start to read."""

    def __init__(self, directory: str) -> None:
        folder = Path(directory)
        folder.mkdir(parents=True, exist_ok=True)
        others = sorted(folder.glob(f"*{SUFFIX}"))
        self.path = folder / f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}{SUFFIX}"
        # Autocommit (each put is its own transaction); used from the actor's event loop, which may not be the
        # thread that built the operator.
        self._own = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        self._own.execute("PRAGMA journal_mode=WAL")
        self._own.execute("PRAGMA synchronous=NORMAL")  # durable when the process is killed, fast per answer
        self._own.execute(_SCHEMA)
        self._readers = [self._own] + [
            sqlite3.connect(f"file:{other}?mode=ro", uri=True, check_same_thread=False) for other in others
        ]

    def get(self, key: CacheKey) -> dict[str, Any] | None:
        """The answer stored under `key` in any file this process reads, or None."""
        for connection in self._readers:
            try:
                found = connection.execute(
                    "SELECT answer FROM answers WHERE candidate_id = ? AND stage = ? AND attempt = ? "
                    "AND payload_sha256 = ?", (key.candidate_id, key.stage, key.attempt, key.payload_sha256),
                ).fetchone()
            except sqlite3.OperationalError:  # a file whose writer died before creating the table
                continue
            if found is not None:
                return json.loads(found[0])
        return None

    def put(self, key: CacheKey, answer: Mapping[str, Any]) -> None:
        """Store a successful answer (JSON-serialisable fields) under `key`."""
        self._own.execute(
            "INSERT OR REPLACE INTO answers VALUES (?, ?, ?, ?, ?)",
            (key.candidate_id, key.stage, key.attempt, key.payload_sha256, json.dumps(answer, ensure_ascii=False)),
        )

    def close(self) -> None:
        """Close every connection."""
        for connection in self._readers:
            connection.close()
        self._readers = []
