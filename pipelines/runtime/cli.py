"""What every `python -m pipelines.X key=value ...` entry point shares: its config, and how it ends.

Each job composes `conf/<job>.yaml` with the command line (`conf.compose_config`) and runs through `run_job`,
so every job answers a mistake the same way: one `error:` line and exit 2 for anything that stops it from
starting (a config typo, a missing path or key), exit 3 when an LLM endpoint goes down mid-run, exit 130 and one
line on Ctrl-C (0 when the work was already written).
"""

from __future__ import annotations

import sys
from collections.abc import Callable

from omegaconf.errors import MissingMandatoryValue

from conf import ConfigError, compose_config
from operators.llm.client import endpoint_down_message
from operators.storage import StorageError

__all__ = ["SetupError", "WorkWritten", "compose_config", "run_job"]

# Exit statuses: the job could not start as configured; the user stopped it.
SETUP_FAILED = 2
ENDPOINT_DOWN = 3
INTERRUPTED = 130


class SetupError(RuntimeError):
    """The run cannot start as configured; the message says what is missing."""


class WorkWritten:
    """Set by a job once everything it writes is written: a Ctrl-C after that stops only its closing lines or its
    shutdown, and the job still ends well."""

    def __init__(self) -> None:
        self.written = False

    def mark(self) -> None:
        self.written = True


def run_job(job: Callable[[], None], setup_errors: tuple[type[BaseException], ...] = (),
            work: WorkWritten | None = None) -> int:
    """Run a job's body: 0 when it finished; one `error:` line and 2 when it could not start (a `SetupError`, a
    config that does not compose, a mandatory value left out, a location that cannot be reached, or one of
    `setup_errors`); one line and 3 when an LLM endpoint went down during the run; on Ctrl-C, 130, or 0 with a line
    saying so when the job's `work` was already written."""
    try:
        job()
    except (SetupError, StorageError, ConfigError, MissingMandatoryValue, *setup_errors) as error:
        print(f"error: {error}", file=sys.stderr, flush=True)
        return SETUP_FAILED
    except Exception as error:
        message = endpoint_down_message(error)
        if message is None:
            raise
        print(f"error: {message}; rows in flight were not written: run the same command again to resume",
              file=sys.stderr, flush=True)
        return ENDPOINT_DOWN
    except KeyboardInterrupt:
        if work is not None and work.written:
            print("interrupted after the work was written: nothing is lost", file=sys.stderr, flush=True)
            return 0
        print("interrupted: rows already written are kept; run the same command again to resume", file=sys.stderr,
              flush=True)
        return INTERRUPTED
    return 0
