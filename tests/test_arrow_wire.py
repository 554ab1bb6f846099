"""Arrow tables and schemas cross Ray processes through Arrow IPC in a job: rows, types and slices arrive intact, a
slice carries only its own rows, and a job's workers use it."""

from __future__ import annotations

import pyarrow as pa
import pytest
import ray

from operators.rows.candidates import CANDIDATE_SCHEMA, candidates_table
from pipelines import arrow_wire


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
    ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False, runtime_env=arrow_wire.RUNTIME_ENV)
    arrow_wire.register()
    yield
    ray.shutdown()


@ray.remote
def reducer_and_rows(table: pa.Table) -> tuple[str, list[str], pa.Schema]:
    """In a worker: the name of the reducer that pickles a table there, and what arrived."""
    return (ray.cloudpickle.CloudPickler.dispatch[pa.Table].__qualname__, table.column("candidate_id").to_pylist(),
            table.schema)


def test_a_jobs_workers_send_tables_through_ipc(job_ray):
    piece = wide_table(50).slice(10, 3)
    reducer, ids, schema = ray.get(reducer_and_rows.remote(piece))
    assert "_register_cloudpickle_serializer" in reducer  # ray.util.register_serializer's, not Ray's table reducer
    assert ids == ["c10", "c11", "c12"] and schema == CANDIDATE_SCHEMA
    assert ray.get(ray.put(piece)).equals(piece) and ray.get(ray.put(CANDIDATE_SCHEMA)) == CANDIDATE_SCHEMA
