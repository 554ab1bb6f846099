"""A pool of warm Lean REPLs on Ray, shared by every caller in a job.

Workers are Ray actors that each own `repls_per_worker` REPL sessions and reserve CPU and memory per
REPL, so Ray never packs more REPLs on a node than its RAM holds. A single router actor knows every
REPL slot and which header it has imported; it sends each check to a free slot that already holds
the check's header, so `import Mathlib` is paid once per REPL rather than once per check. Callers
(Ray Data actors, the CLI) hold a picklable `LeanPool` handle and `await pool.check(...)`. With `verify.replay`
on, `await pool.replay(...)` checks an accepted file once more in a process started for it alone
(`lean_pool.replay`); workers reserve resources for those processes too, and the router bounds how many run.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import ray
from omegaconf import OmegaConf

from lean_pool.header import split_header
from lean_pool.kimina import KIMINA, KiminaPool
from lean_pool.launch import GIB, LeanSetupError, build_launch, provenance
from lean_pool.replay import ERROR_INFRA, OFF, Replayer, ReplayResult, ReplaySettings, replay_settings
from lean_pool.routing import HeaderScheduler, Slot
from lean_pool.session import LeanSession
from lean_pool.session_check import CheckMode, CheckResult, check_on_session

DEFAULT_POOL_NAME = "folklore-lean-pool"


@ray.remote
class LeanWorker:
    """Owns REPL sessions on one node and runs checks on the slot the router names.

    An async actor: its REPLs are started from its one event-loop thread, which lives as long as the
    actor, so their parent-death signal fires exactly when the actor dies (see lean_pool/repl.py).
    """

    def __init__(self, lean_cfg: dict[str, Any], replay: ReplaySettings) -> None:
        launch = build_launch(lean_cfg)
        self._provenance = provenance(lean_cfg)
        self._replayer = Replayer(replay, lean_cfg) if replay.enabled else None
        self._import_timeout = float(lean_cfg["import_timeout_s"])
        self._sessions = [
            LeanSession(
                launch,
                max_uses=int(lean_cfg["max_uses"]),
                max_rss_bytes=int(float(lean_cfg["max_rss_gb"]) * GIB),
                import_timeout=self._import_timeout,
            )
            for _ in range(int(lean_cfg["repls_per_worker"]))
        ]

    async def check(self, slot: int, snippet: str, timeout: float, mode: CheckMode, names: list[str] | None,
                    statement: str | None) -> CheckResult:
        return await check_on_session(self._sessions[slot], snippet, timeout=timeout, mode=mode, names=names,
                                      statement=statement, provenance=self._provenance)

    async def replay(self, snippet: str, statement: str | None, names: list[str] | None) -> ReplayResult:
        """Replay an accepted file in a process started for it alone (never one of this worker's warm REPLs)."""
        return await self._replayer.replay(snippet, statement=statement, names=names)

    async def warm(self, slot: int, header: str) -> float | None:
        """Import `header` on a slot ahead of time; the seconds it took, None when it failed."""
        outcome = await self._sessions[slot].run(header + "\n", self._import_timeout, axioms_for=())
        return outcome.header_import_seconds if outcome.kind == "ok" and outcome.answer is not None else None

    async def close(self) -> None:
        await asyncio.gather(*(session.close() for session in self._sessions))


@ray.remote(num_cpus=0)
class LeanRouter:
    """Routes checks to REPL slots with header affinity; its concurrency bound is the pool's queue bound."""

    def __init__(self, lean_cfg: dict[str, Any], replay: ReplaySettings) -> None:
        repls = int(lean_cfg["repls_per_worker"])
        worker_options = {
            **worker_resources(lean_cfg, replay),
            "max_concurrency": repls * int(lean_cfg["checks_in_flight_per_repl"]) + replay.slots_per_worker + 1,
        }
        self._workers = [LeanWorker.options(**worker_options).remote(lean_cfg, replay)
                         for _ in range(int(lean_cfg["workers"]))]
        slots = [Slot(worker=w, index=i) for w in range(len(self._workers)) for i in range(repls)]
        self._scheduler = HeaderScheduler(slots, depth=int(lean_cfg["checks_in_flight_per_repl"]))
        self._timeout = float(lean_cfg["timeout_s"])
        self._counts: Counter[str] = Counter()
        self._replay_mode = replay.mode
        self._replay_counts: Counter[str] = Counter()
        # One token per replay a worker may run at once; a replay takes a token and gives it back when done.
        self._replay_tokens: asyncio.Queue[int] = asyncio.Queue()
        for _ in range(replay.slots_per_worker if replay.enabled else 0):
            for worker in range(len(self._workers)):
                self._replay_tokens.put_nowait(worker)

    async def prewarm(self, headers: Sequence[str], repls_per_header: int) -> int:
        """Import each header on `repls_per_header` slots; returns how many slots came up warm."""
        wanted = [header for header in headers for _ in range(repls_per_header)]
        slots = list(zip(wanted, self._scheduler.slots))
        seconds = await asyncio.gather(*(self._workers[s.worker].warm.remote(s.index, h) for h, s in slots))
        for (header, slot), took in zip(slots, seconds):
            slot.header = header if took is not None else None
            if took is not None:
                self._scheduler.note_import(took)
        return sum(took is not None for took in seconds)

    async def check(self, snippet: str, timeout: float | None, mode: CheckMode, names: list[str] | None,
                    statement: str | None) -> CheckResult:
        header = split_header(snippet).header
        slot = await self._scheduler.acquire(header)
        result = CheckResult(status="infra_error", ok=False, reasons=["check cancelled"])
        try:
            result = await self._workers[slot.worker].check.remote(
                slot.index, snippet, timeout or self._timeout, mode, names, statement
            )
        except ray.exceptions.RayError as error:
            result = CheckResult(status="infra_error", ok=False, reasons=[f"Lean worker failed: {error}"])
        finally:
            self._counts[result.status] += 1
            self._scheduler.release(
                slot,
                None if result.infra_failure else header,
                check_seconds=result.seconds - result.header_import_seconds,
                import_seconds=result.header_import_seconds,
            )
        return result

    async def replay(self, snippet: str, statement: str | None, names: list[str] | None) -> ReplayResult | None:
        """Replay on the first worker with a free replay slot; None when the replay is off."""
        if self._replay_mode == OFF:
            return None
        worker = await self._replay_tokens.get()
        result = ReplayResult(ERROR_INFRA, ["replay cancelled"], mode=self._replay_mode)
        try:
            result = await self._workers[worker].replay.remote(snippet, statement, names)
        except ray.exceptions.RayError as error:
            result = ReplayResult(ERROR_INFRA, [f"Lean worker failed: {error}"], mode=self._replay_mode)
        finally:
            self._replay_counts[result.verdict] += 1
            self._replay_tokens.put_nowait(worker)
        return result

    def stats(self) -> dict[str, Any]:
        """Counts by status, how often a REPL had to change header, slots in use, and replays by verdict."""
        return {
            "by_status": dict(self._counts),
            "replays": dict(self._replay_counts),
            "header_switches": self._scheduler.switches,
            "busy_slots": self._scheduler.busy,
            "slots": len(self._scheduler.slots),
            "queued": self._scheduler.queued,
        }

    async def close(self) -> None:
        """Close every worker's REPLs, then kill the workers; REPLs die with their worker whatever its state."""
        await asyncio.gather(*(worker.close.remote() for worker in self._workers), return_exceptions=True)
        for worker in self._workers:
            ray.kill(worker)


class LeanPool:
    """Picklable handle to a running pool: pass it to Ray Data actors and await checks from anywhere."""

    def __init__(self, router: ray.actor.ActorHandle) -> None:
        self._router = router

    @classmethod
    def start(cls, lean_cfg: Mapping[str, Any], name: str | None = None,
              verify: Mapping[str, Any] | None = None) -> LeanPool | KiminaPool:
        """Start workers and router for `lean_cfg` (a `conf/lean/*.yaml` mapping) and pre-warm headers.

        Give a `name` when other processes of the job should `attach` to this pool. `verify` is the job's
        `verify:` section: how `replay` works (None: no replay). With `lean=kimina` a running Kimina Lean Server
        checks instead (lean_pool/kimina.py): the handle has the same `check`, `replay`, `stats`, `shutdown`.
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
        router = LeanRouter.options(name=name, max_concurrency=int(cfg["max_queued"])).remote(cfg, replay)
        if cfg["prewarm_headers"] and cfg["prewarm_repls"]:
            ray.get(router.prewarm.remote(list(cfg["prewarm_headers"]), int(cfg["prewarm_repls"])))
        return cls(router)

    @classmethod
    def attach(cls, name: str = DEFAULT_POOL_NAME) -> LeanPool:
        """The pool another process of this Ray job started under `name`."""
        return cls(ray.get_actor(name))

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
        return await self._router.check.remote(snippet, timeout, mode, names, statement)

    async def replay(self, snippet: str, statement: str | None = None,
                     names: list[str] | None = None) -> ReplayResult | None:
        """Check a file the pool accepted once more, in a Lean process started for it alone and stopped after it
        (`verify.replay`); None when the replay is off. Same `statement` and `names` as `check`."""
        return await self._router.replay.remote(snippet, statement, names)

    async def check_many(
        self, snippets: Sequence[str], timeout: float | None = None, mode: CheckMode = "proof"
    ) -> list[CheckResult]:
        """Check several snippets concurrently; results in input order."""
        return list(await asyncio.gather(*(self.check(snippet, timeout, mode) for snippet in snippets)))

    def stats(self) -> dict[str, Any]:
        return ray.get(self._router.stats.remote())

    def shutdown(self) -> None:
        """Stop every REPL process and the pool's actors."""
        ray.get(self._router.close.remote())
        ray.kill(self._router)


def worker_resources(lean_cfg: Mapping[str, Any], replay: ReplaySettings) -> dict[str, float]:
    """What Ray reserves for one worker: each REPL's share, and as much for each replay slot (a replay process is
    another Lean importing the header, so it costs what a warm REPL costs)."""
    processes = int(lean_cfg["repls_per_worker"]) + (replay.slots_per_worker if replay.enabled else 0)
    per_repl = lean_cfg["resources_per_repl"]
    return {"num_cpus": float(per_repl["num_cpus"]) * processes,
            "memory": int(float(per_repl["memory_gb"]) * GIB * processes)}


def unplaceable_worker(resources: Mapping[str, float], nodes: Sequence[Mapping[str, float]]) -> str | None:
    """Why no node can hold a worker asking for `resources`, or None when one can.

    Ray would otherwise keep such a worker pending forever and every check would wait on it in silence.
    `nodes` are the `Resources` of the cluster's live nodes (Ray's `CPU` and `memory` keys).
    """
    if any(node.get("CPU", 0.0) >= resources["num_cpus"] and node.get("memory", 0.0) >= resources["memory"]
           for node in nodes):
        return None
    largest = max(nodes, key=lambda node: (node.get("CPU", 0.0), node.get("memory", 0.0)), default={})
    return (f"a Lean pool worker needs {resources['num_cpus']:g} CPUs and {resources['memory'] / GIB:.2f} GiB "
            f"(lean.repls_per_worker REPLs and verify.slots_per_worker replay slots when replaying, each "
            f"lean.resources_per_repl), but the largest Ray node has {largest.get('CPU', 0.0):g} CPUs and "
            f"{largest.get('memory', 0.0) / GIB:.2f} GiB: lower lean.resources_per_repl or lean.repls_per_worker, "
            f"or start Ray with more logical CPUs (ray.num_cpus=N)")


def plain_config(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """A Hydra DictConfig (or any mapping) as plain containers, so it pickles cheaply into actors."""
    if OmegaConf.is_config(cfg):
        return OmegaConf.to_container(cfg, resolve=True)
    return dict(cfg)
