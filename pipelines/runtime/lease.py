"""One driver per run: a lease object in the run directory that a job holds while it runs.

A job writes `lease.json` (host, pid, Ray job id, start, last renewal) only if it is absent, renews it from a daemon
thread every `lease.renew_s` and deletes it when it ends. A second job on the same run directory finds it and is
refused, naming the holder; a lease not renewed for `lease.stale_s` (its holder was killed) is taken over with a note.
A lease whose times cannot be read (torn, foreign, a symlink, times without a UTC offset) or lie in the future is
judged by when the object was last written instead. Every write is conditional on what the writer last saw, so two
drivers never both hold a run: locally a whole file written under a new name and then linked to `lease.json` (which
fails if one is there) and, for a renewal, take-over or release, a compare under `flock` and a rename, so no write
ever goes through a symlink or into a file another name shares; on `s3://` S3's conditional requests
(`If-None-Match: *` to create, `If-Match: <ETag>` to replace or delete), through boto3. Other filesystem URIs compare
and write without a condition the store enforces (a race of two starts within one request's time is not caught
there).
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import socket
import stat
import sys
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, replace
from datetime import datetime, timedelta, timezone
from typing import Any, Protocol
from urllib.parse import parse_qs, urlsplit

import psutil
import pyarrow.fs as pafs

from operators.storage import StorageError, first_line, is_uri, without_options
from pipelines.runtime.cli import SetupError
from pipelines.runtime.run_dir import ForeignContents, aware_time

LEASE = "lease.json"
S3_SCHEME = "s3"
# Where `ray job submit` tells its entrypoint which job it is (the submission id, in the job's metadata).
RAY_JOB_CONFIG_VARIABLE = "RAY_JOB_CONFIG_JSON_ENV_VAR"
RAY_JOB_ID_KEY = "job_submission_id"
# Rounds of create, read, take over: each lost race ends in a lease another start just wrote, refused on the next round.
TAKE_ROUNDS = 3
# A lease's times are written to the second: its holder's process may have started up to this much after them.
STAMP_RESOLUTION_S = 1
# HTTP statuses of an S3 request whose condition failed, of a conditional create racing another, of an object gone.
PRECONDITION_FAILED = 412
CONDITIONAL_CONFLICT = 409
NOT_FOUND = 404
# The permissions of a lease file (before the umask): its driver writes it, anyone may read it.
LEASE_MODE = 0o644
# What opening `lease.json` to lock it meets when there is no lease file to lock: none, a symlink, a directory.
GONE_OR_NOT_A_FILE = (errno.ENOENT, errno.ELOOP, errno.EISDIR)


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
        return Holder(host=str(fields["host"]), pid=int(fields["pid"]), job_id=job_id if isinstance(job_id, str) else None,
                      started_at=str(fields["started_at"]), renewed_at=str(fields["renewed_at"]))
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
    return datetime.now(timezone.utc)


def in_utc(moment: datetime) -> datetime:
    """A store's modification time as an aware UTC time (a time without a zone is UTC's)."""
    return moment.replace(tzinfo=timezone.utc) if moment.tzinfo is None else moment.astimezone(timezone.utc)


@dataclass(frozen=True)
class Seen:
    """A lease as a store read it: its bytes, what a write conditional on it compares (`tag`), when it was written."""

    body: bytes
    tag: Any
    written: datetime


class LeaseStore(Protocol):
    """One lease object and the conditional writes on it; a tag is what a write is conditional on."""

    def create(self, body: bytes) -> Any | None:
        """Write `body` if there is no lease; its tag, or None when there is one."""

    def read(self) -> Seen | None:
        """The lease, None when there is none."""

    def replace(self, body: bytes, tag: Any) -> Any | None:
        """Write `body` if the lease is still the one tagged `tag`; the new tag, or None when it is not."""

    def delete(self, tag: Any) -> None:
        """Delete the lease if it is still the one tagged `tag`."""


def not_a_lease(location: str, what: str) -> ForeignContents:
    """The refusal of a `lease.json` that is no file a driver could have written (a directory, a FIFO)."""
    return ForeignContents(f"{location} is {what}, not a lease: a run's lease.json is a file its driver writes; move it "
                           "out of the run directory and start again")


class LocalLeaseStore:
    """A lease file on a local (or NFS-mounted) directory; a tag is the file's inode and bytes, compared under `flock`
    on the file. Each write makes a new file under a hidden name beside it, whole, and then links it to the lease's
    name (a create, which fails if the name is taken, dangling symlink included) or renames it over the file (a
    renewal or take-over): a reader never sees a lease half-written, and no write goes through a symlink or into an
    inode another name shares. A `lease.json` that is a symlink has no file to lock: it is replaced under a `flock` on
    the run directory."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.folder, self.name = os.path.split(path)

    def _written_whole(self, body: bytes) -> tuple[str, int]:
        """A new file beside the lease holding `body`, synced: its path and inode."""
        temporary = os.path.join(self.folder, f".{self.name}.{uuid.uuid4().hex}.tmp")
        fd = os.open(temporary, os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_NOFOLLOW, LEASE_MODE)
        try:
            with os.fdopen(fd, "wb", closefd=False) as stream:
                stream.write(body)
            os.fsync(fd)
            return temporary, os.fstat(fd).st_ino
        except BaseException:
            os.unlink(temporary)
            raise
        finally:
            os.close(fd)

    def _entry(self) -> os.stat_result | None:
        """What `lease.json` is (not following a symlink), None when there is none; one that is neither a file nor a
        symlink is `ForeignContents`."""
        try:
            entry = os.lstat(self.path)
        except FileNotFoundError:
            return None
        if stat.S_ISDIR(entry.st_mode):
            raise not_a_lease(self.path, "a directory")
        if not (stat.S_ISREG(entry.st_mode) or stat.S_ISLNK(entry.st_mode)):
            raise not_a_lease(self.path, "not a regular file")
        return entry

    def create(self, body: bytes) -> tuple[int, bytes] | None:
        temporary, inode = self._written_whole(body)
        try:
            os.link(temporary, self.path)
        except FileExistsError:
            return None
        finally:
            os.unlink(temporary)
        return inode, body

    def _renamed_over(self, body: bytes) -> tuple[int, bytes]:
        temporary, inode = self._written_whole(body)
        os.rename(temporary, self.path)
        return inode, body

    @contextmanager
    def _locked(self) -> Iterator[int | None]:
        """The lease file open and locked, None when there is none (or it was replaced meanwhile, or is a symlink)."""
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_NOFOLLOW)  # for writing: NFS locks only a file open for it
        except OSError as error:
            if error.errno not in GONE_OR_NOT_A_FILE:
                raise StorageError(f"{self.path} cannot be opened ({error.strerror})") from None
            yield None
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                same = os.lstat(self.path).st_ino == os.fstat(fd).st_ino
            except FileNotFoundError:
                same = False
            yield fd if same else None
        finally:
            os.close(fd)

    @contextmanager
    def _folder_locked(self) -> Iterator[None]:
        """The run directory locked against another start replacing a symlinked `lease.json` at the same time."""
        try:
            fd = os.open(self.folder, os.O_RDONLY | os.O_DIRECTORY)
            fcntl.flock(fd, fcntl.LOCK_EX)
        except OSError as error:
            raise StorageError(f"{self.path} is a symlink, not a lease, and {self.folder} cannot be locked to replace "
                               f"it safely ({error.strerror}): remove it if no run holds the run directory"
                               ) from None
        try:
            yield
        finally:
            os.close(fd)

    @staticmethod
    def _contents(fd: int) -> bytes:
        return os.pread(fd, os.fstat(fd).st_size, 0)

    def read(self) -> Seen | None:
        entry = self._entry()
        if entry is None:
            return None
        if stat.S_ISLNK(entry.st_mode):  # nothing a driver wrote: unreadable, judged by when the link was made
            return Seen(b"", (entry.st_ino, b""), datetime.fromtimestamp(entry.st_mtime, timezone.utc))
        with self._locked() as fd:
            if fd is None:
                return None
            body, held = self._contents(fd), os.fstat(fd)
            return Seen(body, (held.st_ino, body), datetime.fromtimestamp(held.st_mtime, timezone.utc))

    def replace(self, body: bytes, tag: tuple[int, bytes]) -> tuple[int, bytes] | None:
        inode, seen = tag
        entry = self._entry()
        if entry is None:
            return None
        if stat.S_ISLNK(entry.st_mode):
            with self._folder_locked():
                current = self._entry()
                if current is None or not stat.S_ISLNK(current.st_mode) or current.st_ino != inode:
                    return None
                return self._renamed_over(body)
        with self._locked() as fd:
            if fd is None or os.fstat(fd).st_ino != inode or self._contents(fd) != seen:
                return None
            return self._renamed_over(body)

    def delete(self, tag: tuple[int, bytes]) -> None:
        inode, seen = tag
        with self._locked() as fd:
            if fd is not None and os.fstat(fd).st_ino == inode and self._contents(fd) == seen:
                os.unlink(self.path)


