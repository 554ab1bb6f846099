"""LLM answers a run already paid for, kept under the run directory so a resumed run replays them.

A killed run loses the rows that were in flight (a formalize loop five rounds deep, a judge halfway through its
samples); started again, those rows are asked again from the start. With this cache (DESIGN §6, after datatrove's
per-worker inference cache) every successful answer is stored under (candidate id, call, attempt, sha256 of the
payload: messages, model, sampling), and the resumed run's loop gets the same answers back without a request until
it reaches the point where the killed run stopped. Failures are never stored: a resumed run asks again for them.

Where the run directory is decides the store (`open_cache`); both answer `get`/`put` as coroutines, so the LLM
operator awaits them the same way:

- a local run directory: each actor process writes its own SQLite file (`RUN_DIR/llm_cache/<host>-<pid>-<random>
  .sqlite`, WAL mode, so processes never contend for a write lock) and reads every file that was there when it
  started;
- a URI (`s3://...`, `file://...`): one object per answer under `RUN_DIR/llm_cache/`, written before the answer is
  handed back, so a resumed actor on any node finds it even when the node that received it is gone. A cluster's
  nodes share no disk, which is why a file per process cannot serve here.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import os
import socket
import sqlite3
import uuid
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import quote

import pyarrow.fs as pafs

from operators.llm.calls import LLMRequest
from operators.storage import StorageError, first_line, is_uri, join, resolve, without_options

logger = logging.getLogger(__name__)

CACHE_DIR = "llm_cache"
SUFFIX = ".sqlite"
ANSWER_SUFFIX = ".json"
# Threads an object-store cache reads and writes with: an actor keeps hundreds of requests in flight, each waiting
# tens of milliseconds on the store per answer, which the default executor (a few threads per core) would queue.
IO_THREADS = 32

# The `stage` column holds the call (`CacheKey.call`): its first name, kept so a cache written before still answers.
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
    """What identifies a call across runs: the row and the call it belongs to, and the exact payload sent."""

    candidate_id: str
    call: str
    attempt: int
    payload_sha256: str

    @classmethod
    def of(cls, candidate_id: str, call: str, attempt: int, payload: Mapping[str, Any]) -> CacheKey:
        """The key of a call whose payload (messages, model, sampling) is `payload`, hashed in a canonical form."""
        canonical = json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
        return cls(candidate_id, call, attempt, hashlib.sha256(canonical.encode()).hexdigest())


def cache_key(request: LLMRequest) -> CacheKey:
    """The request's key in the run's answer cache: its row, call and attempt, and what decides the answer (the
    messages, the model, the sampling) and who asked it (the role: two provers on one model draw their own)."""
    payload = {"messages": request.messages, "model": request.model, "sampling": asdict(request.sampling),
               "role": request.role}
    if request.tools:
        payload["tools"] = list(request.tools)
    return CacheKey.of(request.candidate_id, request.call, request.attempt, payload)


def answer_path(key: CacheKey) -> str:
    """Where the answer under `key` lives in an object-store cache: `<call>/<h[:2]>/<h>-<attempt>-<payload sha256>
    .json`, `h` the sha256 of the candidate id. Candidate ids are hashed, not quoted, because they may hold '/', '%',
    spaces or non-ASCII text and be long: a hash gives every key the same short, S3-safe shape. Its first two hex
    digits spread a run's answers over 256 prefixes (S3 scales its request rate per prefix; a `file://` directory
    stays small); the call, a short name, stays readable (quoted all the same)."""
    candidate = hashlib.sha256(key.candidate_id.encode()).hexdigest()
    name = f"{candidate}-{key.attempt}-{key.payload_sha256}{ANSWER_SUFFIX}"
    return "/".join((quote(key.call, safe=""), candidate[:2], name))


def cache_dir(run_uri: str, enabled: bool) -> str | None:
    """`RUN_DIR/llm_cache` (a local path or a URI, its query options kept), or None when the cache is off."""
    return join(run_uri, CACHE_DIR) if enabled else None


def stored_answers(location: str) -> int:
    """How many answers the cache at `location` holds (0 when there are none), read-only: for a URI, one recursive
    listing of its objects."""
    if is_uri(location):
        filesystem, root = resolve(location)
        listing = filesystem.get_file_info(pafs.FileSelector(root, recursive=True, allow_not_found=True))
        return sum(info.type == pafs.FileType.File and info.base_name.endswith(ANSWER_SUFFIX) for info in listing)
    total = 0
    for path in sorted(Path(location).glob(f"*{SUFFIX}")):
        connection = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            total += connection.execute("SELECT COUNT(*) FROM answers").fetchone()[0]
        except sqlite3.OperationalError:  # a file whose writer died before creating the table
            pass
        finally:
            connection.close()
    return total


class AnswerCache(Protocol):
    """What the LLM operator sees of either store."""

    async def get(self, key: CacheKey) -> dict[str, Any] | None:
        """The answer stored under `key`, or None."""

    async def put(self, key: CacheKey, answer: Mapping[str, Any]) -> None:
        """Store a successful answer (JSON-serialisable fields) under `key`."""

    def close(self) -> None:
        """Release what the cache holds open."""


def open_cache(location: str) -> AnswerCache:
    """The cache at `location`: SQLite files for a local directory, one object per answer for a URI."""
    return ObjectCache(location) if is_uri(location) else RequestCache(location)


class RequestCache:
    """One process's view of a local run's cache: its own SQLite file to write, and every file present at start to
    read. Its coroutines answer inline: a local SQLite read or write takes microseconds, less than a thread hand-off.
    A file it cannot create or write (a full disk, a quota, a read-only filesystem) costs one warning, and the process
    stops caching: the calls go on, and the run's writers say what the disk refuses them."""

    def __init__(self, directory: str) -> None:
        self.location = directory
        self._warned = False
        folder = Path(directory)
        others = sorted(folder.glob(f"*{SUFFIX}"))
        self.path = folder / f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}{SUFFIX}"
        self._own = self._open_own(folder)
        self._readers = [*([self._own] if self._own else []), *(
            sqlite3.connect(f"file:{other}?mode=ro", uri=True, check_same_thread=False) for other in others)]

    def _open_own(self, folder: Path) -> sqlite3.Connection | None:
        """This process's SQLite file, ready to write, or None (warned) when it cannot be created."""
        try:
            folder.mkdir(parents=True, exist_ok=True)
            # Autocommit (each put is its own transaction); used from the actor's event loop, which may not be the
            # thread that built the operator.
            own = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
            own.execute("PRAGMA journal_mode=WAL")
            own.execute("PRAGMA synchronous=NORMAL")  # durable when the process is killed, fast per answer
            own.execute(_SCHEMA)
        except (OSError, sqlite3.Error) as error:
            warn_once(self, "open", error)
            return None
        return own

    async def get(self, key: CacheKey) -> dict[str, Any] | None:
        """The answer stored under `key` in any file this process reads, or None."""
        for connection in self._readers:
            try:
                found = connection.execute(
                    "SELECT answer FROM answers WHERE candidate_id = ? AND stage = ? AND attempt = ? "
                    "AND payload_sha256 = ?", (key.candidate_id, key.call, key.attempt, key.payload_sha256),
                ).fetchone()
            except sqlite3.OperationalError:  # a file whose writer died before creating the table
                continue
            if found is not None:
                return json.loads(found[0])
        return None

    async def put(self, key: CacheKey, answer: Mapping[str, Any]) -> None:
        """Store a successful answer (JSON-serialisable fields) under `key`; after a write the file refused, nothing
        more is stored."""
        if self._own is None:
            return
        try:
            self._own.execute(
                "INSERT OR REPLACE INTO answers VALUES (?, ?, ?, ?, ?)",
                (key.candidate_id, key.call, key.attempt, key.payload_sha256, json.dumps(answer, ensure_ascii=False)),
            )
        except (OSError, sqlite3.Error) as error:
            warn_once(self, "write", error)
            self._readers.remove(self._own)
            self._own.close()
            self._own = None

    def close(self) -> None:
        """Close every connection."""
        for connection in self._readers:
            connection.close()
        self._readers = []


