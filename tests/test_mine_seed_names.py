"""Seed files named in any Unicode, with a newline, with a dot (beside the folder of the same name), and reached again
through a symlink loop, mined end to end: each seed once under an id of its own, every LLM call answered (ids travel
encoded in the request headers), no row an infrastructure failure and no candidate id twice."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import ray

from conf import package_dir
from operators.llm.sim.server import SimServer
from operators.rows.candidates import ERROR_INFRA
from pipelines import mine
from tests.mine_support import overrides, read_table, sim_server_config

pytestmark = pytest.mark.ray
# Each seed file as named under Mathlib/, the demo seed it copies and the seed id it is mined as: `Order.Clamp.lean` is
# the Lean module `Mathlib.«Order.Clamp»`, never `Order/Clamp.lean`'s `Mathlib.Order.Clamp`.
SEED_NAMES = {"Ünïcødé_∀.lean": ("Order/Clamp.lean", "Mathlib.Ünïcødé_∀"),
              "two\nlines.lean": ("Data/Nat/Triangle.lean", "Mathlib.two\nlines"),
              "Order/Clamp.lean": ("Order/Clamp.lean", "Mathlib.Order.Clamp"),
              "Order.Clamp.lean": ("Data/Nat/Triangle.lean", "Mathlib.«Order.Clamp»")}


def test_any_seed_name_is_mined_once_and_a_symlink_loop_adds_nothing(tmp_path: Path, capsys):
    mathlib = tmp_path / "seeds" / "Mathlib"
    (mathlib / "Order").mkdir(parents=True)
    for name, (demo_seed, _) in SEED_NAMES.items():
        shutil.copy(Path(package_dir("pipelines/demo_seeds")) / "Mathlib" / demo_seed, mathlib / name)
    (mathlib / "self").symlink_to("../Mathlib")
    run_dir = tmp_path / "run"
    ray.init(num_cpus=10, include_dashboard=False, log_to_driver=False)
    try:
        with SimServer(sim_server_config(0.01, "preset=demo")) as server:
            args = [arg for arg in overrides(run_dir, tmp_path / "seeds", [], server.base_url, 1)
                    if not arg.startswith("seeds.list=")]
            assert mine.main(args) == 0
    finally:
        ray.shutdown()
    out = capsys.readouterr().out
    assert (f"seeds skipped under {tmp_path / 'seeds'}: 1 a second path (a symlink) to a file or directory already "
            f"listed") in out.splitlines()
    seeds = read_table(run_dir, "seeds")
    assert dict(zip(seeds["seed_path"].to_list(), seeds["seed_id"].to_list(), strict=True)) == {
        f"Mathlib/{name}": seed for name, (_, seed) in SEED_NAMES.items()}
    assert set(seeds["status"].to_list()) == {"ok"}
    assert read_table(run_dir, "discoveries").height == len(SEED_NAMES), "one discover call per seed, none twice"
    candidates = read_table(run_dir, "candidates")
    assert candidates["candidate_id"].n_unique() == candidates.height > 0
    assert set(candidates["seed_id"].to_list()) == {seed for _, seed in SEED_NAMES.values()}, "every seed mined"
    assert ERROR_INFRA not in candidates["status"].to_list()
