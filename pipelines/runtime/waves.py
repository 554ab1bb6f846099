"""A run's seeds as a sequence of bounded waves that overlap, so the endpoint never drains between them.

Ray Data keeps a record of every block a plan makes until the plan ends (ray-project/ray#66016), in the process that
executes the plan, so a night over all of Mathlib runs as waves of `ray.seeds_per_wave` seeds, each one Ray Data plan
executed in a process that exits with it (`execute_writing`): the driver keeps none of them. Run one after another,
each wave would end with its slowest candidate's repair and proof chain while the LLM endpoint idles, then spend its
start-up on new stage actors. So the next wave starts as soon as the current one's seeds have all come back from
discover (its head is done, only its stages after discover still work), and at most `ray.waves_in_flight` waves run
at once: the tail of one and the head of the next share the endpoint, the Lean pool and the driver's node. The pool
serves an older wave's Lean checks first, so waves end one after another rather than all together.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
from ray.data import Dataset

from lean_pool.ray_output import send_stderr_to
from lean_pool.ray_start import route_ray_logs, start_own_scheduling_group
from pipelines.runtime import arrow_wire

MIB = 2**20


@dataclass(frozen=True)
class SeedWave:
    """One wave's seed items: those still to discover (`units` discover calls in all) and those discovered before;
    its `index` in the run orders its Lean checks behind those of older waves."""

    index: int
    to_discover: list[dict[str, Any]]
    to_split: list[dict[str, Any]]

    @property
    def seeds(self) -> int:
        """The seeds this wave mines."""
        return len(self.to_discover) + len(self.to_split)

    @property
    def units(self) -> int:
        """The discover calls this wave makes: one per sample still to draw of each seed it discovers."""
        return sum(len(item["samples"]) for item in self.to_discover)


def seed_waves(to_discover: list[dict[str, Any]], to_split: list[dict[str, Any]], seeds_per_wave: int
               ) -> list[SeedWave]:
    """The waves a run executes, at most `seeds_per_wave` seeds each: seeds an earlier run discovered first (their
    candidates can be verified at once), then the seeds still to discover."""
    tagged = [(False, item) for item in to_split] + [(True, item) for item in to_discover]
    waves = [tagged[start:start + seeds_per_wave] for start in range(0, len(tagged), seeds_per_wave)]
    return [SeedWave(index, [item for discover, item in wave if discover],
                     [item for discover, item in wave if not discover]) for index, wave in enumerate(waves)]


def driver_rss_bytes() -> int:
    """The resident memory of this process (the driver, when called from a wave's thread)."""
    return psutil.Process().memory_info().rss


def wave_done_line(wave: SeedWave, waves: int, seconds: float, driver_rss: int, part: str = "") -> str:
    """What a run prints when a wave has written its last candidate: which wave of how many (of which `part` of a run
    that has several: a round, a sub-goal level), its seeds, how long it ran, and the driver's resident memory then,
    so a night's log shows whether the driver grows from wave to wave."""
    return (f"[wave] {f'{part}: ' if part else ''}{wave.index + 1}/{waves} done: "
            f"{wave.seeds} seeds in {seconds:.0f} s; driver RSS {driver_rss / MIB:.0f} MiB")


def may_start(index: int, waves: Sequence[SeedWave], running: int, discovered_units: int, in_flight: int) -> bool:
    """Whether wave `index` may start now: fewer than `in_flight` waves run, and every discover call of the waves
    before it has come back (`discovered_units` counts those of this start), so the waves' heads run in order and
    only tails overlap."""
    if running >= in_flight:
        return False
    return discovered_units >= sum(wave.units for wave in waves[:index])


class WaveThread(threading.Thread):
    """One wave executing in its own driver thread; what it raised is kept for the thread that waits on it.
    A daemon, so a run stopped by another wave's error exits without waiting for this one."""

    def __init__(self, execute: Callable[[SeedWave], None], wave: SeedWave, index: int) -> None:
        super().__init__(name=f"wave-{index}", daemon=True)
        self._execute = execute
        self._plan = wave
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self._execute(self._plan)
        except BaseException as error:  # noqa: BLE001 - handed to the waiting thread, which raises it
            self.error = error


def run_overlapping(waves: Sequence[SeedWave], execute: Callable[[SeedWave], None],
                    discovered_units: Callable[[], int], in_flight: int, check_every_s: float) -> None:
    """Execute every wave, starting each when `may_start` allows (checked every `check_every_s` seconds and whenever
    a wave ends); the first error a wave raises is raised here, once no other wave is started."""
    running: list[WaveThread] = []
    started = 0
    while started < len(waves) or running:
        if started < len(waves) and may_start(started, waves, len(running), discovered_units(), in_flight):
            thread = WaveThread(execute, waves[started], started)
            thread.start()
            running.append(thread)
            started += 1
            continue
        running[0].join(check_every_s)
        for thread in [thread for thread in running if not thread.is_alive()]:
            running.remove(thread)
            if thread.error is not None:
                raise thread.error


def executing_quietly(ray_log: Path) -> None:
    """Set up the process that executes a plan: a scheduling group of its own, and its Ray log records and
    standard error into the run's Ray log, so the job's terminal shows only the job's lines."""
    start_own_scheduling_group()
    route_ray_logs(ray_log)
    send_stderr_to(ray_log)
    arrow_wire.register()


def execute_collecting(ds: Dataset, ray_log: Path) -> list[dict[str, Any]]:
    """Every row of `ds`, executed in a process of its own set up as `execute_writing`'s: for a job whose rows are
    few enough to finish on the driver (`contribute`)."""
    executing_quietly(ray_log)
    return ds.take_all()


def execute_writing(ds: Dataset, path: str, filesystem: Any, rows_per_file: int | None, num_cpus: float,
                    ray_log: Path) -> None:
    """Execute `ds` into Parquet files under `path`: a plan's execution, in a process of its own
    (`pipelines.runtime.wiring.write`) that keeps the plan's Ray Data records, in a scheduling group of its own (its
    scheduling loop hands the plan's rows from stage to stage, and must not wait behind the next plan's start). Its
    Ray log records and standard error go to the run's Ray log, with the driver's."""
    executing_quietly(ray_log)
    ds.write_parquet(path, filesystem=filesystem, min_rows_per_file=rows_per_file,
                     ray_remote_args={"num_cpus": num_cpus})
