"""The Ray actor pool on a local cluster, with the Lean simulator behind it."""

from __future__ import annotations

import asyncio
import copy
import os
import re
import signal
import time
import uuid
from pathlib import Path

import psutil
import pytest
import ray
from hydra import compose, initialize_config_module
from omegaconf import OmegaConf

from lean_pool.launch import GIB, LeanSetupError
from lean_pool.pool import NODE_LABEL_SHARE, LeanPool, unplaceable_worker, worker_resources
from lean_pool.repl import PRIVATE_DIR_PREFIX
from lean_pool.replay import replay_settings

CHEATS_DIR = Path(__file__).resolve().parent / "cheats"

pytestmark = pytest.mark.ray

HEADER = "import Mathlib"
# Pool stats read back to back right after start (a few ms each), well inside a 2 s simulated import.
POLLS_WHILE_IMPORTING = 20


@pytest.fixture(scope="module")
def lean_cfg() -> dict:
    with initialize_config_module(config_module="conf", version_base=None):
        cfg = compose(config_name="check", overrides=["lean=sim"]).lean
    lean = OmegaConf.to_container(cfg, resolve=True)
    lean["sim"].update(import_s=0.05, check_s=0.0, burn_cpu=False)
    lean.update(workers=2, repls_per_worker=2, timeout_s=20, prewarm_headers=[HEADER], prewarm_repls=1)
    lean["resources_per_repl"]["num_cpus"] = 0.5
    return lean


@pytest.fixture(scope="module")
def pool(ray_cluster, lean_cfg) -> LeanPool:
    handle = LeanPool.start(lean_cfg)
    yield handle
    handle.shutdown()


def our_repl_processes(marker: str) -> list[psutil.Process]:
    """Simulator processes whose command line carries `marker` (a unique rule in their config)."""
    found = []
    for proc in psutil.process_iter(["cmdline", "status"]):
        cmdline = " ".join(proc.info["cmdline"] or [])
        if "lean_pool.simulator" in cmdline and marker in cmdline:
            found.append(proc)
    return found


def theorem(name: str, proof: str = "simp", header: str = HEADER) -> str:
    return f"{header}\n\ntheorem {name} : 1 + 1 = 2 := by\n  {proof}\n"


def test_clean_proofs_pass_and_are_marked_simulated(pool: LeanPool):
    results = asyncio.run(pool.check_many([theorem(f"t{i}") for i in range(12)]))
    assert [r.status for r in results] == ["passed"] * 12
    assert all(r.ok and r.provenance["simulated"] and r.provenance["lean_backend"] == "sim" for r in results)
    assert results[0].axioms == {"t0": ["propext", "Classical.choice", "Quot.sound"]}


def test_each_check_starts_from_the_pristine_header(pool: LeanPool):
    """The same name declared by many checks on the same REPLs never collides with an earlier check."""
    results = asyncio.run(pool.check_many([theorem("same_name")] * 8))
    assert {r.status for r in results} == {"passed"}


def test_sorry_fails_a_proof_but_compiles_a_statement(pool: LeanPool):
    proof = asyncio.run(pool.check(theorem("s", "sorry")))
    statement = asyncio.run(pool.check(theorem("s", "sorry"), mode="statement"))
    assert (proof.status, proof.ok) == ("sorry", False)
    assert statement.ok and statement.sorries


def test_diagnostics_point_at_the_callers_lines(pool: LeanPool):
    snippet = f"{HEADER}\n\n\ntheorem e : True := by\n  trivial -- sim:error\n"
    result = asyncio.run(pool.check(snippet))
    assert result.status == "error"
    errors = [m for m in result.messages if m["severity"] == "error"]
    assert errors and errors[0]["pos"]["line"] == 5


def test_refused_code_never_reaches_lean(pool: LeanPool):
    result = asyncio.run(pool.check(theorem("r") + '\n#eval IO.println "hi"\n'))
    assert result.status == "refused" and any("#eval" in reason for reason in result.reasons)
    assert result.messages == []


def test_header_affinity_keeps_imports_rare(pool: LeanPool):
    before = pool.stats()["header_switches"]
    other = "import Mathlib.Tactic"
    alternating = [theorem(f"m{i}", header=HEADER if i % 2 else other) for i in range(40)]
    results = asyncio.run(pool.check_many(alternating))
    assert {r.status for r in results} == {"passed"}
    # 40 checks alternating two headers on four REPLs: routing without affinity changes a REPL's
    # header on about every other check; with it, a few REPLs change once or twice.
    switches = pool.stats()["header_switches"] - before
    assert switches <= 2 * pool.stats()["slots"], switches


