"""Where a run's lease object is kept, and how each place makes a write conditional on what its writer last saw, so
that two drivers never both hold a run (`pipelines.runtime.lease` holds the lease's rules and which store a run uses).

Locally, a whole file is written under a new name and then linked to `lease.json` (which fails if one is there) and,
for a renewal, take-over or release, compared under `flock` and renamed, so no write ever goes through a symlink or
into a file another name shares; on `s3://`, S3's conditional requests (`If-None-Match: *` to create, `If-Match:
<ETag>` to replace or delete), through boto3. Other filesystem URIs compare and write without a condition the store
enforces (a race of two starts within one request's time is not caught there).
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol
from urllib.parse import parse_qs, urlsplit

import pyarrow.fs as pafs

from operators.storage import StorageError
from pipelines.runtime.run_dir import ForeignContents

S3_SCHEME = "s3"
# HTTP statuses of an S3 request whose condition failed, of a conditional create racing another, of an object gone.
PRECONDITION_FAILED = 412
CONDITIONAL_CONFLICT = 409
NOT_FOUND = 404
# The permissions of a lease file (before the umask): its driver writes it, anyone may read it.
LEASE_MODE = 0o644
# What opening `lease.json` to lock it meets when there is no lease file to lock: none, a symlink, a directory.
GONE_OR_NOT_A_FILE = (errno.ENOENT, errno.ELOOP, errno.EISDIR)


def in_utc(moment: datetime) -> datetime:
    """A store's modification time as an aware UTC time (a time without a zone is UTC's)."""
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


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
    return ForeignContents(f"{location} is {what}, not a lease: a run's lease.json is a file its driver writes; "
                           "move it out of the run directory and start again")


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
            return Seen(b"", (entry.st_ino, b""), datetime.fromtimestamp(entry.st_mtime, UTC))
        with self._locked() as fd:
            if fd is None:
                return None
            body, held = self._contents(fd), os.fstat(fd)
            return Seen(body, (held.st_ino, body), datetime.fromtimestamp(held.st_mtime, UTC))

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
        return Seen(body, body, datetime.now(UTC) if info.mtime is None else in_utc(info.mtime))

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
