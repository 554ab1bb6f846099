"""The replay: a proof the warm pool accepted, checked again by a Lean process started for it alone.

The judgements are tested on the outputs the real tools print; the simulator path runs through the real pool;
the real command lines (`lake env lean --json -o`, `lake env lean4checker`) run against stand-in scripts, since
no Lean toolchain is installed here.
"""

from __future__ import annotations

import asyncio
import json
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import psutil
import pytest
from hydra import compose, initialize_config_module
from omegaconf import OmegaConf

from lean_pool.launch import GIB, LeanSetupError
from lean_pool.pool import LeanPool, unplaceable_worker, worker_resources
from lean_pool.repl import CommandOutcome
from lean_pool.replay import (
    ACCEPTED,
    ERROR_INFRA,
    REJECTED,
    Replayer,
    ReplayResult,
    comparator_files,
    judge_checker,
    judge_comparator,
    judge_compile,
    replay_settings,
    with_axiom_queries,
)
from operators.prove import proved, replayed

REPO_DIR = Path(__file__).resolve().parents[1]
HEADER = "import Mathlib"
GOOD = f"{HEADER}\n\ntheorem two : 1 + 1 = 2 := by\n  norm_num\n"
REJECT = f"{HEADER}\n\ntheorem two : 1 + 1 = 2 := by\n  norm_num  -- sim:replay-reject\n"
IMPORT_S = 0.3


def composed(config: str = "check", *overrides: str) -> Any:
    with initialize_config_module(config_module="conf", version_base=None):
        return compose(config_name=config, overrides=list(overrides))


def sim_cfg(**sim: Any) -> dict[str, Any]:
    lean = OmegaConf.to_container(composed("check", "lean=sim").lean, resolve=True)
    lean["sim"].update(import_s=IMPORT_S, check_s=0.0, burn_cpu=False, **sim)
    lean.update(workers=1, repls_per_worker=1, timeout_s=20, prewarm_headers=[HEADER], prewarm_repls=1)
    lean["resources_per_repl"]["num_cpus"] = 0.5
    return lean


def verify_cfg(**overrides: Any) -> dict[str, Any]:
    return {**OmegaConf.to_container(composed().verify, resolve=True), **overrides}


def outcome(returncode: int | None, stdout: str = "", stderr: str = "") -> CommandOutcome:
    return CommandOutcome(returncode, stdout, stderr, 0.1)


def lean_message(severity: str, line: int, data: str) -> str:
    """One line of `lean --json` output (Lean's SerialMessage fields)."""
    return json.dumps({"fileName": "FolkloreReplay.lean", "pos": {"line": line, "column": 0},
                       "endPos": {"line": line, "column": 5}, "keepFullRange": False, "severity": severity,
                       "caption": "", "data": data})


# --- judgements on the tools' outputs ---------------------------------------------------------------------


def test_the_compiled_file_ends_with_one_axiom_query_per_target():
    text, lines = with_axiom_queries(GOOD, ["two", "Folk.three"])
    rows = text.splitlines()
    assert rows[lines["two"] - 1] == "#print axioms two" and rows[lines["Folk.three"] - 1] == "#print axioms Folk.three"
    assert text.startswith(GOOD)


def test_a_clean_compile_is_accepted_and_every_flaw_rejected():
    _, lines = with_axiom_queries(GOOD, ["two"])
    clean = lean_message("information", lines["two"], "'two' depends on axioms: [propext, Quot.sound]")
    assert judge_compile(outcome(0, clean), ["two"], lines) == (ACCEPTED, [])
    error = lean_message("error", 4, "unknown identifier 'helper'")
    word, reasons = judge_compile(outcome(1, error + "\n" + clean), ["two"], lines)
    assert word == REJECTED and "unknown identifier 'helper'" in reasons[0]
    sorry = lean_message("warning", 3, "declaration uses 'sorry'")
    assert judge_compile(outcome(0, sorry + "\n" + clean), ["two"], lines)[0] == REJECTED
    unsound = lean_message("information", lines["two"], "'two' depends on axioms: [propext, magic]")
    word, reasons = judge_compile(outcome(0, unsound), ["two"], lines)
    assert word == REJECTED and "magic" in reasons[0]
    word, reasons = judge_compile(outcome(0, ""), ["two"], lines)
    assert word == REJECTED and "not declared" in reasons[0]


def test_a_compile_that_says_nothing_about_the_proof_is_infra():
    _, lines = with_axiom_queries(GOOD, ["two"])
    clean = lean_message("information", lines["two"], "'two' depends on axioms: [propext]")
    assert judge_compile(outcome(None, stderr="no result within 5 s"), ["two"], lines)[0] == ERROR_INFRA
    assert judge_compile(outcome(-9), ["two"], lines)[0] == ERROR_INFRA
    assert judge_compile(outcome(127, stderr="cannot start lake"), ["two"], lines)[0] == ERROR_INFRA
    assert judge_compile(outcome(1, clean, "cannot write FolkloreReplay.olean"), ["two"], lines)[0] == ERROR_INFRA


