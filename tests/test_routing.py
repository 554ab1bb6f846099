"""Header-affinity scheduling of checks onto REPL slots (pure asyncio, no Ray, no processes)."""

from __future__ import annotations

import asyncio

import pytest

from lean_pool.routing import NO_HEADER, HeaderScheduler, Slot

A, B = "import Mathlib", "import Mathlib.Tactic"


def scheduler(headers: list[str | None], depth: int = 1) -> HeaderScheduler:
    return HeaderScheduler([Slot(worker=0, index=i, header=h) for i, h in enumerate(headers)], depth=depth)


async def run_checks(sched: HeaderScheduler, headers: list[str], seconds: float = 0.002) -> list[int]:
    """Run checks with the given headers concurrently; returns the slot index each one ran on."""

    async def one(header: str) -> int:
        slot = await sched.acquire(header)
        await asyncio.sleep(seconds)
        sched.release(slot, header)
        return slot.index

    return list(await asyncio.gather(*(one(h) for h in headers)))


async def test_a_free_slot_holding_the_header_is_chosen():
    sched = scheduler([B, A, None])
    slot = await sched.acquire(A)
    assert slot.index == 1 and sched.switches == 0


async def test_alternating_headers_switch_each_repl_about_once():
    sched = scheduler([A, A, A, A])
    await run_checks(sched, [A if i % 2 else B for i in range(40)])
    assert sched.switches <= 2
    assert {slot.header for slot in sched.slots} == {A, B}


async def test_affinity_never_starves_a_header():
    sched = scheduler([A])
    first = await sched.acquire(A)
    waiting_b = asyncio.ensure_future(sched.acquire(B))
    waiting_a = [asyncio.ensure_future(sched.acquire(A)) for _ in range(3)]
    await asyncio.sleep(0)
    sched.release(first, A)
    await asyncio.sleep(0)
    # The younger A check runs first on the A REPL (no import) ...
    assert waiting_a[0].done() and not waiting_b.done()
    sched.release(waiting_a[0].result(), A)
    await asyncio.sleep(0)
    # ... but B, passed over once per slot in the pool, is served next although it costs a switch.
    assert waiting_b.done() and sched.switches == 1
    sched.release(waiting_b.result(), B)
    await asyncio.sleep(0)
    assert waiting_a[1].done()


async def test_switching_waits_until_the_queue_outweighs_an_import():
    sched = scheduler([A, B])
    sched.release(await sched.acquire(A), A, check_seconds=1.0, import_seconds=10.0)
    busy_a = await sched.acquire(A)
    idle_b = sched.slots[1]
    queued = [asyncio.ensure_future(sched.acquire(A)) for _ in range(10)]
    await asyncio.sleep(0)
    # 10 queued checks of 1 s on one REPL wait as long as one 10 s import: the B REPL stays idle.
    assert not any(task.done() for task in queued) and idle_b.in_flight == 0
    queued.append(asyncio.ensure_future(sched.acquire(A)))
    await asyncio.sleep(0)
    assert idle_b.in_flight == 1 and idle_b.header == A and sched.switches == 1
    for task in queued:
        task.cancel()
    sched.release(busy_a, A)


async def test_snippets_without_imports_run_anywhere_without_switching():
    sched = scheduler([A, B])
    indexes = await run_checks(sched, [NO_HEADER] * 6)
    assert set(indexes) <= {0, 1} and sched.switches == 0
    assert [slot.header for slot in sched.slots] == [A, B]


async def test_depth_hands_a_second_check_to_a_busy_repl_only_when_none_is_idle():
    sched = scheduler([A, A], depth=2)
    first, second, third, fourth = [await sched.acquire(A) for _ in range(4)]
    assert {first.index, second.index} == {0, 1} and {third.index, fourth.index} == {0, 1}
    blocked = asyncio.ensure_future(sched.acquire(A))
    await asyncio.sleep(0)
    assert sum(s.in_flight for s in sched.slots) == 4 and not blocked.done()
    blocked.cancel()
    with pytest.raises(asyncio.CancelledError):
        await blocked
    assert sched.queued == 0


async def test_a_cancelled_caller_never_leaks_its_slot():
    sched = scheduler([A])
    holder = await sched.acquire(A)
    waiter = asyncio.ensure_future(sched.acquire(A))
    await asyncio.sleep(0)
    sched.release(holder, A)  # the waiter is granted the slot ...
    waiter.cancel()  # ... but its caller goes away before it runs
    with pytest.raises(asyncio.CancelledError):
        await waiter
    assert sched.slots[0].in_flight == 0
    assert (await sched.acquire(A)).index == 0


async def test_checks_of_a_lower_priority_number_go_first_then_by_arrival():
    """A mining run numbers its plans' checks by the plan's age: an older plan's checks overtake a newer one's."""
    sched = scheduler([A])
    running = await sched.acquire(A)
    newer = [asyncio.ensure_future(sched.acquire(A, priority=2)) for _ in range(2)]
    older = [asyncio.ensure_future(sched.acquire(A, priority=1)) for _ in range(2)]
    await asyncio.sleep(0)
    served = []
    slot = running
    for _ in range(4):
        sched.release(slot, A)
        await asyncio.sleep(0)
        done = next(future for future in [*older, *newer] if future.done() and future not in served)
        served.append(done)
        slot = done.result()
    assert served == [*older, *newer]
    sched.release(slot, A)
