"""Arrow tables and schemas cross Ray processes through Arrow IPC in a job: rows, types and slices arrive intact, a
slice carries only its own rows, and the stages of a job use it."""

from __future__ import annotations

import os

import pyarrow as pa
import pytest
import ray

from operators.rows.candidates import CANDIDATE_SCHEMA, candidates_table
from pipelines.runtime import arrow_wire


def wide_table(rows: int) -> pa.Table:
    """Candidate rows (the widest, most nested table a run moves) with attempts, so every nested type is filled."""
    attempt = {"code": "theorem t : True := trivial", "status": "error", "response": "x" * 200,
               "diagnostics": [{"severity": "error", "line": 1, "column": 2, "message": "unknown identifier"}]}
    return candidates_table([{"candidate_id": f"c{i}", "seed_id": "s", "status": "compiled",
                              "formalize_attempts": [attempt] * 3, "statement_raw": "y" * 500} for i in range(rows)])


def test_a_slice_goes_through_ipc_intact_and_alone():
    table = wide_table(200)
    piece = table.slice(37, 2)
    wire = arrow_wire.table_to_ipc(piece)
    back = arrow_wire.table_from_ipc(wire)
    assert back.equals(piece) and back.schema == CANDIDATE_SCHEMA
    assert wire.size * 20 < arrow_wire.table_to_ipc(table).size  # the slice's rows, not the whole table's buffers


@pytest.fixture
def job_ray():
    ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False)
    arrow_wire.register()
    yield
    ray.shutdown()


@pytest.mark.ray
def test_wired_stages_send_their_blocks_through_ipc(job_ray):
    """A stage class on an actor and a stage function in a task, each wired, write their blocks through IPC. (Both
    are defined here so that they travel by value: workers cannot import a test module.)"""

    def table_reducer() -> str:
        reducer = ray.cloudpickle.CloudPickler.dispatch.get(pa.Table)
        return reducer.__qualname__ if reducer else "none"

    class ReducerColumn:
        """A stage that adds a column naming the reducer its process pickles tables with."""

        def __call__(self, batch: pa.Table) -> pa.Table:
            return batch.append_column("reducer", pa.array([table_reducer()] * batch.num_rows))

    def reducer_column(batch: pa.Table) -> pa.Table:
        return ReducerColumn()(batch)

    piece = wide_table(50).slice(10, 3)
    for operator, options in ((ReducerColumn, {"compute": ray.data.ActorPoolStrategy(size=1)}), (reducer_column, {})):
        out = ray.data.from_blocks([piece]).map_batches(arrow_wire.wired(operator), batch_format="pyarrow",
                                                        num_cpus=0.5, **options).to_arrow_refs()
        table = pa.concat_tables(ray.get(out))  # one block, or its rows in several when Ray Data splits it
        assert table.column("candidate_id").to_pylist() == ["c10", "c11", "c12"]
        (reducer,) = set(table.column("reducer").to_pylist())
        assert "_register_cloudpickle_serializer" in reducer  # ray.util.register_serializer's, not Ray's own
        assert table.schema.remove(table.schema.get_field_index("reducer")) == CANDIDATE_SCHEMA
    assert ray.get(ray.put(piece)).equals(piece) and ray.get(ray.put(CANDIDATE_SCHEMA)) == CANDIDATE_SCHEMA


@pytest.mark.ray
def test_a_wired_stage_actor_runs_in_a_scheduling_group_of_its_own(job_ray):
    """So the next plan's actors starting beside it share one group's part of the CPU, not each of theirs
    (`lean_pool.ray_start.start_own_scheduling_group`); it still leads its process group, which Ray signals when it
    ends."""

    class SessionColumn:
        """A stage that adds whether its process leads its session and its process group, and its session."""

        def __call__(self, batch: pa.Table) -> pa.Table:
            leads = os.getsid(0) == os.getpgid(0) == os.getpid()
            return batch.append_column("leads", pa.array([leads] * batch.num_rows)).append_column(
                "session", pa.array([os.getsid(0)] * batch.num_rows))

    out = ray.data.from_blocks([wide_table(2)]).map_batches(
        arrow_wire.wired(SessionColumn), batch_format="pyarrow", num_cpus=0.5,
        compute=ray.data.ActorPoolStrategy(size=1)).take_all()
    assert {row["leads"] for row in out} == {True}
    assert os.getsid(0) not in {row["session"] for row in out}