def test_cheat_corpus_fails_and_honest_proofs_pass_through_the_pool(pool: LeanPool):
    """The prove stage's path: each proof is checked against the statement it was asked to prove."""
    cheats = sorted(CHEATS_DIR.glob("*.lean"))
    honest = sorted((CHEATS_DIR / "honest").glob("*.lean"))

    def statement(target: str) -> str:
        return (CHEATS_DIR / "reference" / f"{target}.lean").read_text()

    async def check_all(pairs: list[tuple[str, str]]):
        return await asyncio.gather(*(pool.check(code, statement=statement(target)) for code, target in pairs))

    def target(path: Path) -> str:
        return re.search(r"^-- target: (.*)$", path.read_text(), re.MULTILINE).group(1)

    cheat_pairs = [(p.read_text(), target(p)) for p in cheats]
    for path, result in zip(cheats, asyncio.run(check_all(cheat_pairs))):
        assert not result.ok and result.status in {"refused", "sorry", "error"}, (path.name, result)
    honest_results = asyncio.run(check_all([(p.read_text(), p.stem) for p in honest]))
    assert [r.status for r in honest_results] == ["passed"] * len(honest)


def test_timeout_and_crash_are_infrastructure_and_the_pool_recovers(pool: LeanPool):
    hung = asyncio.run(pool.check(theorem("h", "simp -- sim:hang"), timeout=1.0))
    crashed = asyncio.run(pool.check(theorem("c", "simp -- sim:crash")))
    assert hung.status == "timeout" and hung.infra_failure
    assert crashed.status == "crashed" and crashed.retried and crashed.infra_failure
    after = asyncio.run(pool.check_many([theorem(f"ok{i}") for i in range(4)]))
    assert {r.status for r in after} == {"passed"}


def test_many_ray_callers_share_one_pool(pool: LeanPool):
    @ray.remote(num_cpus=0)
    def caller(handle: LeanPool, snippets: list[str]) -> list[str]:
        return [r.status for r in asyncio.run(handle.check_many(snippets))]

    statuses = ray.get([caller.remote(pool, [theorem(f"c{n}_{i}") for i in range(5)]) for n in range(6)])
    assert all(s == ["passed"] * 5 for s in statuses)


def test_start_returns_while_headers_import_and_early_checks_wait_for_the_warm_repls(ray_cluster, lean_cfg):
    """`LeanPool.start` does not wait for pre-warming (a minute for Mathlib), so a job's first LLM calls overlap it:
    both REPLs are still importing when it returns, and checks sent at once wait for them rather than import the
    header again on a REPL of their own."""
    slow = copy.deepcopy(lean_cfg)
    slow.update(workers=1, repls_per_worker=2, prewarm_repls=2)
    slow["sim"]["import_s"] = 2.0
    handle = LeanPool.start(slow)
    try:
        busy = [handle.stats()["busy_slots"] for _ in range(POLLS_WHILE_IMPORTING)]
        assert 2 in busy, busy  # a start that waited for the imports would see only idle REPLs
        results = asyncio.run(handle.check_many([theorem("early0"), theorem("early1")]))
        assert [(r.status, r.header_import_seconds) for r in results] == [("passed", 0.0), ("passed", 0.0)]
        assert handle.warmed() == 2 and handle.stats()["header_switches"] == 0
    finally:
        handle.shutdown()


def own_pool(ray_cluster, lean_cfg) -> tuple[LeanPool, str]:
    """A one-worker pool whose REPL processes carry a unique marker on their command line."""
    marker = f"pool-test-{uuid.uuid4().hex}"
    own = copy.deepcopy(lean_cfg)
    own["workers"] = 1
    own["sim"]["error_rules"].append({"pattern": marker, "message": "unused marker rule"})
    handle = LeanPool.start(own)
    assert asyncio.run(handle.check(theorem("x"))).ok
    return handle, marker


def alive(pids: list[int]) -> list[int]:
    """Those of `pids` still running (a zombie is dead, only waiting to be reaped)."""
    running = []
    for pid in pids:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                running.append(pid)
        except psutil.NoSuchProcess:
            continue
    return running


def wait_until_dead(pids: list[int]) -> list[int]:
    deadline = time.monotonic() + 10
    while alive(pids) and time.monotonic() < deadline:
        time.sleep(0.2)
    return alive(pids)


def test_workers_run_in_scheduling_groups_of_their_own_and_lead_their_process_groups(pool: LeanPool):
    """So the scheduler shares the CPU between a worker and the job's other processes as between scheduling groups
    (`lean_pool.ray_start.start_own_scheduling_group`), and Ray's per-worker process-group cleanup still reaches the
    worker."""
    workers = [proc for proc in psutil.process_iter(["cmdline"])
               if (proc.info["cmdline"] or [""])[0].startswith("ray::LeanWorker")]
    assert workers
    for worker in workers:
        assert os.getsid(worker.pid) == os.getpgid(worker.pid) == worker.pid
    assert os.getsid(0) not in {os.getsid(worker.pid) for worker in workers}


