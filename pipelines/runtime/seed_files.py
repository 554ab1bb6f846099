"""Which seed files a mining run reads: `seeds.root` walked (or `seeds.list` checked) with each file listed once,
whatever symlinks, loops and second spellings the tree or the list holds, and what was left out and why.

`mine` lists them before anything starts (none at all is one line, not an empty run), and `plan` lists the same
files to estimate what the run would cost.
"""

from __future__ import annotations

import heapq
import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass, field

import pyarrow.fs as pafs
from omegaconf import DictConfig

from operators.rows.seeds import select, shared_seed_id
from operators.storage import join, open_location
from pipelines.runtime.cli import SetupError


@dataclass(frozen=True)
class SeedListing:
    """The seed root's filesystem and path, the chosen seed files relative to it, and what the listing left out:
    paths that are not a regular file (FIFOs, devices, broken symlinks; in `seeds.list`, directories too) and second
    paths to a file or directory already listed (symlinks, loops, an entry listed again), the files among them counted
    only when the include globs choose them (all of a list's); and how many of a list's files lead to nothing (missing,
    a broken symlink, a loop), kept for their seed rows to say so."""

    filesystem: pafs.FileSystem
    root: str
    files: list[str]
    not_regular: int = 0
    repeated: int = 0
    missing: int = 0

    def skipped(self) -> str:
        """How many paths were left out and why, e.g. `2 not a regular file`; empty when none was."""
        return ", ".join(f"{count} {what}" for count, what in (
            (self.not_regular, "not a regular file"),
            (self.repeated, "a second path (a symlink) to a file or directory already listed")) if count)

    def skipped_line(self) -> str | None:
        """What `mine` and `plan` say about the paths left out, None when none was."""
        return f"seeds skipped under {self.root}: {self.skipped()}" if self.skipped() else None


@dataclass(frozen=True)
class LocalTree:
    """A local directory walked with each directory entered once and each file listed once (`walk_local`), or a
    `seeds.list` checked (`check_local_list`, `check_store_list`), paths relative to the root."""

    files: list[str]
    not_regular: list[str]
    repeated_files: list[str]
    repeated_directories: list[str]
    missing: list[str] = field(default_factory=list)


def walk_local(root: str) -> LocalTree:
    """Every path under the local directory `root`: the tree as it lies on disk first, then its symlinks in sorted
    order, each followed once. A directory is entered the first time its resolved path is reached and a regular file
    listed the first time, so a symlink loop or a second path to a file lists nothing twice and a file keeps its own
    path over a symlink's; anything else (a FIFO, a device, a broken symlink, an unreadable directory) is left out."""
    entered, listed = {os.path.realpath(root)}, set[str]()
    tree = LocalTree([], [], [], [])
    pending: list[tuple[str, str, str]] = [(root, "", os.path.realpath(root))]  # (path, relative, resolved)
    links: list[tuple[str, str]] = []  # (relative, path) of the symlinks met, a heap

    def take(path: str, relative: str, resolved: str, mode: int) -> None:
        if not stat.S_ISDIR(mode):
            take_file(tree, listed, relative, resolved, mode)
        elif resolved in entered:
            tree.repeated_directories.append(relative)
        else:
            entered.add(resolved)
            pending.append((path, relative, resolved))

    while pending or links:
        if not pending:
            relative, path = heapq.heappop(links)
            try:
                take(path, relative, os.path.realpath(path), os.stat(path).st_mode)
            except OSError:
                tree.not_regular.append(relative)
            continue
        directory, relative, resolved = pending.pop()
        try:
            entries = sorted(os.scandir(directory), key=lambda entry: entry.name)
        except OSError:
            tree.not_regular.append(relative)
            continue
        for entry in entries:
            path = f"{relative}/{entry.name}" if relative else entry.name
            if entry.is_symlink():
                heapq.heappush(links, (path, entry.path))
                continue
            try:
                mode = entry.stat(follow_symlinks=False).st_mode
            except OSError:
                tree.not_regular.append(path)
                continue
            take(entry.path, path, os.path.join(resolved, entry.name), mode)
    return tree


def take_file(tree: LocalTree, listed: set[str], relative: str, resolved: str, mode: int) -> None:
    """Put the path `relative` (resolving to `resolved`, of file mode `mode`) where it belongs in `tree`: a regular file
    reached the first time among the files (its resolved path added to `listed`), a second path to one among the
    repeated, anything else among the not regular."""
    if not stat.S_ISREG(mode):
        tree.not_regular.append(relative)
    elif resolved in listed:
        tree.repeated_files.append(relative)
    else:
        listed.add(resolved)
        tree.files.append(relative)


