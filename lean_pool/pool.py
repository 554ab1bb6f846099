"""A pool of warm Lean REPLs on Ray, shared by every caller in a job.

Workers are Ray actors that each own `repls_per_worker` REPL sessions and reserve CPU and memory per
REPL, so Ray never packs more REPLs on a node than its RAM holds. A single router actor knows every
REPL slot and which header it has imported; it sends each check to a free slot that already holds
the check's header, so `import Mathlib` is paid once per REPL rather than once per check. Callers
(Ray Data actors, the CLI) hold a picklable `LeanPool` handle and `await pool.check(...)`.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import ray
from omegaconf import OmegaConf

from lean_pool.header import split_header
from lean_pool.launch import GIB, build_launch, provenance
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

    def __init__(self, lean_cfg: dict[str, Any]) -> None:
        launch = build_launch(lean_cfg)
        self._provenance = provenance(lean_cfg)
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

    async def warm(self, slot: int, header: str) -> float | None:
        """Import `header` on a slot ahead of time; the seconds it took, None when it failed."""
        outcome = await self._sessions[slot].run(header + "\n", self._import_timeout, axioms_for=())
        return outcome.header_import_seconds if outcome.kind == "ok" and outcome.answer is not None else None

    async def close(self) -> None:
        await asyncio.gather(*(session.close() for session in self._sessions))


@ray.remote(num_cpus=0)
class LeanRouter:
    """Routes checks to REPL slots with header affinity; its concurrency bound is the pool's queue bound."""

    def __init__(self, lean_cfg: dict[str, Any]) -> None:
        repls = int(lean_cfg["repls_per_worker"])
        per_repl = lean_cfg["resources_per_repl"]
        worker_options = {
            "num_cpus": float(per_repl["num_cpus"]) * repls,
            "memory": int(float(per_repl["memory_gb"]) * GIB * repls),
            "max_concurrency": repls * int(lean_cfg["checks_in_flight_per_repl"]) + 1,
        }
        self._workers = [LeanWorker.options(**worker_options).remote(lean_cfg) for _ in range(int(lean_cfg["workers"]))]
        slots = [Slot(worker=w, index=i) for w in range(len(self._workers)) for i in range(repls)]
        self._scheduler = HeaderScheduler(slots, depth=int(lean_cfg["checks_in_flight_per_repl"]))
        self._timeout = float(lean_cfg["timeout_s"])
        self._counts: Counter[str] = Counter()

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

    def stats(self) -> dict[str, Any]:
        """Counts by status, how often a REPL had to change header, and slots in use."""
        return {
            "by_status": dict(self._counts),
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
    def start(cls, lean_cfg: Mapping[str, Any], name: str | None = None) -> LeanPool:
        """Start workers and router for `lean_cfg` (a `conf/lean/*.yaml` mapping) and pre-warm headers.

        Give a `name` when other processes of the job should `attach` to this pool.
        """
        cfg = plain_config(lean_cfg)
        build_launch(cfg)  # fail here, in the caller, with a clear message when Lean is missing
        router = LeanRouter.options(name=name, max_concurrency=int(cfg["max_queued"])).remote(cfg)
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


def plain_config(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """A Hydra DictConfig (or any mapping) as plain containers, so it pickles cheaply into actors."""
    if OmegaConf.is_config(cfg):
        return OmegaConf.to_container(cfg, resolve=True)
    return dict(cfg)
