"""The `folklore` command (pipelines/command.py): it lists every job, refuses a job there is not in one line, and runs
a job's `main` with the arguments after its name. Pure: no job runs, no Ray starts."""

from __future__ import annotations

import ast
import importlib.util
import subprocess
import sys
import tomllib
import types
from pathlib import Path

import pytest

from pipelines import command

REPO = Path(__file__).resolve().parents[1]
ENTRY_MODULES = {"pipelines.mine", "pipelines.plan", "pipelines.report", "pipelines.export",
                 "pipelines.autoformalize", "pipelines.evaluate", "pipelines.decontaminate", "pipelines.index",
                 "pipelines.contribute", "lean_pool.check"}


def test_the_console_script_is_the_dispatcher() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert project["scripts"]["folklore"] == "pipelines.command:main"


def test_every_entry_module_is_a_job_with_a_main_taking_its_arguments() -> None:
    assert {module for module, _ in command.JOBS.values()} == ENTRY_MODULES
    for module in ENTRY_MODULES:
        source = Path(importlib.util.find_spec(module).origin).read_text()
        mains = [node for node in ast.parse(source).body if isinstance(node, ast.FunctionDef) and node.name == "main"]
        assert mains and [arg.arg for arg in mains[0].args.args] == ["argv"], module


@pytest.mark.parametrize("argv", [[], ["--help"], ["-h"]])
def test_help_lists_every_job_on_a_line_of_its_own(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert command.main(argv) == 0
    out = capsys.readouterr().out
    listed = [line.split()[0] for line in out.splitlines() if line.startswith("  ")]
    assert listed == list(command.JOBS)
    assert out.startswith("usage: folklore JOB")


def test_an_unknown_job_is_one_error_line_and_the_list(capsys: pytest.CaptureFixture[str]) -> None:
    assert command.main(["mien", "preset=demo"]) == command.UNKNOWN_JOB == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    errors = [line for line in captured.err.splitlines() if line.startswith("error:")]
    assert errors == [f"error: no job named 'mien'; the jobs are {', '.join(command.JOBS)}"]
    assert all(f"  {name} " in captured.err for name in command.JOBS)


def test_a_job_runs_its_main_with_the_arguments_after_its_name(monkeypatch: pytest.MonkeyPatch) -> None:
    received: list[list[str]] = []
    job = types.ModuleType("folklore_test_job")
    job.main = lambda argv: received.append(argv) or 7
    monkeypatch.setitem(sys.modules, job.__name__, job)
    monkeypatch.setitem(command.JOBS, "fake", (job.__name__, "a job that records its arguments"))
    assert command.main(["fake", "preset=demo", "--help", "a.lean"]) == 7
    assert received == [["preset=demo", "--help", "a.lean"]]


def test_listing_the_jobs_imports_none_of_them() -> None:
    probe = ("import sys; from pipelines import command; command.main(['--help']); "
             "print(sorted(m for m, _ in command.JOBS.values() if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "[]"