def test_lean4checker_exit_codes_and_messages():
    assert judge_checker(outcome(0, "Replaying thm two\n")) == (ACCEPTED, [])
    kernel = "uncaught exception: (kernel) declaration type mismatch, 'false' has type\n  Prop"
    word, reasons = judge_checker(outcome(1, stderr=kernel))
    assert word == REJECTED and "declaration type mismatch" in reasons[0]
    missing = "uncaught exception: object file './FolkloreReplay.olean' of module FolkloreReplay does not exist"
    assert judge_checker(outcome(1, stderr=missing))[0] == ERROR_INFRA
    assert judge_checker(outcome(None, stderr="no result within 5 s"))[0] == ERROR_INFRA
    assert judge_checker(outcome(-11))[0] == ERROR_INFRA


def test_comparator_reports():
    ok = {"reports": [{"target": "two", "failureCategory": None}], "kernelAccepted": True}
    assert judge_comparator(outcome(0), ok) == (ACCEPTED, [])
    mismatch = {"reports": [{"target": "two", "failureCategory": "comparison", "failureMessage": "type differs"}]}
    word, reasons = judge_comparator(outcome(1), mismatch)
    assert word == REJECTED and reasons == ["two: comparison: type differs"]
    kernel = {"reports": [{"target": "two", "failureCategory": None}], "kernelAccepted": False,
              "kernelFailureMessage": "(kernel) unknown constant"}
    assert judge_comparator(outcome(1), kernel)[0] == REJECTED
    assert judge_comparator(outcome(1, stderr="Child exited with 1"), None)[0] == ERROR_INFRA


def test_comparator_project_states_the_challenge_and_reuses_the_packages(tmp_path: Path):
    statement = f"{HEADER}\n\ntheorem two : 1 + 1 = 2 := by\n  sorry\n"
    files = comparator_files(GOOD, statement, ["two"], tmp_path, "leanprover/lean4:v4.20.0")
    assert files["Challenge.lean"] == statement and files["Solution.lean"] == GOOD
    config = json.loads(files["config.json"])
    assert config["theorem_names"] == ["two"] and set(config["permitted_axioms"]) == {
        "propext", "Classical.choice", "Quot.sound"}
    assert str(tmp_path / ".lake" / "packages") in files["lakefile.toml"]


# --- setup: a missing tool is one error at start ---------------------------------------------------------


def executable(path: Path, text: str) -> Path:
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


# Stand-ins for the real tools, enough to run the real command lines: `lake --dir P env CMD...` runs CMD; `lean`
# prints one JSON message per `#print axioms` (and a sorry warning) and writes the .olean; `lean4checker` finds the
# module on LEAN_PATH and rejects a file that says "environment hack".
FAKE_LAKE = f"""#!{sys.executable}
import os, sys
args = sys.argv[1:]
assert args[0] == "--dir" and args[2] == "env", args
os.execvp(args[3], args[3:])
"""
FAKE_LEAN = f"""#!{sys.executable}
import json, sys
args = sys.argv[1:]
assert args[:2] == ["--json", "--root=."] and args[2] == "-o", args
source = open(args[4]).read()
for number, line in enumerate(source.splitlines(), 1):
    if line.startswith("#print axioms "):
        name = line.split()[-1]
        print(json.dumps({{"severity": "information", "pos": {{"line": number, "column": 0}},
                          "data": f"'{{name}}' depends on axioms: [propext]"}}))
open(args[3], "w").write(source)
"""
FAKE_CHECKER = f"""#!{sys.executable}
import os, sys
module = sys.argv[-1]
found = [d for d in os.environ.get("LEAN_PATH", "").split(":") if os.path.isfile(os.path.join(d, module + ".olean"))]
if not found:
    sys.exit(f"uncaught exception: object file {{module}}.olean of module {{module}} does not exist")
if "environment hack" in open(os.path.join(found[0], module + ".olean")).read():
    sys.exit("uncaught exception: (kernel) declaration type mismatch")
print("Replaying thm two")
"""


