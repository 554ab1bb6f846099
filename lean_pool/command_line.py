"""How every command line ends, the same way for every job (`python -m pipelines.X`, `python -m lean_pool.check`):
one `error:` line and exit 2 for anything that stops it from starting (a config mistake, a missing path or key),
one line and the job's own status for a failure it knows mid-run, exit 130 and one line on Ctrl-C, 143 and the same
line on SIGTERM (what `ray job stop`, Kubernetes and systemd send; 0 when the work was already written).

It lives in lean_pool, the room the other two import, because all three rooms' command lines end through it; of the
rest it imports only the config's `ConfigError`.
"""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType

from omegaconf.errors import MissingMandatoryValue

from conf import ConfigError

# Exit statuses: the job could not start as configured; the user stopped it.
SETUP_FAILED = 2
INTERRUPTED = 130
TERMINATED = 128 + signal.SIGTERM
# What a Ctrl-C before the work was written leaves, for a job that resumes (its default).
RESUMES = "rows already written are kept; run the same command again to resume"


class SetupError(RuntimeError):
    """The run cannot start as configured; the message says what is missing."""


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where Ctrl-C would be, so a job stops the same clean way whichever it received."""


# Set by the first stop signal a job receives: from then on what Ray forwards from the workers being torn down is not
# the job's to print (`lean_pool.ray_output`).
_stop_requested = threading.Event()


def stop_for(signum: int) -> type[KeyboardInterrupt]:
    """What a stop signal raises: SIGTERM `Terminated`, Ctrl-C (SIGINT) KeyboardInterrupt."""
    return Terminated if signum == signal.SIGTERM else KeyboardInterrupt


def stop_requested() -> bool:
    """Whether this job was told to stop (Ctrl-C or SIGTERM)."""
    return _stop_requested.is_set()


def _stop(signum: int, frame: FrameType | None) -> None:
    _stop_requested.set()
    raise stop_for(signum)


# The stop signals received while stops are held (`hold_stops`), first first.
_held: list[int] = []


def _hold(signum: int, frame: FrameType | None) -> None:
    _stop_requested.set()
    _held.append(signum)


def _stop_for_held() -> None:
    """Stop as `_stop` would for the first stop signal held, if one was; forget them."""
    held = list(_held)
    _held.clear()
    if held:
        _stop(held[0], None)


def _take(signum: int, handler: Callable[[int, FrameType | None], None]) -> None:
    """Handle `signum` with `handler`, unless it is ignored: a job started in the background by a shell that ignores
    Ctrl-C for it keeps ignoring it."""
    if signal.getsignal(signum) is not signal.SIG_IGN:
        signal.signal(signum, handler)


def stop_on_signals() -> None:
    """Make Ctrl-C and SIGTERM raise KeyboardInterrupt and `Terminated` in the main thread, noting that the job is
    stopping (`stop_requested`). Nothing changes outside the main thread, where Python cannot take a signal."""
    if threading.current_thread() is threading.main_thread():
        for signum in (signal.SIGINT, signal.SIGTERM):
            _take(signum, _stop)


def hold_stops() -> None:
    """Hold Ctrl-C and SIGTERM from now on: `run_command` stops the job with them before it starts, `signals_held`
    when its block has run. Called first by a job's command line, so that a stop while Python imports the job's
    modules (seconds: Ray, Ray Data, polars) is one line, not a KeyboardInterrupt traceback or a silent SIGTERM."""
    if threading.current_thread() is threading.main_thread():
        for signum in (signal.SIGINT, signal.SIGTERM):
            _take(signum, _hold)


@contextmanager
def signals_held() -> Iterator[None]:
    """Hold Ctrl-C and SIGTERM until the block has run, then stop as `stop_on_signals` does. For `ray.init`: a driver
    interrupted halfway through joining the Ray it started crashes at exit (SIGSEGV, in Ray's C++ core), or leaves
    Ray's daemons running, instead of stopping with one line; Ray must not replace the handlers meanwhile
    (`lean_pool.ray_start.join_ray_off_the_main_thread`)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    hold_stops()
    try:
        yield
    finally:
        stop_on_signals()
    _stop_for_held()


class WorkWritten:
    """Set by a job once everything it writes is written: a Ctrl-C after that stops only its closing lines or its
    shutdown, and the job still ends well."""

    def __init__(self) -> None:
        self.written = False

    def mark(self) -> None:
        self.written = True


def lean_checks_line(checks: int, replays: int | None) -> str:
    """How many Lean checks were run, replays of accepted proofs included and named (None: replays were off); the
    same words in every job's closing lines."""
    return f"lean checks: {checks}" + ("" if replays is None else f" (of which {replays} replays of accepted proofs)")


def run_command(job: Callable[[], None], setup_errors: tuple[type[BaseException], ...] = (),
                work: WorkWritten | None = None,
                failed_mid_run: Callable[[Exception], tuple[str, int] | None] | None = None,
                interrupted: str = RESUMES) -> int:
    """Run a command's body: 0 when it finished; one `error:` line and 2 when it could not start (a `SetupError`, a
    config that does not compose, a mandatory value left out, or one of `setup_errors`); the line and status
    `failed_mid_run` gives for an error it knows; on Ctrl-C, 130 with `interrupted` said (on SIGTERM, 143), or 0 with
    a line saying so when the job's `work` was already written."""
    _stop_requested.clear()
    stop_on_signals()
    try:
        _stop_for_held()
        job()
    except (SetupError, ConfigError, MissingMandatoryValue) + setup_errors as error:
        print(f"error: {error}", file=sys.stderr, flush=True)
        return SETUP_FAILED
    except Exception as error:
        known = None if failed_mid_run is None else failed_mid_run(error)
        if known is None:
            raise
        message, status = known
        print(f"error: {message}", file=sys.stderr, flush=True)
        return status
    except KeyboardInterrupt as stop:
        if work is not None and work.written:
            print("interrupted after the work was written: nothing is lost", file=sys.stderr, flush=True)
            return 0
        print(f"interrupted: {interrupted}", file=sys.stderr, flush=True)
        return TERMINATED if isinstance(stop, Terminated) else INTERRUPTED
    return 0
