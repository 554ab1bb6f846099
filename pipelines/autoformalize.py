"""`python -m pipelines.autoformalize input=PATH run_dir=DIR [mode=direct|got|agent] [preset=demo]`: informal
statements into Lean.

One streaming Ray Data plan: input rows -> autoformalize -> faithfulness -> RUN_DIR/formalizations/, one row per
input row whatever happened to it. The autoformalize stage is the mode's: `direct` (retrieve, think, draft,
compile-repair: mining's formalize loop), `got` (Aria's concept graph, missing concepts defined bottom-up, then
the draft) or `agent` (ALA's model with tools under a budget of tool calls).
Started again with the same `run_dir`, rows already written are kept and only infrastructure failures and
unwritten rows are redone. `preset=demo` runs a few shipped statements on the simulators. The job itself is
`pipelines/jobs/autoformalization.py`.
"""

from __future__ import annotations

from lean_pool.command_line import hold_stops

if __name__ == "__main__":
    hold_stops()  # the imports below take seconds: a Ctrl-C or SIGTERM meanwhile stops the job in one line

import sys
from collections.abc import Sequence

from lean_pool.launch import LeanSetupError
from operators.llm.errors import LLMConfigError
from pipelines.jobs.autoformalization import load_config, run
from pipelines.runtime.cli import WorkWritten, run_job


def main(argv: Sequence[str] | None = None) -> int:
    """Run or resume an autoformalization; exit 0 when it finished, 2 when it could not start."""
    work = WorkWritten()
    return run_job(lambda: run(load_config(sys.argv[1:] if argv is None else argv), work),
                   (LeanSetupError, LLMConfigError), work)


if __name__ == "__main__":
    sys.exit(main())
