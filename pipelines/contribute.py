"""`python -m pipelines.contribute run_dir=DIR [mathlib_dir=CHECKOUT] [out=DIR]`: a run's proved lemmas as changes
Mathlib would take.

Each candidate a user would offer (proved, not trivial, faithful enough, not a duplicate or a benchmark's
restatement: `contribute.statuses`, `contribute.min_faithfulness`) is placed in its seed file after the last
declaration it uses, in the namespace there, with the context it needs; named by Mathlib's conventions (an LLM
proposes a name where the mined one fails the checker); proved by the shortest closing tactic that passes the sound
verdict, or its mined proof. Each file's lemmas become one patch against `mathlib_dir` (`git apply` takes it) once the
patched file passed the pool, and one pull-request description. `contributions/` in the run has a row per lemma,
offered or not and why; `report` counts it and `export` ships it.
"""

from __future__ import annotations

from lean_pool.command_line import hold_stops

if __name__ == "__main__":
    hold_stops()  # the imports below take seconds: a Ctrl-C or SIGTERM meanwhile stops the job in one line

import asyncio
import sys
from collections import Counter, defaultdict
from collections.abc import Sequence
from datetime import datetime, timezone
from typing import Any

import ray

from lean_pool.launch import LeanSetupError
from operators.contribute.patches import home_namespace, mined_name, placed
from operators.llm.errors import LLMConfigError
from operators.storage import is_uri
from operators.rows.contributions import (
    NOT_PLACED,
    PENDING,
    STATUSES,
    contributions_table,
    new_contribution,
    offer_refusal,
)
from pipelines.reporting.run_data import load_run
from pipelines.reporting.summary import Closing, closing_lines, rows_by_status, written_cost
from pipelines.runtime.cli import WorkWritten, compose_config, run_job
from pipelines.runtime.contributing import (
    DESCRIPTIONS,
    PATCHES,
    TABLE,
    ContributeJob,
    FileOutcome,
    clear,
    finish_file,
    index_names,
    patch_paths,
    refused_patches_in_one_line,
    write_text,
)
from pipelines.runtime.job import started
from pipelines.runtime.stages import streamed
from pipelines.runtime.waves import execute_collecting


def offered_rows(job: ContributeJob) -> tuple[list[dict[str, Any]], Counter[str]]:
    """A contribution row for each candidate of the run that is offered, and why the others are not."""
    cfg = job.cfg.contribute
    now = datetime.now(timezone.utc)
    rows, refused = [], Counter()
    for candidate in load_run(job.run.uri).candidates.iter_rows(named=True):
        why = offer_refusal(candidate, list(cfg.statuses), float(cfg.min_faithfulness))
        if why is None:
            rows.append(new_contribution(candidate, job.manifest["run_id"], job.simulated, now))
        else:
            refused[why] += 1
    return rows, refused


def locate(rows: list[dict[str, Any]], seeds: dict[str, str | None], dropped_context: Sequence[str]) -> None:
    """The mined name and the namespace each lemma will live in (placement under the mined names); a lemma whose seed
    file the checkout lacks is `not_placed`."""
    for file, file_rows in by_file(rows).items():
        if seeds[file] is None:
            for row in file_rows:
                row.update(status=NOT_PLACED, reason=f"{file} is not in the Mathlib checkout (or not UTF-8)")
            continue
        where = {p.candidate_id: p for p in placed(seeds[file], file_rows, dropped_context, renamed=False).placements}
        for row in file_rows:
            spot = where[row["candidate_id"]]
            row.update(old_name=mined_name(row["statement"])[0], namespace=home_namespace(spot.namespace, spot.anchor))


