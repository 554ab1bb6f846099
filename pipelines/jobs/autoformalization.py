"""The autoformalization job: informal statements through autoformalize (the mode's operator) and faithfulness into
formalizations/, one row per input row whatever happened to it. `pipelines.autoformalize` is the command that runs
it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import PurePosixPath

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import ray
from omegaconf import DictConfig, open_dict

from operators.autoformalize.agent_tools import example_pair
from operators.rows.formalizations import (
    AGENT,
    ERROR_INFRA,
    FORMALIZATION_SCHEMA,
    PENDING,
    STATUSES,
    FormalizationRow,
    InputRules,
    formalizations_table,
    jsonl_rows,
    table_rows,
    with_unique_ids,
)
from operators.storage import open_location
from pipelines.reporting.summary import (
    Closing,
    closing_lines,
    report_hint,
    rows_by_status,
    written_cost,
)
from pipelines.runtime.cli import SetupError, WorkWritten, compose_config
from pipelines.runtime.job import Job, started
from pipelines.runtime.run_dir import PARQUET_SUFFIX, data_files
from pipelines.runtime.wiring import plan_steps, streamed, write

TABLE = "formalizations"
JSONL_SUFFIX = ".jsonl"


def load_config(overrides: Sequence[str], complete: bool = True) -> DictConfig:
    """`conf/autoformalize.yaml` with overrides (`mode=` is short for `autoformalize.mode=`); the repairs are grounded
    whenever there is an index to ground in. `complete=False` for a reader of its settings that runs nothing (no
    `input` needed)."""
    modes = [item for item in overrides if item.startswith("mode=")]
    rest = [item for item in overrides if not item.startswith("mode=")]
    cfg = compose_config("autoformalize", [*rest, *(f"autoformalize.{item}" for item in modes)], complete)
    with open_dict(cfg):
        cfg.grounding.enabled = cfg.index.dir is not None
    return cfg


def input_files(location: str) -> tuple[pafs.FileSystem, list[str]]:
    """The JSONL and Parquet files at `location` (a file, or a directory searched recursively), sorted."""
    filesystem, path = open_location(location)
    info = filesystem.get_file_info(path)
    if info.type == pafs.FileType.File:
        files = [path]
    elif info.type == pafs.FileType.Directory:
        files = data_files(filesystem, path)
    else:
        raise SetupError(f"input={location} does not exist")
    usable = [file for file in files if file.endswith((JSONL_SUFFIX, PARQUET_SUFFIX))]
    if not usable:
        raise SetupError(f"input={location} holds no {JSONL_SUFFIX} or {PARQUET_SUFFIX} file")
    return filesystem, usable


def read_bytes(filesystem: pafs.FileSystem, path: str, key: str) -> bytes:
    """The bytes of an input file; one it cannot read is a `SetupError` naming it (`key` is the setting that led
    to it)."""
    try:
        with filesystem.open_input_stream(path) as stream:
            return stream.read()
    except OSError as error:
        raise SetupError(f"{key}: cannot read {path}: {error}") from None


def read_parquet(filesystem: pafs.FileSystem, path: str, key: str) -> list[dict]:
    """The records of a Parquet input file; a file that is not Parquet, or is cut short, is a `SetupError` naming
    it (`key` is the setting that led to it)."""
    try:
        return pq.read_table(path, filesystem=filesystem).to_pylist()
    except (pa.ArrowException, OSError) as error:
        raise SetupError(f"{key}: {path} is not a readable Parquet file: {error}") from None


def read_problems(cfg: DictConfig, filesystem: pafs.FileSystem, files: list[str]) -> list[FormalizationRow]:
    """Every row of the input files as a formalization row without its provenance, in input order, ids unique;
    unusable rows are `bad_input` with their line or row number. A file that cannot be read at all is a
    `SetupError` naming it, raised before anything starts."""
    rules = InputRules(max_tokens=int(cfg.autoformalize.max_input_tokens),
                       chars_per_token=float(cfg.seeds.chars_per_token),
                       default_header=str(cfg.autoformalize.default_header))
    mode = str(cfg.autoformalize.mode)
    key = f"input={cfg.input}"
    rows = []
    for path in files:
        source = PurePosixPath(path).name
        if path.endswith(JSONL_SUFFIX):
            rows += jsonl_rows(read_bytes(filesystem, path, key), source, rules, None, mode)
        else:
            rows += table_rows(read_parquet(filesystem, path, key), source, rules, None, mode)
    return with_unique_ids(rows)


def read_examples(location: str) -> tuple[dict[str, str], ...]:
    """The agent's examples corpus: every informal/formal pair of the files at `location` (records lacking either
    are left out); an empty corpus, or a file or line that cannot be read, is a `SetupError`."""
    filesystem, files = input_files(location)
    key = f"autoformalize.agent.examples={location}"
    records: list[dict] = []
    for path in files:
        if not path.endswith(JSONL_SUFFIX):
            records += read_parquet(filesystem, path, key)
            continue
        lines = read_bytes(filesystem, path, key).decode("utf-8", errors="replace").splitlines()
        for number, line in enumerate(lines, start=1):
            try:
                record = json.loads(line) if line.strip() else {}
            except json.JSONDecodeError as error:
                raise SetupError(f"{key}: {path} line {number} is not JSON: {error}") from None
            if not isinstance(record, dict):
                raise SetupError(f"{key}: {path} line {number} is not a JSON object")
            records.append(record)
    pairs = tuple(pair for pair in map(example_pair, records) if pair is not None)
    if not pairs:
        raise SetupError(f"{key} holds no informal/formal pair")
    return pairs


class AutoformalizeJob(Job):
    """A job whose inputs are informal statements, read before anything starts, with the agent's examples."""

    JOB = "autoformalize"
    TABLES = (TABLE,)
    PLAN_TABLE = TABLE
    INPUTS = frozenset({PENDING})

    def find_inputs(self) -> None:
        """The input rows and the agent's examples, read before Ray starts and the run directory is touched (a wrong
        path or a file that cannot be read is a `SetupError` at once); the rows get the job's provenance once it is
        known."""
        filesystem, files = input_files(str(self.cfg.input))
        self.problems = read_problems(self.cfg, filesystem, files)
        if not self.problems:
            raise SetupError(f"input={self.cfg.input} holds no rows: nothing to formalize")
        agent = self.cfg.autoformalize.agent
        use_examples = self.cfg.autoformalize.mode == AGENT and agent.examples is not None
        self.examples = read_examples(str(agent.examples)) if use_examples else None