def fake_project(tmp_path: Path, *, checker: bool = True) -> dict[str, Any]:
    """A `lean=repl` config on a stand-in Lake project whose tools are the scripts above."""
    project = tmp_path / "project"
    (project / ".lake" / "packages" / "REPL" / ".lake" / "build" / "bin").mkdir(parents=True)
    (project / "lean-toolchain").write_text("leanprover/lean4:v4.20.0\n")
    executable(project / ".lake" / "packages" / "REPL" / ".lake" / "build" / "bin" / "repl", "#!/bin/sh\n")
    lean = OmegaConf.to_container(composed("check", "lean=repl").lean, resolve=True)
    lean.update(project_dir=str(project), lake=str(executable(tmp_path / "lake", FAKE_LAKE)), toolchain="test",
                mathlib_rev="test")
    lean["sandbox"]["enabled"] = False
    lean["replay"]["lean"] = str(executable(tmp_path / "lean", FAKE_LEAN))
    if checker:
        lean["replay"]["lean4checker"] = str(executable(tmp_path / "lean4checker", FAKE_CHECKER))
    return lean


def test_a_missing_tool_is_one_setup_error_naming_it(tmp_path: Path):
    lean = fake_project(tmp_path, checker=False)
    with pytest.raises(LeanSetupError, match="lean4checker"):
        replay_settings(verify_cfg(), lean)
    lean["replay"]["landrun"] = "no-such-landrun-here"
    with pytest.raises(LeanSetupError, match="comparator"):
        replay_settings(verify_cfg(replay="comparator"), lean)
    with pytest.raises(LeanSetupError, match="verify.replay='sometimes'"):
        replay_settings(verify_cfg(replay="sometimes"), lean)
    assert not replay_settings(verify_cfg(replay="off"), lean).enabled
    assert not replay_settings(None, lean).enabled


@pytest.mark.slow
def test_the_real_command_lines_compile_then_replay_in_a_private_directory(tmp_path: Path):
    lean = fake_project(tmp_path)
    replayer = Replayer(replay_settings(verify_cfg(timeout_s=30), lean), lean)
    good = asyncio.run(replayer.replay(GOOD))
    assert (good.verdict, good.mode) == (ACCEPTED, "fresh")
    hacked = asyncio.run(replayer.replay(GOOD.replace("norm_num", "norm_num  -- environment hack")))
    assert hacked.verdict == REJECTED and "declaration type mismatch" in hacked.reasons[0]
    assert not list(Path(os.environ.get("TMPDIR", "/tmp")).glob("lean-replay-*")), "work directories are removed"


# --- the simulator in a fresh process ---------------------------------------------------------------------


@pytest.mark.slow
def test_a_crash_or_hang_of_the_replay_is_infra_not_a_verdict():
    lean = sim_cfg()
    lean["sim"]["import_s"] = 0.0
    replayer = Replayer(replay_settings(verify_cfg(timeout_s=2), lean), lean)
    crashed = asyncio.run(replayer.replay(GOOD.replace("norm_num", "norm_num  -- sim:crash")))
    assert crashed.verdict == ERROR_INFRA and "crashed" in crashed.reasons[0]
    hung = asyncio.run(replayer.replay(GOOD.replace("norm_num", "norm_num  -- sim:hang")))
    assert hung.verdict == ERROR_INFRA and "timeout" in hung.reasons[0]
    assert not psutil.pid_exists(hung.pid) or psutil.Process(hung.pid).status() == psutil.STATUS_ZOMBIE


@pytest.fixture(scope="module")
def replaying_pool(ray_cluster) -> LeanPool:
    handle = LeanPool.start(sim_cfg(), verify=verify_cfg())
    yield handle
    handle.shutdown()


@pytest.mark.ray
def test_an_accepted_proof_is_replayed_by_a_process_started_for_it(replaying_pool: LeanPool):
    async def both() -> tuple[Any, Any, Any]:
        warm = await replaying_pool.check(GOOD)
        return warm, await replaying_pool.check(GOOD), await replaying_pool.replay(GOOD)

    first, warm, replay = asyncio.run(both())
    assert first.status == warm.status == "passed"
    assert warm.header_import_seconds == 0.0, "the pool's REPL was warm"
    assert replay.verdict == ACCEPTED and replay.summary == "accepted"
    assert replay.seconds >= IMPORT_S, "the replay's process imported the header itself"
    assert replay.pid is not None and not psutil.pid_exists(replay.pid), "one file, then the process is stopped"
    assert replaying_pool.stats()["replays"].get(ACCEPTED, 0) >= 1


@pytest.mark.ray
def test_what_the_warm_repl_accepted_the_replay_may_reject(replaying_pool: LeanPool):
    async def both() -> tuple[Any, Any]:
        return await replaying_pool.check(REJECT), await replaying_pool.replay(REJECT)

    warm, replay = asyncio.run(both())
    assert warm.status == "passed"
    assert replay.verdict == REJECTED and "rejected on replay" in replay.summary
    assert replay.summary.startswith("rejected: ")


@pytest.mark.ray
def test_with_the_replay_off_nothing_is_replayed(ray_cluster):
    pool = LeanPool.start(sim_cfg(), verify=verify_cfg(replay="off"))
    try:
        assert asyncio.run(pool.replay(GOOD)) is None
        assert pool.stats()["replays"] == {}
    finally:
        pool.shutdown()