def by_file(rows: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Pending rows grouped by their Mathlib file, in candidate order."""
    files: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        if row["status"] == PENDING:
            files[row["file"]].append(row)
    return dict(files)


def contribute(job: ContributeJob) -> tuple[list[dict[str, Any]], list[FileOutcome], Counter[str]]:
    """The method: offered rows located, named and shortened (a Ray Data plan), then each file placed, checked and
    written; the rows, the files and why the other candidates were not offered."""
    rows, refused = offered_rows(job)
    seeds = {file: job.mathlib.read(file) for file in {row["file"] for row in rows}}
    locate(rows, seeds, list(job.cfg.contribute.dropped_context))
    pending = [row for row in rows if row["status"] == PENDING]
    if pending:
        plan = streamed(ray.data.from_arrow(contributions_table(pending)), job.stages(), job.board)
        done = {row["candidate_id"]: row for row in job.off_the_driver(execute_collecting, plan, job.ray_log)}
        rows = [done.get(row["candidate_id"], row) for row in rows]
    index = index_names(job.cfg)

    async def finish() -> list[FileOutcome]:
        files = by_file(rows)
        return list(await asyncio.gather(*(finish_file(job, file, seeds[file], file_rows, index)
                                           for file, file_rows in sorted(files.items()))))

    outcomes = asyncio.run(finish())
    write(job, rows, outcomes)
    return rows, outcomes, refused


def write(job: ContributeJob, rows: list[dict[str, Any]], outcomes: list[FileOutcome]) -> None:
    """This start's patches and descriptions under `out` (an earlier start's removed first) and `contributions/`."""
    with refused_patches_in_one_line(job.output):
        clear(job.output, [PATCHES, DESCRIPTIONS])
        job.output.claim()
        for outcome in outcomes:
            if outcome.patch is not None:
                paths = patch_paths(outcome.file)
                write_text(job.out, paths[PATCHES], outcome.patch)
                write_text(job.out, paths[DESCRIPTIONS], outcome.description or "")
    job.run.write_table(TABLE, contributions_table(rows))


def summary(job: ContributeJob, rows: list[dict[str, Any]], outcomes: list[FileOutcome],
            refused: Counter[str]) -> list[str]:
    """The closing block: what was written, the lemmas by status, how they were named and proved, why the other
    candidates were not offered, the cost, and how to apply a patch."""
    patches = sum(outcome.patch is not None for outcome in outcomes)
    written = {f"{TABLE}/": (job.run.table_uri(TABLE), f"{len(rows)} rows"),
               f"{PATCHES}/": (f"{job.out}/{PATCHES}", f"{patches} files"),
               f"{DESCRIPTIONS}/": (f"{job.out}/{DESCRIPTIONS}", f"{patches} files")}
    offered = [row for row in rows if row["name_source"] is not None]
    sources = Counter(row["name_source"] for row in offered)
    details = [f"names: {sources['original']} kept, {sources['llm']} from the LLM, {sources['checker']} from the "
               f"checker; proofs: {sum(bool(row['proof_tactic']) for row in rows)} replaced by a closing tactic",
               "not offered: " + (", ".join(f"{why} {count}" for why, count in refused.most_common()) or "none")]
    cost = job.cost_lines(written_cost([contributions_table(rows).select(["llm_calls", "lean_checks"])]))
    patches_at = f"{job.out}/{PATCHES}"
    patch = f"<file>.patch copied from {patches_at}" if is_uri(job.out) else f"{patches_at}/<file>.patch"
    hint = f"next: git -C {job.mathlib_dir()} apply --check {patch}, then without --check" if patches else None
    return closing_lines(Closing(job.run.uri, written, {TABLE: rows_by_status([r["status"] for r in rows], STATUSES)},
                                 details, cost, simulated=job.simulated, next_step=hint))


def main(argv: Sequence[str] | None = None) -> int:
    """Offer a run's proved lemmas; exit 0 when the outputs are written, 2 when it could not start."""
    work = WorkWritten()

    def run() -> None:
        cfg = compose_config("contribute", sys.argv[1:] if argv is None else argv)
        with started(ContributeJob, cfg) as job:
            rows, outcomes, refused = contribute(job)
            lines = summary(job, rows, outcomes, refused)
            work.mark()
            print("\n".join(lines), flush=True)

    return run_job(run, (LeanSetupError, LLMConfigError), work)


if __name__ == "__main__":
    sys.exit(main())
