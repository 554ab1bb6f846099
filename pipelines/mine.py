"""`python -m pipelines.mine [overrides]`: mine seed files for missing lemmas into Parquet tables.

Resumable, streaming waves (each one Ray Data plan) of `ray.seeds_per_wave` seeds, up to `ray.waves_in_flight` at
once, through the stages `operators/pipeline.py` declares: discover (seed files -> one discovery per seed and sample,
written to discoveries/ as they come) -> split -> [dedup] -> [decontaminate] -> judge -> formalize -> [faithfulness]
-> trivial -> prove -> one row per candidate in candidates/ (`pipelines/jobs/mining.py`). Started again with the
same `run_dir`, a run skips what is written and asks again only for what failed for infrastructure reasons.
With `rounds` above 1 or `subgoals.enabled`, the run makes passes one after another: per round, its seeds' waves,
then the waves of each sub-goal level. `preset=demo` runs it all on the simulators.
"""

from __future__ import annotations

from lean_pool.command_line import hold_stops

if __name__ == "__main__":
    hold_stops()  # the imports below take seconds: a Ctrl-C or SIGTERM meanwhile stops the job in one line

import sys
from collections.abc import Sequence

from lean_pool.launch import LeanSetupError
from operators.llm.errors import LLMConfigError
from pipelines.jobs.mining import load_config, run
from pipelines.runtime.cli import WorkWritten, run_job


def main(argv: Sequence[str] | None = None) -> int:
    """Run or resume a mining run; exit 0 when it finished, 2 when it could not start."""
    work = WorkWritten()
    return run_job(lambda: run(load_config(sys.argv[1:] if argv is None else argv), work),
                   (LeanSetupError, LLMConfigError), work)


if __name__ == "__main__":
    sys.exit(main())