class S3LeaseStore:
    """A lease object on S3 (or a store speaking its conditional requests, like MinIO); a tag is the object's ETag.
    The endpoint and region come from the run's URI options (`endpoint_override`, `scheme`, `region`) or the AWS
    variables, as pyarrow reads them."""

    def __init__(self, location: str) -> None:
        import boto3  # only runs on s3:// pay for its import

        parts = urlsplit(location)
        options = {key: values[-1] for key, values in parse_qs(parts.query).items()}
        endpoint = options.get("endpoint_override")
        if endpoint is not None and "://" not in endpoint:
            endpoint = f"{options.get('scheme', 'https')}://{endpoint}"
        self.client = boto3.client(S3_SCHEME, endpoint_url=endpoint, region_name=options.get("region"))
        self.bucket = parts.netloc
        self.key = parts.path.strip("/")
        self.failed = self.client.exceptions.ClientError

    @staticmethod
    def _condition_failed(error: Exception) -> bool:
        """Whether a request failed because its condition did not hold or the object is gone."""
        status = getattr(error, "response", {}).get("ResponseMetadata", {}).get("HTTPStatusCode")
        return status in (PRECONDITION_FAILED, CONDITIONAL_CONFLICT, NOT_FOUND)

    def create(self, body: bytes) -> str | None:
        try:
            return self.client.put_object(Bucket=self.bucket, Key=self.key, Body=body, IfNoneMatch="*")["ETag"]
        except self.failed as error:
            if self._condition_failed(error):
                return None
            raise

    def read(self) -> Seen | None:
        try:
            answer = self.client.get_object(Bucket=self.bucket, Key=self.key)
        except self.failed as error:
            if self._condition_failed(error):
                return None
            raise
        return Seen(answer["Body"].read(), answer["ETag"], in_utc(answer["LastModified"]))

    def replace(self, body: bytes, tag: str) -> str | None:
        try:
            return self.client.put_object(Bucket=self.bucket, Key=self.key, Body=body, IfMatch=tag)["ETag"]
        except self.failed as error:
            if self._condition_failed(error):
                return None
            raise

    def delete(self, tag: str) -> None:
        try:
            self.client.delete_object(Bucket=self.bucket, Key=self.key, IfMatch=tag)
        except self.failed as error:
            if not self._condition_failed(error):
                raise


