"""Where a run's files live: a local path or a filesystem URI (`s3://bucket/run`, `gs://...`, `file:///...`).

Every location in a job (run_dir, seeds.root, index.dir, input) goes through these few functions, so a URI that
carries pyarrow's own options in its query (`s3://bucket/run?endpoint_override=host:9000&scheme=http`) keeps them
when a table or a file name is added to it, and reaches every node intact. Credentials and endpoints come the way
the AWS tools read them (`AWS_ACCESS_KEY_ID`, `AWS_ENDPOINT_URL`, `AWS_ENDPOINT_URL_S3`, instance roles...), which
the S3 client inside pyarrow reads on each node itself: nothing here holds a secret.
"""

from __future__ import annotations

import errno
import os
import re
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pyarrow.fs as pafs

SCHEME_SEPARATOR = "://"


class StorageError(RuntimeError):
    """A location that cannot be used (missing bucket, refused credentials, unreachable endpoint), in one line."""


class StorageFull(OSError):
    """A run's storage refused a write mid-run for want of room or of the right to write, in one line."""


# The errors of a filesystem that refuses writes (full, over quota, read-only), and how their words read in the text
# of an error that carries only text (an error raised in a Ray worker, SQLite's own).
REFUSED_WRITES = (errno.ENOSPC, errno.EDQUOT, errno.EROFS)
_REFUSED_WRITE_WORDS = re.compile("|".join([*(re.escape(os.strerror(code)) for code in REFUSED_WRITES),
                                            "database or disk is full"]), re.IGNORECASE)


def refused_write(error: BaseException) -> str | None:
    """Why the storage refused a write, when `error` or an error in its chain says it was full, over quota or
    read-only (its words, e.g. "No space left on device"); None for any other error."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, OSError) and current.errno in REFUSED_WRITES:
            return os.strerror(current.errno)
        words = _REFUSED_WRITE_WORDS.search(str(current))
        if words:
            return words.group(0)
        current = current.__cause__ or current.__context__
    return None


def is_uri(location: str) -> bool:
    """True for a filesystem URI, False for a local path."""
    return SCHEME_SEPARATOR in location


def resolve(location: str) -> tuple[pafs.FileSystem, str]:
    """The filesystem of `location` and the path on it (local paths and `file://` URIs made absolute and normal; a
    URI's query options applied)."""
    if not is_uri(location):
        return pafs.LocalFileSystem(), str(Path(location).expanduser().resolve())
    try:
        filesystem, path = pafs.FileSystem.from_uri(location)
    except (OSError, ValueError) as error:
        raise StorageError(f"{location}: {first_line(error)}") from error
    if isinstance(filesystem, pafs.LocalFileSystem):  # `file:///a/./b/../b/` is the folder `/a/b` names
        return filesystem, str(Path(path).resolve())
    return filesystem, path


def join(location: str, *parts: str) -> str:
    """`location` with `parts` added to its path, before any query string (`s3://b/run?x=1` + `t` is `s3://b/run/t?x=1`)."""
    relative = "/".join(part.strip("/") for part in parts if part.strip("/"))
    if not relative:
        return location
    if not is_uri(location):
        return f"{location.rstrip('/')}/{relative}"
    scheme, netloc, path, query, fragment = urlsplit(location)
    return urlunsplit((scheme, netloc, f"{path.rstrip('/')}/{relative}", query, fragment))


def location_of(base: str, root: str, path: str) -> str:
    """The location of `path`, a path under `root` on `base`'s filesystem (`root` is what `resolve(base)` gave, and
    listings give paths like it), written as `base` is written: a URI with `base`'s scheme and options, or a local
    path. No request is made: resolving a URI may ask the store (its bucket's region)."""
    if not is_uri(base):
        return path
    if path != root and not path.startswith(f"{root.rstrip('/')}/"):
        raise ValueError(f"{path} is not under {base}")
    return join(base, path[len(root):])


def without_options(location: str) -> str:
    """`location` with its query options left out, for messages and manifests (they may name hosts, never keys)."""
    if not is_uri(location):
        return location
    scheme, netloc, path, _, _ = urlsplit(location)
    return urlunsplit((scheme, netloc, path, "", ""))


def open_location(location: str, create: bool = False,
                  check: Callable[[pafs.FileSystem, str], None] | None = None) -> tuple[pafs.FileSystem, str]:
    """The filesystem and path of `location`, tried by one request before any work starts (the directory created
    first when `create`, after `check` had its say on the resolved location): a missing bucket, refused credentials
    or an endpoint that does not answer is a `StorageError` naming the location, not a traceback an hour into a run."""
    filesystem, path = resolve(location)
    if check is not None:
        check(filesystem, path)
    try:
        if create:
            filesystem.create_dir(path, recursive=True)
        filesystem.get_file_info(path)
    except OSError as error:
        raise StorageError(f"{without_options(location)}: {first_line(error)}") from error
    return filesystem, path


def first_line(error: BaseException) -> str:
    """The first line of an error's message (pyarrow's S3 errors run on with request details)."""
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__
