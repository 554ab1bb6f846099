"""`contribute` on a finished demo run, as a user runs it: a patch per Mathlib file that `git apply` takes, a
description beside it, a contributions/ table that report counts and export ships, a second start that replaces the
first's outputs instead of adding to them, an `out` on a full disk as one line with no patch cut short, and each offered
lemma under the name Mathlib gives its statement."""

from __future__ import annotations

import contextlib
import io
import json
import shutil
import subprocess
from pathlib import Path

import polars as pl
import pytest

from lean_pool.lean_source import DECLARATION_KINDS, read_commands
from operators.rows.contributions import OFFERED, STATUSES
from pipelines import contribute, export, report
from tests.full_disk import DISK_FULL_EXIT, fill
from tests.mine_support import FAST_LEAN

pytestmark = pytest.mark.ray

# The proved lemmas of the shared demo run and Mathlib's names for their statements: `a + b = b + a` is `add_comm`,
# `m ≤ n → m < n + 1` is `Nat.lt_add_one_of_le`, `a ∣ b → 0 < b → a ≤ b` is `Nat.le_of_dvd`.
MATHLIBS_NAMES = {
    "Mathlib.Order.Clamp/s0/c1": "add_comm",
    "Mathlib.Order.Clamp/s0/c3": "lt_add_one_of_le",
    "Mathlib.Data.Nat.Triangle/s0/c1": "Nat.lt_add_one_of_le",
    "Mathlib.Data.Nat.Triangle/s1/c4": "Nat.le_of_dvd",
}


def run_contribute(run_dir: Path, capsys) -> list[str]:
    assert contribute.main(["preset=demo", f"run_dir={run_dir}", *FAST_LEAN]) == 0
    return capsys.readouterr().out.splitlines()


@pytest.fixture(scope="module")
def contributed(demo_mine_run, ray_cluster, tmp_path_factory):
    """A copy of the shared demo run (the fixture is read-only) after `contribute`; its run dir, the closing block,
    and the Mathlib checkout it was made against. Every `contribute` in this module joins the module's Ray instead of
    starting one of its own."""
    source, _, _ = demo_mine_run
    run_dir = tmp_path_factory.mktemp("contribute") / "run"
    shutil.copytree(source, run_dir)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        assert contribute.main(["preset=demo", f"run_dir={run_dir}", *FAST_LEAN]) == 0
    checkout = Path(json.loads((run_dir / "run.json").read_text())["config"]["seeds"]["root"])
    return run_dir, printed.getvalue().splitlines(), checkout


def table(run_dir: Path, name: str) -> pl.DataFrame:
    return pl.read_parquet(run_dir / name / "*.parquet")


def test_every_proved_candidate_gets_one_row_and_the_closing_block_says_what_happened(contributed):
    run_dir, lines, _ = contributed
    candidates = table(run_dir, "candidates")
    rows = table(run_dir, "contributions")
    proved = candidates.filter((pl.col("status") == "proved") & ~pl.col("trivial").fill_null(False))
    assert sorted(rows["candidate_id"].to_list()) == sorted(proved["candidate_id"].to_list())
    assert set(rows["status"].to_list()) <= set(STATUSES)
    assert f"contributions: {rows.height}" in lines
    assert any(line.startswith("names: ") for line in lines) and any(line.startswith("not offered: ") for line in lines)
    assert any(line.startswith("SIMULATED run") for line in lines)
    assert lines[-1].startswith("next: git -C ") and "apply --check" in lines[-1]


def test_each_patch_applies_to_the_checkout_and_adds_only_the_offered_lemmas(contributed, tmp_path):
    run_dir, _, checkout = contributed
    rows = table(run_dir, "contributions").filter(pl.col("status") == OFFERED)
    assert rows.height > 0, "the demo run offers some lemma"
    repo = tmp_path / "mathlib"
    shutil.copytree(checkout, repo)
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-C", str(repo)]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "checkout"], check=True)
    for file, lemmas in rows.group_by("file"):
        patch = run_dir / "contribute" / lemmas["patch"][0]
        assert (run_dir / "contribute" / "descriptions" / f"{file[0]}.md").exists()
        subprocess.run([*git, "apply", "--check", str(patch)], check=True)
        subprocess.run([*git, "apply", str(patch)], check=True)
        before = [(c.name, c.text) for c in read_commands((checkout / file[0]).read_text())
                  if c.kind in DECLARATION_KINDS]
        after = read_commands((repo / file[0]).read_text())
        names = [c.name for c in after]
        assert [(c.name, c.text) for c in after if (c.name, c.text) in before] == before
        for row in lemmas.iter_rows(named=True):
            assert names.count(row["new_name"]) == 1
            placed = after[names.index(row["new_name"])]
            assert placed.line == row["line"]


def test_each_offered_lemma_gets_the_name_mathlib_gives_that_statement(contributed):
    # The shared demo run proves four of its lemmas; each is named as Mathlib names the same statement, in the
    # namespace its seed file opens (Data/Nat/Triangle.lean opens `Nat`, Order/Clamp.lean none).
    run_dir, _, _ = contributed
    offered = table(run_dir, "contributions").filter(pl.col("status") == OFFERED)
    assert dict(offered.select("candidate_id", "new_name").iter_rows()) == MATHLIBS_NAMES


def test_a_second_start_replaces_the_first_and_report_and_export_see_the_table(contributed, capsys):
    run_dir, _, _ = contributed
    first = table(run_dir, "contributions").sort("candidate_id")
    patches = sorted(p.relative_to(run_dir) for p in (run_dir / "contribute").rglob("*") if p.is_file())
    run_contribute(run_dir, capsys)
    second = table(run_dir, "contributions").sort("candidate_id")
    assert second.drop("contributed_at").equals(first.drop("contributed_at"))
    assert sorted(p.relative_to(run_dir) for p in (run_dir / "contribute").rglob("*") if p.is_file()) == patches
    assert report.main([f"run_dir={run_dir}"]) == 0
    assert "## What a contribution would offer" in (run_dir / "report" / "report.md").read_text()
    assert export.main([f"run_dir={run_dir}", "allow_sim=true", "format=jsonl"]) == 0
    shipped = (run_dir / "export" / "contributions" / "contributions.jsonl").read_text().splitlines()
    assert len(shipped) == second.height


def test_an_out_on_a_full_disk_is_one_line_and_leaves_no_patch_cut_short(contributed, tiny_disk, capsys):
    run_dir, _, _ = contributed
    before = table(run_dir, "contributions").sort("candidate_id")
    filler, out = tiny_disk / "filler", tiny_disk / "out"
    fill(filler)
    args = ["preset=demo", f"run_dir={run_dir}", f"out={out}", *FAST_LEAN]
    assert contribute.main(args) == DISK_FULL_EXIT
    printed = capsys.readouterr()
    [line] = [line for line in printed.err.splitlines() if line.startswith("error:")]
    assert line.startswith(f"error: {out} refused a write (No space left on device)") and "nothing is lost" in line
    assert "Traceback" not in printed.err + printed.out
    assert [path for path in out.rglob("*") if path.is_file()] == [], "no patch or description is left cut short"
    assert table(run_dir, "contributions").sort("candidate_id").equals(before)

    filler.unlink()
    assert contribute.main(args) == 0
    patches = sorted(path.relative_to(out) for path in out.rglob("*") if path.is_file())
    assert patches and patches == sorted(path.relative_to(run_dir / "contribute")
                                         for path in (run_dir / "contribute").rglob("*") if path.is_file())
