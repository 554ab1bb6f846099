"""A run's seeds as a sequence of bounded Ray Data plans that overlap, so the endpoint never drains between them.

Ray Data keeps a record of every block a plan makes until the plan ends (ray-project/ray#66016), in the process that
executes the plan, so a night over all of Mathlib runs as plans of `ray.seeds_per_plan` seeds, each executed in a
process that exits with it (`execute_writing`): the driver keeps none of them. Run one after another, each plan
would end with its slowest candidate's repair and proof chain while the LLM endpoint idles, then spend its start-up
on new stage actors. So the next plan starts as soon as the current one's seeds have all come back from discover
(its head is done, only its verify stages still work), and at most `ray.plans_in_flight` plans run at once: the
tail of one and the head of the next share the endpoint, the Lean pool and the driver's node. The pool serves an
older plan's Lean checks first, so plans end one after another rather than all together.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
from ray.data import Dataset

from lean_pool.ray_start import route_ray_logs, send_stderr_to, start_own_session
from pipelines.runtime import arrow_wire

MIB = 2**20


@dataclass(frozen=True)
class SeedPlan:
    """One plan's seed items: those still to discover (`units` discover calls in all) and those discovered before;
    its `index` in the run orders its Lean checks behind those of older plans."""

    index: int
    to_discover: list[dict[str, Any]]
    to_split: list[dict[str, Any]]

    @property
    def seeds(self) -> int:
        """The seeds this plan mines."""
        return len(self.to_discover) + len(self.to_split)

    @property
    def units(self) -> int:
        """The discover calls this plan makes: one per sample still to draw of each seed it discovers."""
        return sum(len(item["samples"]) for item in self.to_discover)


def seed_plans(to_discover: list[dict[str, Any]], to_split: list[dict[str, Any]], seeds_per_plan: int
               ) -> list[SeedPlan]:
    """The plans a run executes, at most `seeds_per_plan` seeds each: seeds an earlier run discovered first (their
    candidates can be verified at once), then the seeds still to discover."""
    tagged = [(False, item) for item in to_split] + [(True, item) for item in to_discover]
    plans = [tagged[start:start + seeds_per_plan] for start in range(0, len(tagged), seeds_per_plan)]
    return [SeedPlan(index, [item for discover, item in plan if discover],
                     [item for discover, item in plan if not discover]) for index, plan in enumerate(plans)]


def driver_rss_bytes() -> int:
    """The resident memory of this process (the driver, when called from a plan's thread)."""
    return psutil.Process().memory_info().rss


def plan_done_line(plan: SeedPlan, plans: int, seconds: float, driver_rss: int, part: str = "") -> str:
    """What a run prints when a plan has written its last candidate: which plan of how many (of which `part` of a run
    that has several: a round, a sub-goal level), its seeds, how long it ran, and the driver's resident memory then,
    so a night's log shows whether the driver grows from plan to plan."""
    return (f"[plan] {f'{part}: ' if part else ''}{plan.index + 1}/{plans} done: {plan.seeds} seeds in {seconds:.0f} s; "
            f"driver RSS {driver_rss / MIB:.0f} MiB")


def may_start(index: int, plans: Sequence[SeedPlan], running: int, discovered_units: int, in_flight: int) -> bool:
    """Whether plan `index` may start now: fewer than `in_flight` plans run, and every discover call of the plans
    before it has come back (`discovered_units` counts those of this start), so the plans' heads run in order and
    only tails overlap."""
    if running >= in_flight:
        return False
    return discovered_units >= sum(plan.units for plan in plans[:index])


class PlanThread(threading.Thread):
    """One plan executing in its own driver thread; what it raised is kept for the thread that waits on it.
    A daemon, so a run stopped by another plan's error exits without waiting for this one."""

    def __init__(self, execute: Callable[[SeedPlan], None], plan: SeedPlan, index: int) -> None:
        super().__init__(name=f"plan-{index}", daemon=True)
        self._execute = execute
        self._plan = plan
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self._execute(self._plan)
        except BaseException as error:  # noqa: BLE001 - handed to the waiting thread, which raises it
            self.error = error


def run_overlapping(plans: Sequence[SeedPlan], execute: Callable[[SeedPlan], None],
                    discovered_units: Callable[[], int], in_flight: int, check_every_s: float) -> None:
    """Execute every plan, starting each when `may_start` allows (checked every `check_every_s` seconds and whenever
    a plan ends); the first error a plan raises is raised here, once no other plan is started."""
    running: list[PlanThread] = []
    started = 0
    while started < len(plans) or running:
        if started < len(plans) and may_start(started, plans, len(running), discovered_units(), in_flight):
            thread = PlanThread(execute, plans[started], started)
            thread.start()
            running.append(thread)
            started += 1
            continue
        running[0].join(check_every_s)
        for thread in [thread for thread in running if not thread.is_alive()]:
            running.remove(thread)
            if thread.error is not None:
                raise thread.error


def execute_writing(ds: Dataset, path: str, filesystem: Any, rows_per_file: int | None, num_cpus: float,
                    ray_log: Path) -> None:
    """Execute `ds` into Parquet files under `path`: a plan's execution, in a process of its own
    (`pipelines.mine.write`) that keeps the plan's Ray Data records, in a session of its own (its scheduling loop
    hands the plan's rows from stage to stage, and must not wait behind the next plan's start). Its Ray log records
    and standard error go to the run's Ray log, with the driver's."""
    start_own_session()
    route_ray_logs(ray_log)
    send_stderr_to(ray_log)
    arrow_wire.register()
    ds.write_parquet(path, filesystem=filesystem, min_rows_per_file=rows_per_file,
                     ray_remote_args={"num_cpus": num_cpus})
