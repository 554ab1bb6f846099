"""The evaluation job: a benchmark's statements as candidate rows through the mining pipeline's own statement stages
(a statement check without repair, the triviality flag, the prove stage with every prover in `provers`), then
Success@t per prover and domain. `pipelines.evaluate` is the command that runs it.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import PurePosixPath
from typing import Any, cast

import pyarrow.fs as pafs
import ray
from omegaconf import DictConfig, OmegaConf, open_dict

from operators.rows.benchmark_items import (
    LEAN_SUFFIX,
    BenchmarkItem,
    candidate_row,
    layout_item,
    prover_models,
    table_item,
)
from operators.rows.candidates import (
    DISCOVERED,
    ERROR_INFRA,
    STATUSES,
    candidates_table,
)
from operators.storage import open_location
from pipelines.reporting import stats
from pipelines.reporting.markdown import success_markdown
from pipelines.reporting.run_data import load_run
from pipelines.reporting.summary import (
    Closing,
    closing_lines,
    report_hint,
    rows_by_status,
    written_cost,
)
from pipelines.runtime.benchmarks import read_table_file, read_text
from pipelines.runtime.cli import SetupError, WorkWritten, compose_config
from pipelines.runtime.job import Job, started
from pipelines.runtime.run_dir import PARQUET_SUFFIX, data_files
from pipelines.runtime.wiring import plan_steps, streamed, write

TABLE_COLUMNS = ("statement", "candidate_id", "id", "seed_id", "seed_path", "domain")


def load_config(overrides: Sequence[str]) -> DictConfig:
    """`conf/evaluate.yaml` with overrides; every prover named in `provers` gets a model role."""
    cfg = compose_config("evaluate", overrides)
    models = cast(dict[str, dict[str, Any]], OmegaConf.to_container(cfg.llm.models, resolve=True))
    with open_dict(cfg):
        cfg.llm.models = prover_models(models, list(cfg.provers), str(cfg.benchmark.prover_template_role))
    return cfg


def read_benchmark(cfg: DictConfig) -> list[tuple[BenchmarkItem, str]]:
    """Every statement of the benchmark with where it comes from, in a stable order; a `SetupError` when there is
    none (nothing to evaluate)."""
    statements = benchmark_statements(cfg)
    if not statements:
        raise SetupError(f"benchmark_dir={cfg.benchmark_dir} holds no statement: nothing to evaluate")
    return statements


def benchmark_statements(cfg: DictConfig) -> list[tuple[BenchmarkItem, str]]:
    """The statements at `benchmark_dir`: `.lean` files in the benchmark layout, else Parquet statements; a clear
    error when the location holds neither."""
    location = str(cfg.benchmark_dir)
    filesystem, root = open_location(location)
    info = filesystem.get_file_info(root)
    if info.type == pafs.FileType.File and root.endswith(PARQUET_SUFFIX):
        return _table_statements(filesystem, PurePosixPath(root).parent.as_posix(), [root], cfg)
    if info.type != pafs.FileType.Directory:
        raise SetupError(f"benchmark_dir={location} is neither a directory nor a Parquet file")
    files = data_files(filesystem, root)
    lean = [path for path in files if path.endswith(LEAN_SUFFIX)]
    if lean:
        items = []
        for path in lean:
            items.append((layout_item(path[len(root) + 1:], str(cfg.benchmark.seed_root)), read_text(filesystem, path)))
        return items
    tables = [path for path in files if path.endswith(PARQUET_SUFFIX)]
    if not tables:
        raise SetupError(f"benchmark_dir={location} holds no .lean benchmark files and no Parquet statements")
    return _table_statements(filesystem, root, tables, cfg)


def _table_statements(filesystem: pafs.FileSystem, root: str, paths: list[str], cfg: DictConfig
                      ) -> list[tuple[BenchmarkItem, str]]:
    items: list[tuple[BenchmarkItem, str]] = []
    for path in paths:
        table = read_table_file(filesystem, path, ["statement"])
        if "statement" not in table.column_names:
            raise SetupError(f"{path} has no `statement` column")
        columns = [name for name in TABLE_COLUMNS if name in table.column_names]
        source = path[len(root) + 1:].removesuffix(PARQUET_SUFFIX)
        records = table.select(columns).to_pylist()
        items += [(table_item(record, source, position, str(cfg.benchmark.default_domain)), record["statement"])
                  for position, record in enumerate(records) if record["statement"]]
    ids = [item.candidate_id for item, _ in items]
    if len(ids) != len(set(ids)):
        raise SetupError("the benchmark tables give two statements the same id; give each a unique `candidate_id`")
    return items


class EvaluationJob(Job):
    """A job whose statements come from a benchmark, read before the job starts: it writes candidate rows as mining
    does, and redoes only the statements without a finished one."""

    JOB = "evaluate"
    TABLES = ("candidates",)
    PLAN_TABLE = "candidates"
    INPUTS = frozenset({DISCOVERED})

    def finished_candidate_ids(self) -> set[str]:
        """The ids of candidates already written with a finished status (for jobs whose inputs are few enough to
        filter on the driver, like a benchmark's statements)."""
        self.run.prepare("candidates", {ERROR_INFRA})
        return self.run.ids("candidates", "candidate_id")


def evaluate(job: EvaluationJob, statements: list[tuple[BenchmarkItem, str]]) -> None:
    """Check, flag and prove every benchmark statement without a finished row, into candidates/."""
    finished = job.finished_candidate_ids()
    now = datetime.now(UTC)
    rows = [candidate_row(item, text, job.provenance, now) for item, text in statements
            if item.candidate_id not in finished]
    if not rows:
        return
    table = candidates_table(rows)
    block = int(job.cfg.benchmark.rows_per_block)
    ds = ray.data.from_arrow([table.slice(start, block) for start in range(0, table.num_rows, block)])
    write(job, streamed(ds, plan_steps(job, job.pipeline.stages), job.board), "candidates",
               rows_per_file=int(job.cfg.output.rows_per_file))


def summary(job: EvaluationJob) -> list[str]:
    """The closing block: where the table is, its rows by status, Success@t per prover and domain with the union,
    what the run cost, what to run next."""
    run = load_run(job.run.uri)
    candidates = run.candidates
    rows = candidates.height
    written = {"candidates/": (job.run.table_uri("candidates"), f"{rows} rows")} if rows else {}
    counts = {"candidates": rows_by_status(candidates["status"].to_list(), STATUSES)}
    success = stats.success_at(candidates, run.max_repairs(), list(job.cfg.benchmark.domains))
    details = ["", success_markdown(success, run.max_repairs()), ""]
    cost = job.cost_lines(written_cost([candidates.select("llm_calls", "lean_checks", "proofs").to_arrow()]))
    return closing_lines(Closing(job.run.uri, written, counts, details, cost, simulated=job.simulated,
                                 next_step=report_hint(job.run.uri) if candidates.height else None))


def run(cfg: DictConfig, work: WorkWritten) -> None:
    """Run or resume the evaluation `cfg` describes: the benchmark read (none is a `SetupError`), its statements
    proved, and the closing block once the table is written (`work` marked then)."""
    statements = read_benchmark(cfg)
    with started(EvaluationJob, cfg) as job:
        evaluate(job, statements)
        lines = summary(job)
        work.mark()
        print("\n".join(lines), flush=True)