# --- what a replay does to a candidate ---------------------------------------------------------------------


def test_a_rejected_replay_unproves_the_entry_and_says_why():
    entry = {"role": "p", "model": "m", "proved": True, "proof": GOOD, "success_at": 0, "reason": None,
             "attempts": [], "replay": None, "replay_seconds": None}
    kept = replayed(entry, ReplayResult(ACCEPTED, [], seconds=1.5))
    assert (kept["proved"], kept["replay"], kept["replay_seconds"]) == (True, "accepted", 1.5)
    assert replayed(entry, None) == entry
    lost = replayed(entry, ReplayResult(REJECTED, ["line 4: (kernel) declaration type mismatch"]))
    assert (lost["proved"], lost["proof"], lost["success_at"]) == (False, None, None)
    assert lost["reason"] == "replay: line 4: (kernel) declaration type mismatch"
    row = {"status": "compiled", "reason": None}
    done = proved(row, [lost], 2)
    assert (done["status"], done["reason"]) == ("compiled", lost["reason"])
    assert proved(row, [lost, kept], 2)["status"] == "proved"


# --- the check CLI reports both verdicts ---------------------------------------------------------------------


@pytest.mark.ray
def test_check_cli_reports_the_warm_verdict_and_the_replay(tmp_path: Path):
    (tmp_path / "good.lean").write_text(GOOD)
    (tmp_path / "reject.lean").write_text(REJECT)
    (tmp_path / "sorry.lean").write_text(GOOD.replace("norm_num", "sorry"))
    # Two logical CPUs, the default simulated pool and a replay slot: what a laptop has and gets by default.
    fast = ["lean=sim", "lean.sim.import_s=0.05", "lean.sim.check_s=0", "lean.sim.burn_cpu=false", "ray.num_cpus=2"]
    proc = subprocess.run([sys.executable, "-m", "lean_pool.check", str(tmp_path), "replay=true", *fast],
                          cwd=REPO_DIR, capture_output=True, text=True, timeout=240)
    lines = {Path(line["path"]).name: line for line in map(json.loads, proc.stdout.splitlines())}
    assert (lines["good.lean"]["status"], lines["good.lean"]["replay"], lines["good.lean"]["verified"]) == (
        "passed", "accepted", True)
    reject = lines["reject.lean"]
    assert (reject["status"], reject["verified"]) == ("passed", False) and reject["replay"].startswith("rejected: ")
    assert lines["sorry.lean"]["replay"].startswith("skipped") and lines["sorry.lean"]["verified"] is False
    assert proc.returncode == 1
    off = subprocess.run([sys.executable, "-m", "lean_pool.check", str(tmp_path / "good.lean"), *fast],
                         cwd=REPO_DIR, capture_output=True, text=True, timeout=240)
    assert json.loads(off.stdout.splitlines()[0])["replay"] is None and off.returncode == 0
    refused = subprocess.run([sys.executable, "-m", "lean_pool.check", str(tmp_path), "replay=true",
                              "verify.replay=off", *fast], cwd=REPO_DIR, capture_output=True, text=True, timeout=240)
    assert refused.returncode == 2 and "verify.replay" in refused.stderr
    too_small = subprocess.run([sys.executable, "-m", "lean_pool.check", str(tmp_path), "replay=true", *fast,
                                "ray.num_cpus=1"], cwd=REPO_DIR, capture_output=True, text=True, timeout=240)
    assert too_small.returncode == 2 and too_small.stdout == ""
    assert "needs 1.5 CPUs" in too_small.stderr and "largest Ray node has 1 CPUs" in too_small.stderr


def test_a_worker_no_node_can_hold_is_named_before_anything_waits_on_it():
    replay = replay_settings(verify_cfg(), sim_cfg())
    lean = {**sim_cfg(), "repls_per_worker": 2}
    wanted = worker_resources(lean, replay)
    assert wanted["num_cpus"] == 1.5  # two REPLs and one replay slot at 0.5 CPU each
    laptop = {"CPU": 2.0, "memory": 8 * GIB}
    assert unplaceable_worker(wanted, [laptop]) is None
    assert unplaceable_worker(wanted, [{"CPU": 1.0, "memory": 8 * GIB}, laptop]) is None
    why = unplaceable_worker(wanted, [{"CPU": 1.0, "memory": 64 * GIB}, {"CPU": 1.5, "memory": 0.1 * GIB}])
    assert why is not None and "largest Ray node has 1.5 CPUs and 0.10 GiB" in why
    assert worker_resources(lean, replay_settings(verify_cfg(replay="off"), sim_cfg()))["num_cpus"] == 1.0
