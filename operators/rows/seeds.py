"""Seeds: which Mathlib files a run mines, what they are called, and whether their text can be sent at all.

A bad seed (unreadable, not UTF-8, empty, too long for the model's context) gets a status and a reason
of its own and the run goes on, so a night over all of Mathlib is not lost to one odd file. The whole
file goes to the model: a seed that does not fit is reported, never truncated.
"""

from __future__ import annotations

import fnmatch
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath

import pyarrow.fs as pafs

OK = "ok"
UNREADABLE = "unreadable"
NOT_UTF8 = "not_utf8"
EMPTY = "empty"
TOO_LONG = "too_long"
BAD_INPUT_STATUSES = (UNREADABLE, NOT_UTF8, EMPTY, TOO_LONG)
LEAN_SUFFIX = ".lean"


@dataclass(frozen=True)
class SeedText:
    """A seed file's text, or why there is none to send."""

    status: str
    text: str | None
    reason: str | None
    chars: int


def seed_id(relative_path: str) -> str:
    """The Lean module name of a seed file: `Mathlib/Data/Finset/Max.lean` -> `Mathlib.Data.Finset.Max`. A part of the
    path with a dot in it is one component of the name, which Lean writes in «»: `Mathlib/Order.Clamp.lean` is
    `Mathlib.«Order.Clamp»`, never taken for `Mathlib/Order/Clamp.lean`."""
    path = PurePosixPath(relative_path)
    parts = path.with_suffix("").parts if path.suffix == LEAN_SUFFIX else path.parts
    return ".".join(f"«{part}»" if "." in part else part for part in parts)


def shared_seed_id(relative_paths: Iterable[str]) -> tuple[str, str, str] | None:
    """The first two seed files that `seed_id` names alike, and the id (possible only when a file's name holds « or
    »), or None when every file has an id of its own: the id keys every row of a seed, and two files under one id
    would be mined as one."""
    first_with: dict[str, str] = {}
    for path in relative_paths:
        name = seed_id(path)
        if name in first_with:
            return first_with[name], path, name
        first_with[name] = path
    return None


def domain_of(seed: str, domains: Mapping[str, str], default: str) -> str:
    """The domain of a seed module from the longest module prefix listed in `domains`, else `default`.

    Prefixes match whole name components, so `Mathlib.Data` covers `Mathlib.Data.Finset.Max` but not
    `Mathlib.DataX`.
    """
    best, best_length = default, -1
    for prefix, domain in domains.items():
        if (seed == prefix or seed.startswith(prefix + ".")) and len(prefix) > best_length:
            best, best_length = domain, len(prefix)
    return best


def select(relative_paths: Iterable[str], include: Sequence[str], exclude: Sequence[str]) -> list[str]:
    """Seed files among `relative_paths`: `.lean` files matching an include glob and no exclude glob, sorted."""
    chosen = []
    for path in relative_paths:
        if not path.endswith(LEAN_SUFFIX):
            continue
        if any(fnmatch.fnmatchcase(path, glob) for glob in include) and not any(
            fnmatch.fnmatchcase(path, glob) for glob in exclude
        ):
            chosen.append(path)
    return sorted(chosen)


def estimated_tokens(text: str, chars_per_token: float) -> int:
    """Token count estimated from characters: enough to refuse a seed that cannot fit before paying for it."""
    return math.ceil(len(text) / chars_per_token)


def decode_seed(data: bytes, max_tokens: int, chars_per_token: float) -> SeedText:
    """Classify a seed file's bytes: UTF-8 text that is neither blank nor too long is `ok`."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        return SeedText(NOT_UTF8, None, f"not UTF-8: {error.reason} at byte {error.start}", len(data))
    if not text.strip():
        return SeedText(EMPTY, None, "the file is empty or blank", len(text))
    tokens = estimated_tokens(text, chars_per_token)
    if tokens > max_tokens:
        reason = f"about {tokens} tokens, more than the {max_tokens} that fit the discover model's context"
        return SeedText(TOO_LONG, None, reason, len(text))
    return SeedText(OK, text, None, len(text))


def read_seed(filesystem: pafs.FileSystem, path: str, max_tokens: int, chars_per_token: float) -> SeedText:
    """Read and classify one seed file; a file that cannot be read is a status, not an exception."""
    try:
        with filesystem.open_input_stream(path) as stream:
            data = stream.read()
    except OSError as error:
        return SeedText(UNREADABLE, None, f"cannot read: {error}", 0)
    return decode_seed(data, max_tokens, chars_per_token)
