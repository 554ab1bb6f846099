"""`python -m pipelines.evaluate benchmark_dir=DIR provers=[...] run_dir=OUT`: prove a given benchmark, report
Success@t.

The statements of a benchmark (the MathlibLemma layout `DOMAIN/SEED_PATH/N.lean`, or Parquet files with
a `statement` column) become candidate rows and go through the mining pipeline's own operators: a
statement check (formalize with no repair: a benchmark is proved as given), the `aesop` triviality
flag (trivial statements are kept, marked and not proved by default) and the prove stage with every
prover in `provers`. Same verdicts, same candidates table (the benchmark path is the candidate id),
same resume: started again with the same `run_dir`, only statements without a finished row are redone. The job
itself is `pipelines/jobs/evaluation.py`.
"""

from __future__ import annotations

from lean_pool.command_line import hold_stops

if __name__ == "__main__":
    hold_stops()  # the imports below take seconds: a Ctrl-C or SIGTERM meanwhile stops the job in one line

import sys
from collections.abc import Sequence

from lean_pool.launch import LeanSetupError
from operators.llm.errors import LLMConfigError
from operators.rows.benchmark_items import BenchmarkLayoutError
from pipelines.jobs.evaluation import load_config, run
from pipelines.runtime.cli import WorkWritten, run_job


def main(argv: Sequence[str] | None = None) -> int:
    """Run or resume an evaluation; exit 0 when it finished, 2 when it could not start."""
    work = WorkWritten()
    return run_job(lambda: run(load_config(sys.argv[1:] if argv is None else argv), work),
                   (LeanSetupError, LLMConfigError, BenchmarkLayoutError), work)


if __name__ == "__main__":
    sys.exit(main())