def test_shutdown_leaves_no_process_behind(ray_cluster, lean_cfg):
    handle, marker = own_pool(ray_cluster, lean_cfg)
    before = [proc.pid for proc in our_repl_processes(marker)]
    assert before
    handle.shutdown()
    assert wait_until_dead(before) == []
    # A REPL that has exited but is not yet reaped (a zombie) is listed for a moment: only live ones count.
    assert alive([proc.pid for proc in our_repl_processes(marker)]) == []


def test_a_killed_worker_takes_its_repls_with_it(ray_cluster, lean_cfg):
    """kill -9 of a worker actor's process: its REPLs (started by that process) die with it."""
    handle, marker = own_pool(ray_cluster, lean_cfg)
    repls = our_repl_processes(marker)
    pids = [proc.pid for proc in repls]
    (worker,) = {proc.ppid() for proc in repls} - set(pids)
    private_dirs = {Path(proc.cwd()) for proc in repls}
    assert all(path.name.startswith(PRIVATE_DIR_PREFIX) for path in private_dirs)
    os.kill(worker, signal.SIGKILL)
    assert wait_until_dead(pids) == []
    deadline = time.monotonic() + 10
    while any(path.exists() for path in private_dirs) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert [path for path in private_dirs if path.exists()] == []
    handle.shutdown()


# Ray's `Resources` of a GPU node (no Lean label, more CPUs and RAM than any Lean node below) and of a Lean node.
GPU_NODE = {"CPU": 64.0, "GPU": 8.0, "memory": 512 * GIB}
LEAN_NODE = {"CPU": 16.0, "memory": 64 * GIB, "lean": 1.0}


def labelled(lean_cfg: dict) -> dict:
    return {**lean_cfg, "node_resource": "lean"}


def test_a_node_resource_asks_each_worker_for_a_sliver_of_that_label(lean_cfg):
    no_replay = replay_settings(None, lean_cfg)
    plain, wanted = worker_resources(lean_cfg, no_replay), worker_resources(labelled(lean_cfg), no_replay)
    assert "resources" not in plain
    assert wanted == {**plain, "resources": {"lean": NODE_LABEL_SHARE}}  # the label adds no CPU or memory


def test_a_labelled_worker_counts_only_the_nodes_that_carry_the_label(lean_cfg):
    """The GPU node could hold the worker's CPUs and memory, but it is not a Lean node."""
    no_replay = replay_settings(None, lean_cfg)
    wanted = worker_resources(labelled(lean_cfg), no_replay)
    why = unplaceable_worker(wanted, [GPU_NODE])
    assert why is not None and why.startswith("no Ray node has the custom resource `lean` (lean.node_resource)")
    assert """ray start --resources='{"lean": 1}'""" in why
    assert unplaceable_worker(wanted, [GPU_NODE, LEAN_NODE]) is None
    too_small = unplaceable_worker(wanted, [GPU_NODE, {**LEAN_NODE, "CPU": 0.5}])
    assert too_small is not None and "largest Ray node with `lean` has 0.5 CPUs and 64.00 GiB" in too_small
    assert unplaceable_worker(worker_resources(lean_cfg, no_replay), [GPU_NODE]) is None  # unlabelled: any node


def test_a_pool_whose_label_no_node_carries_is_refused_before_a_worker_starts(ray_cluster, lean_cfg):
    with pytest.raises(LeanSetupError, match="no Ray node has the custom resource `lean`"):
        LeanPool.start(labelled(lean_cfg))


def test_a_lost_worker_gets_no_more_checks_and_with_none_left_a_check_fails_at_once(ray_cluster, lean_cfg):
    """A worker that dies (its node lost) costs the checks it held, as infrastructure failures; the pool sends the
    next ones to the workers left, and with none left answers `infra_error` at once instead of waiting."""
    pool = LeanPool.start({**lean_cfg, "workers": 2, "repls_per_worker": 1})
    try:
        lost, kept = pool._workers
        ray.kill(lost)
        one_by_one = [asyncio.run(pool.check(theorem(f"k{i}"))).status for i in range(4)]
        assert one_by_one.count("infra_error") <= 1 and one_by_one[-1] == "passed", one_by_one  # at most the first
        assert [r.status for r in asyncio.run(pool.check_many([theorem(f"a{i}") for i in range(4)]))] == \
            ["passed"] * 4
        ray.kill(kept)
        asyncio.run(pool.check(theorem("last")))
        started = time.monotonic()
        result = asyncio.run(pool.check(theorem("none_left")))
        assert result.status == "infra_error" and "every Lean pool worker was lost" in result.reasons[0]
        assert time.monotonic() - started < 1.0
    finally:
        pool.shutdown()
