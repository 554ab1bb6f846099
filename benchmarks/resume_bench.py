"""How should a resumed run skip finished rows? Ray Data's CheckpointConfig vs an anti-join on written ids.

Run: `python benchmarks/resume_bench.py [rows=4000] [done=0.5] [work_ms=2]`. A one-to-one plan (read ids ->
per-row work -> write Parquet), as the stages after discover are, resumed with a fraction `done` of its rows already
written, once per mechanism: wall time of the resumed run, rows it processed again, and the logical CPUs
Ray had to leave free. The last line is machine-readable.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import ray
from ray.data.checkpoint import CheckpointConfig


def work(batch: pa.Table, work_ms: float) -> pa.Table:
    """The stand-in for a stage: a fixed cost per row."""
    time.sleep(batch.num_rows * work_ms / 1000)
    return batch.append_column("done_at", pa.array([time.time()] * batch.num_rows))


def without_ids(batch: pa.Table, finished: list) -> pa.Table:
    return batch.filter(pc.invert(pc.is_in(batch.column("id"), value_set=ray.get(finished[0]))))


def counted(rows_dir: Path) -> int:
    return sum(pq.read_metadata(path).num_rows for path in rows_dir.glob("*.parquet"))


def checkpointed(work_dir: Path, source: Path, first: Path, work_ms: float) -> tuple[float, int]:
    """First run on the finished ids only, then the full input: CheckpointConfig drops what was written."""
    context = ray.data.DataContext.get_current()
    context.checkpoint_config = CheckpointConfig(id_column="id", checkpoint_path=str(work_dir / "ckpt"),
                                                 delete_checkpoint_on_success=False)
    try:
        ray.data.read_parquet(str(first)).map_batches(work, fn_kwargs={"work_ms": work_ms}, batch_format="pyarrow") \
            .write_parquet(str(work_dir / "out"))
        before = counted(work_dir / "out")
        started = time.perf_counter()
        ray.data.read_parquet(str(source)).map_batches(work, fn_kwargs={"work_ms": work_ms}, batch_format="pyarrow") \
            .write_parquet(str(work_dir / "out"))
        return time.perf_counter() - started, counted(work_dir / "out") - before
    finally:
        context.checkpoint_config = None


def anti_joined(work_dir: Path, source: Path, first: Path, work_ms: float) -> tuple[float, int]:
    """First run on the finished ids only, then the full input minus the ids read back from the output."""
    ray.data.read_parquet(str(first)).map_batches(work, fn_kwargs={"work_ms": work_ms}, batch_format="pyarrow") \
        .write_parquet(str(work_dir / "out"))
    before = counted(work_dir / "out")
    started = time.perf_counter()
    ids = pa.concat_tables([pq.read_table(p, columns=["id"]) for p in (work_dir / "out").glob("*.parquet")])
    finished = ray.put(ids.column("id").combine_chunks())
    ray.data.read_parquet(str(source)).map_batches(without_ids, fn_kwargs={"finished": [finished]},
                                                   batch_format="pyarrow") \
        .map_batches(work, fn_kwargs={"work_ms": work_ms}, batch_format="pyarrow").write_parquet(str(work_dir / "out"))
    return time.perf_counter() - started, counted(work_dir / "out") - before


def main(argv: list[str]) -> None:
    options = {"rows": "4000", "done": "0.5", "work_ms": "2"}
    options.update(arg.split("=", 1) for arg in argv)
    rows, done, work_ms = int(options["rows"]), float(options["done"]), float(options["work_ms"])
    ray.init(num_cpus=4, include_dashboard=False, log_to_driver=False)
    results = {}
    with tempfile.TemporaryDirectory() as scratch:
        base = Path(scratch)
        ids = pa.table({"id": [f"seed/s0/c{i}" for i in range(rows)]})
        pq.write_table(ids, base / "all.parquet")
        pq.write_table(ids.slice(0, int(rows * done)), base / "first.parquet")
        for name, mechanism in (("checkpoint", checkpointed), ("anti_join", anti_joined)):
            (base / name).mkdir()
            results[name] = mechanism(base / name, base / "all.parquet", base / "first.parquet", work_ms)
            print(f"{name}: resumed in {results[name][0]:.2f}s, processed {results[name][1]} of "
                  f"{rows - int(rows * done)} remaining rows")
    ray.shutdown()
    print(f"checkpoint_s={results['checkpoint'][0]:.2f} anti_join_s={results['anti_join'][0]:.2f} "
          f"checkpoint_vs_anti_join={results['checkpoint'][0] / results['anti_join'][0]:.2f}")


if __name__ == "__main__":
    main(sys.argv[1:])
