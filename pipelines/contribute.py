"""`python -m pipelines.contribute run_dir=DIR [mathlib_dir=CHECKOUT] [out=DIR]`: a run's proved lemmas as changes
Mathlib would take.

Each candidate a user would offer (proved, not trivial, faithful enough, not a duplicate or a benchmark's
restatement: `contribute.statuses`, `contribute.min_faithfulness`) is placed in its seed file after the last
declaration it uses, in the namespace there, with the context it needs; named by Mathlib's conventions (an LLM
proposes a name where the mined one fails the checker); proved by the shortest closing tactic that passes the sound
verdict, or its mined proof. Each file's lemmas become one patch against `mathlib_dir` (`git apply` takes it) once the
patched file passed the pool, and one pull-request description. `contributions/` in the run has a row per lemma,
offered or not and why; `report` counts it and `export` ships it. The job itself is `pipelines/jobs/contribution.py`.
"""

from __future__ import annotations

from lean_pool.command_line import hold_stops

if __name__ == "__main__":
    hold_stops()  # the imports below take seconds: a Ctrl-C or SIGTERM meanwhile stops the job in one line

import sys
from collections.abc import Sequence

from lean_pool.launch import LeanSetupError
from operators.llm.errors import LLMConfigError
from pipelines.jobs.contribution import run
from pipelines.runtime.cli import WorkWritten, compose_config, run_job


def main(argv: Sequence[str] | None = None) -> int:
    """Offer a run's proved lemmas; exit 0 when the outputs are written, 2 when it could not start."""
    work = WorkWritten()
    return run_job(lambda: run(compose_config("contribute", sys.argv[1:] if argv is None else argv), work),
                   (LeanSetupError, LLMConfigError), work)


if __name__ == "__main__":
    sys.exit(main())
