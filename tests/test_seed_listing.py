"""Seeds listed once each under a local `seeds.root`: symlinks followed once (a loop lists nothing twice), a second
path to a file skipped, anything but a regular file skipped, and `plan` saying how many. Pure: nothing is started."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from conf import package_dir
from pipelines import plan
from pipelines.runtime.job import list_seed_files, load_config

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
