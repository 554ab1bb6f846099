"""What every `python -m pipelines.X key=value ...` entry point shares: its config, and how it ends.

Each job composes `conf/<job>.yaml` with the command line (`conf.compose_config`) and runs through `run_job`,
so every job answers a mistake the same way: one `error:` line and exit 2 for anything that stops it from
starting (a config typo, a missing path or key), exit 3 when an LLM endpoint goes down mid-run or refuses a stage's
calls alike (`CallRefused`), exit 4 when the run's storage refuses a write (`StorageFull`), exit 130 and one line on
Ctrl-C (0 when the work was already written).
"""

from __future__ import annotations

from collections.abc import Callable

from conf import compose_config
from lean_pool.command_line import INTERRUPTED, RESUMES, SETUP_FAILED, SetupError, WorkWritten, run_command
from operators.llm.errors import call_refused_message, endpoint_down_message
from operators.storage import StorageError, StorageFull

__all__ = ["INTERRUPTED", "SETUP_FAILED", "SetupError", "WorkWritten", "compose_config", "run_job"]

# Exit status when an LLM endpoint went down during the run, or refused a stage's calls.
ENDPOINT_DOWN = 3
# Exit status when the run's storage refused a write mid-run: full, over quota or read-only.
STORAGE_REFUSED = 4


def endpoint_down(error: Exception) -> tuple[str, int] | None:
    """The line and status of an LLM endpoint that went down mid-run or refused a stage (None for any other error).
    A refused stage would be refused again as configured, so its line says what to change instead of "run again"."""
    refused = call_refused_message(error)
    if refused is not None:
        return (f"{refused}; rows in flight were not written: change what the endpoint refuses (the stage's "
                "llm.sampling, the role's model) and start again", ENDPOINT_DOWN)
    message = endpoint_down_message(error)
    if message is None:
        return None
    return f"{message}; rows in flight were not written: run the same command again to resume", ENDPOINT_DOWN


def failed_mid_run(error: Exception) -> tuple[str, int] | None:
    """The line and status of a failure a job knows mid-run: its storage refusing a write, an LLM endpoint down."""
    if isinstance(error, StorageFull):
        return str(error), STORAGE_REFUSED
    return endpoint_down(error)


def run_job(job: Callable[[], None], setup_errors: tuple[type[BaseException], ...] = (),
            work: WorkWritten | None = None, interrupted: str = RESUMES) -> int:
    """`lean_pool.command_line.run_command` for a pipeline job: a location that cannot be reached is a setup error too,
    and an LLM endpoint down mid-run is one line and exit 3, a full disk one line and exit 4."""
    return run_command(job, (StorageError, *setup_errors), work, failed_mid_run, interrupted)
