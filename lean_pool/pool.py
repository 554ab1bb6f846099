"""A pool of warm Lean REPLs on Ray, shared by every caller in a job.

Workers are Ray actors that each own `repls_per_worker` REPL sessions and reserve CPU and memory per REPL, so
Ray never packs more REPLs on a node than its RAM holds (and, with `lean.node_resource` set, only on the nodes
labelled with that custom resource). A check costs one Ray hop: the caller's `LeanPool`
handle sends it straight to a worker (the one with the fewest of this caller's checks in flight, ties broken by
the check's header so equal load keeps a header on the same worker), and the worker hands it to one of its REPLs
that already holds the check's header (`lean_pool.routing`), so `import Mathlib` is paid once per REPL rather
than once per check. The handle that starts the workers also places the pre-warmed headers, sums the workers'
counts and stops them; starting the pool waits on nothing. Callers (Ray Data actors, the CLI) hold a picklable
`LeanPool` handle and `await pool.check(...)`. With `verify.replay` on, `await pool.replay(...)` checks an accepted
file once more in a process started for it alone (`lean_pool.replay`); workers reserve resources for those
processes too and bound how many run at once.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any, cast

import ray
from omegaconf import OmegaConf

from lean_pool.header import split_header
from lean_pool.kimina import KIMINA, KiminaPool, kimina_provenance
from lean_pool.launch import GIB, LeanSetupError, build_launch, provenance
from lean_pool.ray_start import start_own_scheduling_group
from lean_pool.replay import ERROR_INFRA, OFF, Replayer, ReplayResult, ReplaySettings, replay_settings
from lean_pool.routing import HeaderScheduler, Slot
from lean_pool.session import LeanSession
from lean_pool.session_check import CheckMode, CheckResult, check_on_session

# What each pool worker asks of the custom resource `lean.node_resource` names. The resource is a presence label (a
# Lean node is started with `--resources='{"lean": 1}'`), so a worker takes a sliver of it: a node labelled with 1 could
# hold 1000 workers, and its CPUs and memory bound them long before the label does.
NODE_LABEL_SHARE = 0.001
# The mode a replay of an accepted file is counted under beside the checks (`drain_checks`).
REPLAY_MODE = "replay"


@ray.remote
class LeanWorker:
    """Owns REPL sessions on one node, chooses which of them runs each check, and runs it.

    An async actor: its REPLs are started from its one event-loop thread, which lives as long as the
    actor, so their parent-death signal fires exactly when the actor dies (see lean_pool/repl.py). It runs in a
    scheduling group of its own, so other work of the job starting on its node cannot starve its REPLs of checks
    (`lean_pool.ray_start.start_own_scheduling_group`).
    """

    def __init__(self, lean_cfg: dict[str, Any], replay: ReplaySettings) -> None:
        start_own_scheduling_group()
        launch = build_launch(lean_cfg)
        self._provenance = provenance(lean_cfg)
        self._replayer = Replayer(replay, lean_cfg) if replay.enabled else None
        self._replay_slots = asyncio.Semaphore(max(replay.slots_per_worker, 1))
        self._import_timeout = float(lean_cfg["import_timeout_s"])
        self._timeout = float(lean_cfg["timeout_s"])
        self._sessions = [
            LeanSession(
                launch,
                max_uses=int(lean_cfg["max_uses"]),
                max_rss_bytes=int(float(lean_cfg["max_rss_gb"]) * GIB),
                import_timeout=self._import_timeout,
            )
            for _ in range(int(lean_cfg["repls_per_worker"]))
        ]
        self._scheduler = HeaderScheduler([Slot(worker=0, index=i) for i in range(len(self._sessions))],
                                          depth=int(lean_cfg["checks_in_flight_per_repl"]))
        self._counts: Counter[str] = Counter()
        self._replay_counts: Counter[str] = Counter()
        # (mode, status, seconds) of every check and replay since the job's metrics last took them (`drain_checks`).
        self._finished: list[tuple[str, str, float]] = []

    async def check(self, snippet: str, timeout: float | None, mode: CheckMode, names: list[str] | None,
                    statement: str | None, priority: int = 0) -> CheckResult:
        """Run one check on a REPL that holds its header when one is free (or worth switching to it), before the
        waiting checks of a higher `priority` number."""
        header = split_header(snippet).header
        slot = await self._scheduler.acquire(header, priority)
        result = CheckResult(status="infra_error", ok=False, reasons=["check cancelled"])
        try:
            result = await check_on_session(self._sessions[slot.index], snippet, timeout=timeout or self._timeout,
                                            mode=mode, names=names, statement=statement, provenance=self._provenance)
        finally:
            self._counts[result.status] += 1
            self._finished.append((mode, result.status, result.seconds))
            self._scheduler.release(
                slot,
                None if result.infra_failure else header,
                check_seconds=result.seconds - result.header_import_seconds,
                import_seconds=result.header_import_seconds,
            )
        return result

    async def replay(self, snippet: str, statement: str | None, names: list[str] | None) -> ReplayResult | None:
        """Replay an accepted file in a process started for it alone (never one of this worker's warm REPLs), at
        most `verify.slots_per_worker` at once; None when the replay is off."""
        if self._replayer is None:
            return None
        async with self._replay_slots:
            result = await self._replayer.replay(snippet, statement=statement, names=names)
        self._replay_counts[result.verdict] += 1
        self._finished.append((REPLAY_MODE, result.verdict, result.seconds))
        return result

    def drain_checks(self) -> list[tuple[str, str, float]]:
        """The (mode, status, seconds) of the checks and replays finished since the last call, handed over once."""
        finished, self._finished = self._finished, []
        return finished

    async def warm(self, header: str) -> bool:
        """Import `header` ahead of time on a REPL the scheduler hands out as it would to a check (an idle one
        first), so checks that arrive meanwhile wait for it rather than share it; whether it came up warm."""
        slot = await self._scheduler.acquire(header)
        warm, import_seconds = False, 0.0
        try:
            outcome = await self._sessions[slot.index].run(header + "\n", self._import_timeout, axioms_for=())
            warm, import_seconds = outcome.kind == "ok" and outcome.answer is not None, outcome.header_import_seconds
        finally:
            self._scheduler.release(slot, header if warm else None, import_seconds=import_seconds)
        return warm

    def stats(self) -> dict[str, Any]:
        return {
            "by_status": dict(self._counts),
            "replays": dict(self._replay_counts),
            "header_switches": self._scheduler.switches,
            "busy_slots": self._scheduler.busy,
            "slots": len(self._scheduler.slots),
            "queued": self._scheduler.queued,
        }

    async def close(self) -> None:
        await asyncio.gather(*(session.close() for session in self._sessions))


def warming_order(workers: Sequence[Any], repls_per_worker: int, headers: Sequence[str],
                  repls_per_header: int) -> list[tuple[str, Any]]:
    """Which worker imports which pre-warmed header: each header on `repls_per_header` REPLs, the first REPL of every
    worker before any second one."""
    spread = [worker for _ in range(repls_per_worker) for worker in workers]
    return list(zip([header for header in headers for _ in range(repls_per_header)], spread))


def summed_stats(per_worker: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The workers' counts (`LeanWorker.stats`) added up: by status, header switches, slots in use, queued checks and
    replays by verdict."""
    totals: dict[str, Any] = {"by_status": Counter(), "replays": Counter(), "header_switches": 0,
                              "busy_slots": 0, "slots": 0, "queued": 0}
    for worker in per_worker:
        for key, value in worker.items():
            totals[key] += Counter(value) if isinstance(value, dict) else value
    return {key: dict(value) if isinstance(value, Counter) else value for key, value in totals.items()}


def header_rank(header: str, worker: int) -> str:
    """A worker's rank for a header (rendezvous hashing): among equally loaded workers the same header goes to the
    same worker, from every caller, so a header's REPLs stay together."""
    return hashlib.blake2b(f"{worker}:{header}".encode(), digest_size=8).hexdigest()


# Why a check fails at once when this handle has seen every worker die.
EVERY_WORKER_LOST = "every Lean pool worker was lost (their nodes died); the next start of the run retries this row"


class LeanPool:
    """Picklable handle to a running pool: pass it to Ray Data actors and await checks from anywhere.

    Each copy counts the checks and replays it has in flight per worker, and sends the next one to the worker with
    the fewest (ties broken by `header_rank`): one Ray hop per check, and no caller floods one worker. A worker found
    dead (its node lost) gets no more work from this copy: its checks in flight end `infra_error`, later ones go to
    the workers left, and with none left a check ends `infra_error` at once, so the run ends with those rows to
    retry rather than waiting for a worker that may never come back. Workers are not restarted in place: a restart
    waits for room on a labelled node, which a cluster that lost its only Lean node may never have.
    """

    def __init__(self, workers: Sequence[ray.actor.ActorHandle], replay_mode: str,
                 warming: Sequence[ray.ObjectRef] = (), priority: int = 0) -> None:
        self._workers = list(workers)
        self._replay_mode = replay_mode
        self._priority = priority
        self._in_flight = [0] * len(self._workers)
        self._lost: set[int] = set()
        self._warming = list(warming)

    def __getstate__(self) -> dict[str, Any]:
        return {"workers": self._workers, "replay_mode": self._replay_mode, "priority": self._priority}

    def __setstate__(self, state: dict[str, Any]) -> None:
        LeanPool.__init__(self, state["workers"], state["replay_mode"], priority=state["priority"])

    def with_priority(self, priority: int) -> LeanPool:
        """A handle to the same workers whose checks wait behind those of lower `priority` numbers and go before
        those of higher ones (a mining run numbers its plans so, oldest first)."""
        return LeanPool(self._workers, self._replay_mode, priority=priority)

    @classmethod
    def start(cls, lean_cfg: Mapping[str, Any], verify: Mapping[str, Any] | None = None) -> LeanPool | KiminaPool:
        """Start the workers for `lean_cfg` (a `conf/lean/*.yaml` mapping) and begin importing the
        pre-warmed headers. It returns without waiting for the imports (a minute for Mathlib), so a job's first LLM
        calls overlap them; a check that arrives first waits for a REPL like any other. `warmed()` waits for them.

        Pass the handle to the job's other processes (it pickles). `verify` is the job's `verify:` section: how
        `replay` works (None: no replay). With `lean=kimina` a running Kimina Lean Server checks instead
        (lean_pool/kimina.py): the handle has the same `check`, `replay`, `stats`, `shutdown`.
        """
        cfg = plain_config(lean_cfg)
        if cfg["backend"] == KIMINA:
            return KiminaPool.start(cfg, plain_config(verify) if verify is not None else None)
        build_launch(cfg)  # fail here, in the caller, with a clear message when Lean is missing
        replay = replay_settings(plain_config(verify) if verify is not None else None, cfg)  # and the replay's tools
        nodes = [node["Resources"] for node in ray.nodes() if node["Alive"]]
        problem = unplaceable_worker(worker_resources(cfg, replay), nodes)
        if problem:
            raise LeanSetupError(problem)
        worker_options = {
            **worker_resources(cfg, replay),
            # Checks wait in the worker's own scheduler for a REPL; replays, pre-warming and counts go beside them.
            "max_concurrency": int(cfg["max_queued"]) + replay.slots_per_worker + 2,
        }
        # mypy keeps a decorated class's own type; `ray.remote` made LeanWorker an ActorClass.
        workers = [LeanWorker.options(**worker_options).remote(cfg, replay)  # type: ignore[attr-defined]
                   for _ in range(int(cfg["workers"]))]
        order = warming_order(workers, int(cfg["repls_per_worker"]), list(cfg["prewarm_headers"] or []),
                              int(cfg["prewarm_repls"] or 0))
        return cls(workers, replay.mode, [worker.warm.remote(header) for header, worker in order])

    def warmed(self) -> int:
        """Wait until the pre-warmed headers are imported; how many REPLs came up warm (0 when none were asked
        for, or on a copy of the handle passed to another process)."""
        return sum(ray.get(self._warming))

    def _pick(self, header: str) -> int | None:
        """The worker for the next call among those not lost: fewest of this handle's calls in flight, then the
        header's rank; None when every worker is lost."""
        alive = [w for w in range(len(self._workers)) if w not in self._lost]
        return min(alive, key=lambda w: (self._in_flight[w], header_rank(header, w)), default=None)

    def _failed(self, worker: int, error: ray.exceptions.RayError) -> str:
        """Why a call to `worker` failed; a worker that died (with its node, say) is not sent anything more."""
        if isinstance(error, ray.exceptions.RayActorError):
            self._lost.add(worker)
        return f"Lean worker failed: {error}"

    async def check(
        self,
        snippet: str,
        timeout: float | None = None,
        mode: CheckMode = "proof",
        names: list[str] | None = None,
        statement: str | None = None,
    ) -> CheckResult:
        """Check one Lean snippet.

        `names` are the declarations a proof must provide (default: the target of `statement`, else all
        it declares); `statement` is the compiled statement the proof must keep unchanged.
        """
        worker = self._pick(split_header(snippet).header)
        if worker is None:
            return CheckResult(status="infra_error", ok=False, reasons=[EVERY_WORKER_LOST])
        self._in_flight[worker] += 1
        try:
            return await self._workers[worker].check.remote(snippet, timeout, mode, names, statement, self._priority)
        except ray.exceptions.RayError as error:
            return CheckResult(status="infra_error", ok=False, reasons=[self._failed(worker, error)])
        finally:
            self._in_flight[worker] -= 1

    async def replay(self, snippet: str, statement: str | None = None,
                     names: list[str] | None = None) -> ReplayResult | None:
        """Check a file the pool accepted once more, in a Lean process started for it alone and stopped after it
        (`verify.replay`); None when the replay is off. Same `statement` and `names` as `check`."""
        if self._replay_mode == OFF:
            return None
        worker = self._pick(split_header(snippet).header)
        if worker is None:
            return ReplayResult(ERROR_INFRA, [EVERY_WORKER_LOST], mode=self._replay_mode)
        self._in_flight[worker] += 1
        try:
            return await self._workers[worker].replay.remote(snippet, statement, names)
        except ray.exceptions.RayError as error:
            return ReplayResult(ERROR_INFRA, [self._failed(worker, error)], mode=self._replay_mode)
        finally:
            self._in_flight[worker] -= 1

    async def check_many(
        self, snippets: Sequence[str], timeout: float | None = None, mode: CheckMode = "proof"
    ) -> list[CheckResult]:
        """Check several snippets concurrently; results in input order."""
        return list(await asyncio.gather(*(self.check(snippet, timeout, mode) for snippet in snippets)))

    def stats(self) -> dict[str, Any]:
        return summed_stats(ray.get([worker.stats.remote() for worker in self._workers]))

    def drain_checks(self) -> list[tuple[str, str, float]]:
        """Every worker's checks and replays finished since the last call (`LeanWorker.drain_checks`)."""
        drained: list[list[tuple[str, str, float]]] = ray.get([worker.drain_checks.remote()
                                                                for worker in self._workers])
        return [check for finished in drained for check in finished]

    def shutdown(self) -> None:
        """Stop every REPL process and the pool's workers: each closes its REPLs, then it is killed (REPLs die with
        their worker whatever its state, so a worker that died already is only killed)."""
        closing: list[ray.ObjectRef] = [worker.close.remote() for worker in self._workers]
        for closed in closing:
            try:
                ray.get(closed)
            except ray.exceptions.RayError:
                pass
        for worker in self._workers:
            ray.kill(worker)


def check_lean_setup(lean_cfg: Mapping[str, Any], verify: Mapping[str, Any] | None = None) -> None:
    """Fail with a `LeanSetupError` naming what is missing (a Lake project, a binary; a Kimina server that does
    not answer, its key, a replay it cannot do) before a job starts anything, whatever the backend."""
    if lean_cfg["backend"] == KIMINA:
        KiminaPool.start(lean_cfg, verify)  # a handle and one health probe: nothing to stop
    else:
        build_launch(lean_cfg)


def checker_provenance(lean_cfg: Mapping[str, Any]) -> dict[str, Any]:
    """What every result records about the checker that produced it, whatever the backend."""
    return kimina_provenance(lean_cfg) if lean_cfg["backend"] == KIMINA else provenance(lean_cfg)


def worker_resources(lean_cfg: Mapping[str, Any], replay: ReplaySettings) -> dict[str, Any]:
    """What Ray reserves for one worker: each REPL's share, and as much for each replay slot (a replay process is
    another Lean importing the header, so it costs what a warm REPL costs); with `lean.node_resource` set, a sliver
    of that custom resource too, so Ray places workers only on the nodes labelled with it (Lean nodes)."""
    processes = int(lean_cfg["repls_per_worker"]) + (replay.slots_per_worker if replay.enabled else 0)
    per_repl = lean_cfg["resources_per_repl"]
    wanted: dict[str, Any] = {"num_cpus": float(per_repl["num_cpus"]) * processes,
                              "memory": int(float(per_repl["memory_gb"]) * GIB * processes)}
    if lean_cfg["node_resource"]:
        wanted["resources"] = {str(lean_cfg["node_resource"]): NODE_LABEL_SHARE}
    return wanted


def unplaceable_worker(resources: Mapping[str, Any], nodes: Sequence[Mapping[str, float]]) -> str | None:
    """Why no node can hold a worker asking for `resources` (`worker_resources`), or None when one can.

    Ray would otherwise keep such a worker pending forever and every check would wait on it in silence.
    `nodes` are the `Resources` of the cluster's live nodes (Ray's `CPU` and `memory` keys, and custom resources by
    name); only those carrying the worker's custom resources (the Lean node label) count.
    """
    label = resources.get("resources", {})
    lean_nodes = [node for node in nodes if all(node.get(name, 0.0) >= share for name, share in label.items())]
    if label and not lean_nodes:
        (name,) = label
        return (f"no Ray node has the custom resource `{name}` (lean.node_resource): start Lean nodes with "
                f"ray start --resources='{{\"{name}\": 1}}' (or give their node group that resource in the cluster "
                f"definition), or set lean.node_resource=null to place Lean workers on any node")
    if any(node.get("CPU", 0.0) >= resources["num_cpus"] and node.get("memory", 0.0) >= resources["memory"]
           for node in lean_nodes):
        return None
    largest = max(lean_nodes, key=lambda node: (node.get("CPU", 0.0), node.get("memory", 0.0)), default={})
    among = "".join(f" with `{name}`" for name in label)
    return (f"a Lean pool worker needs {resources['num_cpus']:g} CPUs and {resources['memory'] / GIB:.2f} GiB "
            f"(lean.repls_per_worker REPLs and verify.slots_per_worker replay slots when replaying, each "
            f"lean.resources_per_repl), but the largest Ray node{among} has {largest.get('CPU', 0.0):g} CPUs and "
            f"{largest.get('memory', 0.0) / GIB:.2f} GiB: lower lean.resources_per_repl or lean.repls_per_worker, "
            f"or start Ray with more logical CPUs (ray.num_cpus=N)")


def plain_config(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """A Hydra DictConfig (or any mapping) as plain containers, so it pickles cheaply into actors."""
    if OmegaConf.is_config(cfg):
        return cast(dict[str, Any], OmegaConf.to_container(cfg, resolve=True))
    return dict(cfg)
