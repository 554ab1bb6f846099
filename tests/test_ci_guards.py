"""What keeps CI from passing without checking what it claims (tests/conftest.py): under `CI`, a skip whose reason is
not on the allow-list fails the session and is named, an allowed skip does not, and a missing ../shared fails the
tests that read it; outside CI, skips stay skips."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ALLOWED_SKIPS_IN_CI, _require

REPO = Path(__file__).resolve().parents[1]
UNEXPECTED = "the author's laptop has no GPU"
SKIPPING_TESTS = f'''
import pytest

def test_checks_something():
    assert 1 + 1 == 2

def test_skipped_for_a_reason_ci_does_not_allow():
    pytest.skip({UNEXPECTED!r})

def test_skipped_for_a_reason_ci_allows():
    pytest.skip({ALLOWED_SKIPS_IN_CI[0] + "; see the docs"!r})
'''


def run_pytest(test_file: Path, ci: bool) -> subprocess.CompletedProcess:
    """`python -m pytest` on `test_file` with this repository's settings and test plugins (tests/conftest.py): as CI
    runs its fast tier (`CI` set, on both cores), or as a developer does (one core, the quicker start)."""
    env = {key: value for key, value in os.environ.items() if key != "CI"} | ({"CI": "true"} if ci else {})
    cores = ["-n", "2"] if ci else []
    command = [sys.executable, "-m", "pytest", "-q", "-c", "pyproject.toml", "--rootdir", str(test_file.parent),
               "-p", "no:cacheprovider", "-p", "tests.conftest", *cores, str(test_file)]
    return subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, check=False, timeout=120)


@pytest.mark.slow
def test_a_skip_not_on_the_allow_list_fails_a_ci_run_and_is_named(tmp_path: Path) -> None:
    test_file = tmp_path / "test_skipping.py"
    test_file.write_text(SKIPPING_TESTS)
    done = run_pytest(test_file, ci=True)
    assert done.returncode == 1, done.stdout + done.stderr
    named = [line for line in done.stdout.splitlines() if line.startswith("error: ")]
    assert named == [f"error: {test_file.name}::test_skipped_for_a_reason_ci_does_not_allow: {UNEXPECTED}"], \
        done.stdout
    assert "1 passed, 2 skipped" in done.stdout

    outside_ci = run_pytest(test_file, ci=False)
    assert outside_ci.returncode == 0, outside_ci.stdout + outside_ci.stderr
    assert "error: " not in outside_ci.stdout and "1 passed, 2 skipped" in outside_ci.stdout


def test_a_missing_shared_directory_fails_in_ci_and_skips_elsewhere(tmp_path: Path, monkeypatch) -> None:
    missing = tmp_path / "shared"
    absent = f"{missing} is absent: these tests read the fixtures in ../shared beside the repo"
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception) as failed:
        _require(missing)
    assert str(failed.value) == f"{absent}, and CI must run them"
    monkeypatch.delenv("CI")
    with pytest.raises(pytest.skip.Exception) as skipped:
        _require(missing)
    assert str(skipped.value) == absent