class FilesystemLeaseStore:
    """A lease file on any other pyarrow filesystem: the same steps, with the condition checked just before each
    write rather than by the store."""

    def __init__(self, filesystem: pafs.FileSystem, path: str) -> None:
        self.filesystem = filesystem
        self.path = path

    def create(self, body: bytes) -> bytes | None:
        if self.read() is not None:
            return None
        with self.filesystem.open_output_stream(self.path) as stream:
            stream.write(body)
        return body

    def read(self) -> Seen | None:
        info = self.filesystem.get_file_info(self.path)
        if info.type == pafs.FileType.Directory:
            raise not_a_lease(self.path, "a directory")
        if info.type != pafs.FileType.File:
            return None
        with self.filesystem.open_input_stream(self.path) as stream:
            body = stream.read()
        return Seen(body, body, utc_now() if info.mtime is None else in_utc(info.mtime))

    def replace(self, body: bytes, tag: bytes) -> bytes | None:
        current = self.read()
        if current is None or current.tag != tag:
            return None
        with self.filesystem.open_output_stream(self.path) as stream:
            stream.write(body)
        return body

    def delete(self, tag: bytes) -> None:
        current = self.read()
        if current is not None and current.tag == tag:
            self.filesystem.delete_file(self.path)


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
                holder, written = (None, utc_now()) if current is None else (parse_holder(current.body), current.written)
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
