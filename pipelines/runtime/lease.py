"""One driver per run: a lease object in the run directory that a job holds while it runs.

A job writes `lease.json` (host, pid, Ray job id, start, last renewal) only if it is absent, renews it from a daemon
thread every `lease.renew_s` and deletes it when it ends. A second job on the same run directory finds it and is
refused, naming the holder; a lease not renewed for `lease.stale_s` (its holder was killed) is taken over with a note.
A lease whose times cannot be read (torn, foreign, a symlink, times without a UTC offset) or lie in the future is
judged by when the object was last written instead. Every write is conditional on what the writer last saw, so two
drivers never both hold a run; how each store makes it so is `pipelines.runtime.lease_stores`.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import threading
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlsplit

import psutil
import pyarrow.fs as pafs

from operators.storage import first_line, is_uri, without_options
from pipelines.runtime.cli import SetupError
from pipelines.runtime.lease_stores import (
    S3_SCHEME,
    FilesystemLeaseStore,
    LeaseStore,
    LocalLeaseStore,
    S3LeaseStore,
)
from pipelines.runtime.run_dir import aware_time

LEASE = "lease.json"
# Where `ray job submit` tells its entrypoint which job it is (the submission id, in the job's metadata).
RAY_JOB_CONFIG_VARIABLE = "RAY_JOB_CONFIG_JSON_ENV_VAR"
RAY_JOB_ID_KEY = "job_submission_id"
# Rounds of create, read, take over: each lost race ends in a lease another start just wrote, refused on the next round.
TAKE_ROUNDS = 3
# A lease's times are written to the second: its holder's process may have started up to this much after them.
STAMP_RESOLUTION_S = 1


class LeaseHeld(SetupError):
    """The run directory is held by another run whose lease is fresh."""


@dataclass(frozen=True)
class Holder:
    """Who holds a run: what the lease object says."""

    host: str
    pid: int
    job_id: str | None
    started_at: str
    renewed_at: str

    def to_bytes(self) -> bytes:
        return json.dumps(asdict(self), sort_keys=True).encode()


def parse_holder(body: bytes) -> Holder | None:
    """The holder a lease object names, None when it is not a lease this code wrote (torn, foreign, empty)."""
    try:
        fields = json.loads(body.decode())
        job_id = fields.get("job_id")
        return Holder(host=str(fields["host"]), pid=int(fields["pid"]),
                      job_id=job_id if isinstance(job_id, str) else None, started_at=str(fields["started_at"]),
                      renewed_at=str(fields["renewed_at"]))
    except (ValueError, KeyError, TypeError, AttributeError, OverflowError):
        return None


def is_stale(holder: Holder | None, written: datetime, now: datetime, stale_s: float) -> bool:
    """Whether a lease may be taken over: not renewed for `stale_s` seconds. A lease whose renewal time cannot be read
    (an unreadable lease, a time without a UTC offset) or lies in the future is judged by when it was last `written`,
    which a renewal moves too."""
    renewed = None if holder is None else aware_time(holder.renewed_at)
    if renewed is None or renewed > now:
        renewed = written
    return (now - renewed).total_seconds() > stale_s


def holder_gone(holder: Holder | None, host: str) -> bool:
    """Whether the holder was a process of this machine (`host`) that runs no more (killed with -9, its machine
    restarted): its lease is taken over at once instead of after `lease.stale_s`. A live process under the holder's
    pid that started after the lease did is another process that reused the pid."""
    if holder is None or holder.host != host:
        return False
    try:
        created = psutil.Process(holder.pid).create_time()
    except psutil.NoSuchProcess:
        return True
    except (ValueError, OverflowError, psutil.Error):
        return False
    started = aware_time(holder.started_at)
    return started is not None and created > started.timestamp() + STAMP_RESOLUTION_S


def stamp(moment: datetime) -> str:
    """A time as the lines below and the lease write it."""
    return moment.isoformat(timespec="seconds")


def describe(holder: Holder | None, written: datetime) -> str:
    """The holder as the lines below name it, with when its file was last `written` where its renewal time is not
    what judges it (`is_stale`)."""
    if holder is None:
        return f"an unreadable lease (last written {stamp(written)})"
    job = f", ray job {holder.job_id}" if holder.job_id else ""
    renewed = aware_time(holder.renewed_at)
    untrusted = ("" if renewed is not None and renewed <= written + timedelta(seconds=STAMP_RESOLUTION_S) else
                 f", {'no time with a UTC offset' if renewed is None else 'a time in the future'}: the file was last "
                 f"written {stamp(written)}")
    return f"host {holder.host}, pid {holder.pid}{job}, since {holder.started_at} (last renewed {holder.renewed_at}" \
           f"{untrusted})"


def refusal(run_dir: str, holder: Holder | None, written: datetime, stale_s: float) -> str:
    """The one line a second driver on a held run directory gets (after `error: `)."""
    return (f"run_dir={run_dir} is held by another run: {describe(holder, written)}; one driver per run: wait for it "
            f"to end or stop it (a lease not renewed for lease.stale_s={stale_s:g}s is taken over)")


def takeover_note(run_dir: str, holder: Holder | None, written: datetime, stale_s: float, gone: bool) -> str:
    """The one line a start that takes over a lease prints: its holder runs no more on this machine (`gone`), or was
    not heard from for `stale_s`."""
    why = "a process of this machine that runs no more" if gone else \
        f"a run not heard from for over lease.stale_s={stale_s:g}s"
    return f"note: run_dir={run_dir} was held by {why} ({describe(holder, written)}); taking it over"


def lost_warning(run_dir: str, holder: Holder | None, written: datetime) -> str:
    """The one line a running job prints when its lease was taken over while it ran (it was not renewed in time)."""
    return (f"warning: run_dir={run_dir}: this run's lease was taken over by {describe(holder, written)}; two drivers "
            "may now write this run: stop one")


def this_holder(now: datetime) -> Holder:
    """This process as a lease names it."""
    return Holder(host=socket.gethostname(), pid=os.getpid(), job_id=ray_job_id(), started_at=stamp(now),
                  renewed_at=stamp(now))


def ray_job_id() -> str | None:
    """The submission id of the `ray job submit` running this driver, None outside one."""
    try:
        return json.loads(os.environ[RAY_JOB_CONFIG_VARIABLE])["metadata"][RAY_JOB_ID_KEY]
    except (KeyError, ValueError, TypeError):
        return None


def utc_now() -> datetime:
    return datetime.now(UTC)


def lease_store(uri: str, filesystem: pafs.FileSystem, run_path: str) -> LeaseStore:
    """The store of the lease of the run directory `uri` (`filesystem` and `run_path`: where `RunDir` resolved it)."""
    if not is_uri(uri):
        return LocalLeaseStore(f"{run_path}/{LEASE}")
    if urlsplit(uri).scheme == S3_SCHEME:
        parts = urlsplit(uri)
        return S3LeaseStore(parts._replace(path=f"{parts.path.rstrip('/')}/{LEASE}").geturl())
    return FilesystemLeaseStore(filesystem, f"{run_path}/{LEASE}")


class Lease:
    """A held lease: renewed from a daemon thread until `release`."""

    def __init__(self, store: LeaseStore, run_dir: str, holder: Holder, tag: Any, renew_s: float) -> None:
        self.store = store
        self.run_dir = run_dir
        self.holder = holder
        self.tag = tag
        self.renew_s = renew_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._renew_until_released, name="lease-renewal", daemon=True)
        self._thread.start()

    def _renew_until_released(self) -> None:
        warned = False
        while not self._stop.wait(self.renew_s):
            renewed = replace(self.holder, renewed_at=stamp(utc_now()))
            try:
                tag = self.store.replace(renewed.to_bytes(), self.tag)
            except Exception as error:  # a store down a moment: the next round tries again
                if not warned:
                    print(f"warning: run_dir={self.run_dir}: lease not renewed ({first_line(error)}); trying again",
                          file=sys.stderr, flush=True)
                    warned = True
                continue
            if tag is None:
                current = self.store.read()
                holder, written = ((None, utc_now()) if current is None
                                   else (parse_holder(current.body), current.written))
                print(lost_warning(self.run_dir, holder, written), file=sys.stderr, flush=True)
                return
            self.holder, self.tag = renewed, tag

    def release(self) -> None:
        """Stop renewing and delete the lease (unless another run took it over meanwhile); idempotent."""
        if self._stop.is_set():
            return
        self._stop.set()
        self._thread.join()
        self.store.delete(self.tag)


def take(store: LeaseStore, run_dir: str, renew_s: float, stale_s: float) -> Lease:
    """Hold the run directory's lease: create it, or take over a stale one (printing a note); a fresh lease of
    another run is `LeaseHeld`, naming it."""
    if not 0 < renew_s < stale_s:
        raise SetupError(f"lease.renew_s={renew_s:g} must be above 0 and below lease.stale_s={stale_s:g}")
    shown = without_options(run_dir)
    holder = this_holder(utc_now())
    body = holder.to_bytes()
    seen: Holder | None = None
    written = utc_now()
    for _ in range(TAKE_ROUNDS):
        tag = store.create(body)
        if tag is not None:
            return Lease(store, shown, holder, tag, renew_s)
        current = store.read()
        if current is None:
            continue
        seen, written = parse_holder(current.body), current.written
        gone = holder_gone(seen, holder.host)
        if not (gone or is_stale(seen, written, utc_now(), stale_s)):
            break
        tag = store.replace(body, current.tag)
        if tag is not None:
            print(takeover_note(shown, seen, written, stale_s, gone), file=sys.stderr, flush=True)
            return Lease(store, shown, holder, tag, renew_s)
    raise LeaseHeld(refusal(shown, seen, written, stale_s))