def check_local_list(root: str, entries: Sequence[str]) -> LocalTree:
    """The entries of `seeds.list` (paths relative to the local directory `root`), in their order, each file listed
    once by its resolved path (a second spelling or a symlink to it is repeated) and anything that is there but not a
    regular file (a directory, a FIFO, a device) not regular: a list is checked as the walk is, so a careless list
    neither hangs the run nor mines a file twice. A path that leads to nothing (missing, a broken symlink, a loop)
    stays listed: the user named that seed, and its row in the seeds table says it could not be read."""
    listed: set[str] = set()
    tree = LocalTree([], [], [], [])
    for relative in entries:
        path = os.path.join(root, relative)
        try:
            mode = os.stat(path).st_mode
        except OSError:
            mode = stat.S_IFREG  # leads to nothing: kept as a file, which its seed row then calls unreadable
            tree.missing.append(relative)
        take_file(tree, listed, relative, os.path.realpath(path), mode)
    return tree


def check_store_list(filesystem: pafs.FileSystem, root: str, entries: Sequence[str]) -> LocalTree:
    """The entries of `seeds.list` under an object store's `root` (which has no symlinks): each object listed once by
    its path, a prefix (a directory) not regular; a missing object stays listed, as a missing local path does."""
    listed: set[str] = set()
    tree = LocalTree([], [], [], [])
    infos = filesystem.get_file_info([join(root, relative) for relative in entries]) if entries else []
    for relative, info in zip(entries, infos, strict=True):
        mode = stat.S_IFDIR if info.type == pafs.FileType.Directory else stat.S_IFREG
        if info.type == pafs.FileType.NotFound:
            tree.missing.append(relative)
        take_file(tree, listed, relative, os.path.normpath(info.path), mode)
    return tree


def list_seed_files(cfg: DictConfig) -> SeedListing:
    """The seed files `cfg.seeds` chooses, each listed once (`chosen_seeds`), each under a seed id of its own; none at
    all, or two files under one id, is a `SetupError`: a run that would mine nothing says so instead of ending well."""
    listing = chosen_seeds(cfg)
    shared = shared_seed_id(listing.files)
    if shared:
        first, second, name = shared
        raise SetupError(f"seeds {first} and {second} under {cfg.seeds.root} would both be mined as {name}: rename "
                         "one, or leave it out with seeds.exclude")
    if len(listing.files) > listing.missing:
        return listing
    if cfg.seeds.list is not None:
        left_out = ", ".join(part for part in (listing.skipped(), f"{listing.missing} leading to nothing"
                                               if listing.missing else "") if part)
        skipped = f" ({left_out})" if left_out else ""
        raise SetupError(f"no entry of seeds.list is a seed file under {cfg.seeds.root}{skipped}: nothing to mine")
    raise SetupError(f"no seed file under {cfg.seeds.root} matches include={list(cfg.seeds.include)}: nothing to mine")


def chosen_seeds(cfg: DictConfig) -> SeedListing:
    """The seed files `cfg.seeds` chooses, each listed once: a local root is walked with symlinks followed once
    (`walk_local`), an object store's root listed as the store lists it (it has no symlinks); the entries of
    `seeds.list` are checked as the walk checks what it finds (`check_local_list`, `check_store_list`)."""
    root = str(cfg.seeds.root)
    filesystem, path = open_location(root)
    if filesystem.get_file_info(path).type != pafs.FileType.Directory:
        raise SetupError(f"seeds.root={root} is not a directory "
                         "(point it at a Mathlib checkout, the parent of Mathlib/)")
    include, exclude = list(cfg.seeds.include), list(cfg.seeds.exclude)
    if cfg.seeds.list is not None:
        entries = [str(entry) for entry in cfg.seeds.list]
        local = isinstance(filesystem, pafs.LocalFileSystem)
        checked = check_local_list(path, entries) if local else check_store_list(filesystem, path, entries)
        missing = set(checked.missing)
        return SeedListing(filesystem, path, checked.files, len(checked.not_regular), len(checked.repeated_files),
                           sum(file in missing for file in checked.files))
    if isinstance(filesystem, pafs.LocalFileSystem):
        tree = walk_local(path)
        return SeedListing(filesystem, path, select(tree.files, include, exclude),
                           len(select(tree.not_regular, include, exclude)),
                           len(select(tree.repeated_files, include, exclude)) + len(tree.repeated_directories))
    infos = filesystem.get_file_info(pafs.FileSelector(path, recursive=True))
    relative = [info.path[len(path) + 1 :] for info in infos if info.type == pafs.FileType.File]
    return SeedListing(filesystem, path, select(relative, include, exclude))