class ObjectCache:
    """A run's cache on a filesystem URI: one object per answer at `answer_path(key)` under the cache location.

    Any process on any node reads what any other wrote, whenever it wrote it, so a resumed run needs nothing from the
    nodes of the killed one. An object holds its key beside the answer, so what the hashes in its name stand for can
    be read off it. Reads and writes run on this cache's own threads, never on the actor's event loop. The
    cache is an optimisation, so a store that cannot be read or written costs the call nothing but the wait: a miss,
    or an answer not kept, with one warning per cache.
    """

    def __init__(self, location: str) -> None:
        self.location = without_options(location)
        self._warned = False
        self._filesystem: pafs.FileSystem | None = None
        self._root = ""
        try:
            self._filesystem, self._root = resolve(location)
        except StorageError as error:  # options it cannot parse, a bucket region it cannot look up
            warn_once(self, "open", error)
        # An object store's PUT replaces an object whole; a local file is written aside and moved into place, so a
        # reader never sees half an answer.
        self._write_aside = isinstance(self._filesystem, pafs.LocalFileSystem)
        self._threads = ThreadPoolExecutor(IO_THREADS, thread_name_prefix="llm-cache")

    async def get(self, key: CacheKey) -> dict[str, Any] | None:
        """The answer stored under `key`, or None (also when the store cannot be read)."""
        return await asyncio.get_running_loop().run_in_executor(self._threads, self._read, key)

    async def put(self, key: CacheKey, answer: Mapping[str, Any]) -> None:
        """Store a successful answer (JSON-serialisable fields) under `key`, done when it is in the store (or the
        store refused it)."""
        body = json.dumps({"key": asdict(key), "answer": answer}, ensure_ascii=False).encode()
        await asyncio.get_running_loop().run_in_executor(self._threads, self._write, key, body)

    def close(self) -> None:
        """Wait for the writes under way, then stop the cache's threads."""
        self._threads.shutdown(wait=True)

    def _read(self, key: CacheKey) -> dict[str, Any] | None:
        if self._filesystem is None:
            return None
        try:
            with self._filesystem.open_input_stream(f"{self._root}/{answer_path(key)}") as stream:
                return json.loads(stream.read())["answer"]
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError) as error:  # unreachable, refused, or an object that is not an answer
            warn_once(self, "read", error)
            return None

    def _write(self, key: CacheKey, body: bytes) -> None:
        if self._filesystem is None:
            return
        path = f"{self._root}/{answer_path(key)}"
        try:
            if not self._write_aside:
                with self._filesystem.open_output_stream(path) as stream:
                    stream.write(body)
                return
            folder = path.rsplit("/", 1)[0]
            self._filesystem.create_dir(folder, recursive=True)
            aside = f"{folder}/.{uuid.uuid4().hex}.tmp"
            with self._filesystem.open_output_stream(aside) as stream:
                stream.write(body)
            self._filesystem.move(aside, path)
        except OSError as error:
            warn_once(self, "write", error)


def warn_once(cache: RequestCache | ObjectCache, action: str, error: BaseException) -> None:
    """Log the first failure of `cache`'s store, and only that one: a cache is an optimisation, and a store that fails
    fails for every answer (a full disk, an unreachable bucket)."""
    if not cache._warned:
        cache._warned = True
        logger.warning("llm cache %s: %s failed (%s); calls go on without it (further failures not logged)",
                       cache.location, action, first_line(error))