def autoformalize(job: AutoformalizeJob) -> int:
    """Formalize every input row without a finished row in formalizations/; returns how many were sent."""
    job.run.prepare(TABLE, {ERROR_INFRA})
    done = job.run.ids(TABLE, "id")
    rows = [{**row, "provenance": dict(job.provenance)} for row in job.problems if row["id"] not in done]
    if not rows:
        return 0
    if job.cfg.index.dir is None:
        print("retrieve: skipped (no index.dir): drafts see no Mathlib declarations, repairs are not grounded, "
              "faithfulness looks up no definitions, mode=got grounds no concept (every one is defined anew) and "
              "mode=agent has no search_declarations", flush=True)
    table = formalizations_table(rows)
    block = int(job.cfg.autoformalize.rows_per_block)
    ds = ray.data.from_arrow([table.slice(start, block) for start in range(0, table.num_rows, block)])
    write(job, streamed(ds, plan_steps(job, job.pipeline.stages), job.board), TABLE,
               rows_per_file=int(job.cfg.output.rows_per_file))
    return len(rows)


def summary(job: AutoformalizeJob, sent: int) -> list[str]:
    """The closing block: where the table is, its rows by status (and how many this start formalized, in which
    mode), what the run cost, what to run next."""
    table = job.run.read(TABLE, FORMALIZATION_SCHEMA, ["status", "llm_calls", "lean_checks"])
    written = {f"{TABLE}/": (job.run.table_uri(TABLE), f"{table.num_rows} rows")} if table.num_rows else {}
    counts = {TABLE: rows_by_status(table.column("status").to_pylist(), STATUSES)}
    details = [f"formalized in this start: {sent} (mode={job.cfg.autoformalize.mode})"]
    hint = report_hint(job.run.uri) if table.num_rows else None
    return closing_lines(Closing(job.run.uri, written, counts, details, job.cost_lines(written_cost([table])),
                                 simulated=job.simulated, next_step=hint))


def run(cfg: DictConfig, work: WorkWritten) -> None:
    """Run or resume the autoformalization `cfg` describes and print its closing block once the table is written
    (`work` marked then)."""
    with started(AutoformalizeJob, cfg) as job:
        sent = autoformalize(job)
        lines = summary(job, sent)
        work.mark()
        print("\n".join(lines), flush=True)
