"""Seeds listed once each under a local `seeds.root`: symlinks followed once (a loop lists nothing twice), a second
path to a file skipped, anything but a regular file skipped, and `plan` saying how many; the entries of a
`seeds.list` checked alike, none left one line. Pure: nothing is started."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pyarrow.fs as pafs
import pytest

from conf import package_dir
from operators.rows.seeds import seed_id
from pipelines import plan
from pipelines.jobs.mining import load_config
from pipelines.runtime.seed_files import check_store_list, list_seed_files

DEMO_SEEDS = ["Mathlib/Algebra/Group/Commutator.lean", "Mathlib/Data/Nat/Triangle.lean", "Mathlib/Order/Clamp.lean"]


def seeds_with_loops_and_special_files(root: Path) -> Path:
    """The demo seeds plus a symlink loop, a FIFO, a broken symlink, a second path to a seed sorted before it, and a
    symlinked directory holding a seed file of its own (outside the root)."""
    shutil.copytree(package_dir("pipelines/demo_seeds"), root / "seeds")
    mathlib = root / "seeds" / "Mathlib"
    (mathlib / "self").symlink_to("../Mathlib")
    os.mkfifo(mathlib / "Fifo.lean")
    (mathlib / "Broken.lean").symlink_to("nowhere.lean")
    (mathlib / "A.lean").symlink_to("Order/Clamp.lean")
    (root / "outside").mkdir()
    (root / "outside" / "Extra.lean").write_text("theorem extra : True := trivial\n")
    (mathlib / "Linked").symlink_to(root / "outside")
    return root / "seeds"


def test_each_file_once_by_its_resolved_path_and_the_rest_counted(tmp_path):
    seeds = seeds_with_loops_and_special_files(tmp_path)
    listing = list_seed_files(load_config(["preset=demo", f"seeds.root={seeds}"]))
    assert listing.files == sorted([*DEMO_SEEDS, "Mathlib/Linked/Extra.lean"]), "the seed keeps its own path"
    assert (listing.not_regular, listing.repeated) == (2, 2), "FIFO and broken link; A.lean and the loop"
    assert listing.skipped_line() == (f"seeds skipped under {seeds}: 2 not a regular file, 2 a second path (a "
                                      f"symlink) to a file or directory already listed")


def test_a_plain_tree_skips_nothing(tmp_path):
    shutil.copytree(package_dir("pipelines/demo_seeds"), tmp_path / "seeds")
    listing = list_seed_files(load_config(["preset=demo", f"seeds.root={tmp_path / 'seeds'}"]))
    assert (listing.files, listing.skipped_line()) == (DEMO_SEEDS, None)


def test_plan_counts_each_seed_once_and_says_what_it_skipped(tmp_path, capsys):
    seeds = seeds_with_loops_and_special_files(tmp_path)
    assert plan.main(["preset=demo", f"seeds.root={seeds}"]) == 0
    seeds_line, skipped_line, *_ = capsys.readouterr().out.splitlines()
    assert seeds_line.startswith(f"seeds: 4 files under {seeds}, 4 fit the discover model")
    assert skipped_line.startswith(f"seeds skipped under {seeds}: 2 not a regular file, 2 a second path")


def test_files_one_module_name_would_confuse_keep_ids_of_their_own(tmp_path):
    mathlib = tmp_path / "seeds" / "Mathlib"
    (mathlib / "Order").mkdir(parents=True)
    for name in ("Order/Clamp.lean", "Order.Clamp.lean", "Order/Clamp.Extra.lean"):
        (mathlib / name).write_text("theorem t : True := trivial\n")
    listing = list_seed_files(load_config(["preset=demo", f"seeds.root={tmp_path / 'seeds'}"]))
    assert {path: seed_id(path) for path in listing.files} == {
        "Mathlib/Order.Clamp.lean": "Mathlib.«Order.Clamp»", "Mathlib/Order/Clamp.lean": "Mathlib.Order.Clamp",
        "Mathlib/Order/Clamp.Extra.lean": "Mathlib.Order.«Clamp.Extra»"}


def seeds_list(entries: list[str]) -> str:
    return "seeds.list=[" + ",".join(entries) + "]"


def listed_with_mistakes(root: Path) -> tuple[Path, list[str]]:
    """The demo seeds and a `seeds.list` naming two of them among a directory, a FIFO, a missing file, a symlink to
    /dev/zero, a symlink loop, and Clamp.lean again: as given, through `./` and through a symlink."""
    shutil.copytree(package_dir("pipelines/demo_seeds"), root / "seeds")
    mathlib = root / "seeds" / "Mathlib"
    os.mkfifo(mathlib / "Fifo.lean")
    (mathlib / "Zero.lean").symlink_to("/dev/zero")
    (mathlib / "Loop.lean").symlink_to("Loop.lean")
    (mathlib / "Clamp.lean").symlink_to("Order/Clamp.lean")
    return root / "seeds", [DEMO_SEEDS[2], "Mathlib/Order", "Mathlib/Fifo.lean", "Mathlib/Missing.lean",
                            "Mathlib/Zero.lean", "Mathlib/Loop.lean", DEMO_SEEDS[2], "Mathlib/./Order/Clamp.lean",
                            "Mathlib/Clamp.lean", DEMO_SEEDS[1]]


def test_a_list_keeps_each_regular_file_once_and_counts_the_rest(tmp_path):
    seeds, entries = listed_with_mistakes(tmp_path)
    listing = list_seed_files(load_config(["preset=demo", f"seeds.root={seeds}", seeds_list(entries)]))
    assert listing.files == [DEMO_SEEDS[2], "Mathlib/Missing.lean", "Mathlib/Loop.lean", DEMO_SEEDS[1]], (
        "in the list's order, each once under its first path; what leads to nothing stays, for its row to say so")
    assert listing.skipped_line() == (f"seeds skipped under {seeds}: 3 not a regular file, 3 a second path (a "
                                      f"symlink) to a file or directory already listed")


@pytest.mark.slow
def test_plan_says_what_a_list_skipped_and_a_list_of_nothing_is_one_line(tmp_path, capsys):
    seeds, entries = listed_with_mistakes(tmp_path)
    assert plan.main(["preset=demo", f"seeds.root={seeds}", seeds_list(entries)]) == 0
    seeds_line, skipped_line, *_ = capsys.readouterr().out.splitlines()
    assert seeds_line.startswith(f"seeds: 4 files under {seeds}")
    assert skipped_line.startswith(f"seeds skipped under {seeds}: 3 not a regular file, 3 a second path")
    not_files = ["Mathlib/Order", "Mathlib/Fifo.lean", "Mathlib/Zero.lean"]
    assert plan.main(["preset=demo", f"seeds.root={seeds}", seeds_list(not_files)]) == 2
    out, err = capsys.readouterr()
    assert (out, err) == ("", f"error: no entry of seeds.list is a seed file under {seeds} (3 not a regular file): "
                              "nothing to mine\n")


def test_a_list_on_a_store_keeps_each_object_once_and_counts_the_rest(tmp_path):
    seeds, _ = listed_with_mistakes(tmp_path)
    entries = [DEMO_SEEDS[2], "Mathlib/Order", "Mathlib/Missing.lean", "Mathlib/./Order/Clamp.lean", DEMO_SEEDS[1]]
    checked = check_store_list(pafs.LocalFileSystem(), str(seeds), entries)
    assert (checked.files, checked.not_regular, checked.repeated_files) == (
        [DEMO_SEEDS[2], "Mathlib/Missing.lean", DEMO_SEEDS[1]], ["Mathlib/Order"], ["Mathlib/./Order/Clamp.lean"])
