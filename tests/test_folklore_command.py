"""The `folklore` command (pipelines/command.py): it lists every job, refuses a job there is not in one line, runs a
job's `main` with the arguments after its name, and answers `folklore JOB --help` and `--cfg` for every job from its
config and schema. Pure: no job runs, no Ray starts."""

from __future__ import annotations

import ast
import importlib.util
import subprocess
import sys
import tomllib
import types
from pathlib import Path

import pytest
import yaml
from omegaconf import OmegaConf

from conf import compose_config, schema
from conf.usage import shown
from pipelines import command, mine

REPO = Path(__file__).resolve().parents[1]
# The console script as installed beside this Python (`pip install -e .`), whatever PATH holds.
FOLKLORE = str(Path(sys.executable).parent / "folklore")
ENTRY_MODULES = {"pipelines.mine", "pipelines.plan", "pipelines.report", "pipelines.export",
                 "pipelines.autoformalize", "pipelines.evaluate", "pipelines.decontaminate", "pipelines.index",
                 "pipelines.contribute", "pipelines.status", "lean_pool.check"}


def test_the_console_script_is_the_dispatcher() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert project["scripts"]["folklore"] == "pipelines.command:main"


def test_every_entry_module_is_a_job_with_a_main_taking_its_arguments() -> None:
    assert {job.module for job in command.JOBS.values()} == ENTRY_MODULES
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
    monkeypatch.setitem(command.JOBS, "fake", command.Job(job.__name__, "mine", "a job that records its arguments",
                                                          "folklore fake"))
    assert command.main(["fake", "preset=demo", "a.lean"]) == 7
    assert received == [["preset=demo", "a.lean"]]


def test_listing_the_jobs_imports_none_of_them() -> None:
    probe = ("import sys; from pipelines import command; command.main(['--help']); "
             "print(sorted(job.module for job in command.JOBS.values() if job.module in sys.modules))")
    done = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "[]"


def key_defaults(node: object, prefix: str = "") -> dict[str, object]:
    """Each dotted key of a composed config (as a plain mapping) -> its default, mappings whose keys the user
    chooses included as a whole (they are one line of the help)."""
    if not isinstance(node, dict) or not node:
        return {prefix[:-1]: node}
    return {key: value for name, inner in node.items()
            for key, value in key_defaults(inner, f"{prefix}{name}.").items()}


@pytest.mark.parametrize("name", list(command.JOBS))
@pytest.mark.slow
def test_help_of_every_job_gives_its_purpose_usage_groups_and_every_key_with_its_default(
        name: str, capsys: pytest.CaptureFixture[str]) -> None:
    job = command.JOBS[name]
    assert command.main([name, "--help"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0] == " ".join(schema.JOBS[job.config].__doc__.split()) and lines[0].startswith(f"`folklore {name}")
    assert f"usage: {job.usage}" in lines
    config = OmegaConf.to_container(compose_config(job.config, [], complete=False), resolve=False)
    keyed = [line for line in lines if line.startswith("  ") and "=" in line.split()[0]]
    listed = {line.split()[0].split("=", 1)[0]: line for line in keyed}
    for key, default in key_defaults(config).items():
        holder = next((path for path in listed if key == path or key.startswith(f"{path}.")), None)
        assert holder is not None, (name, key)
        if holder == key:
            assert listed[key].startswith(f"  {key}={shown(default)}"), (name, key, listed[key])
    assert listed and key_defaults(config)


@pytest.mark.slow
def test_help_shows_the_keys_and_defaults_of_the_group_options_chosen(capsys: pytest.CaptureFixture[str]) -> None:
    assert command.main(["mine", "--help", "llm=vllm", "discover.samples_per_seed=3"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert any(line.startswith("  llm.serve.mode=") for line in lines)
    assert any(line.startswith("  discover.samples_per_seed=3 ") for line in lines)
    assert "  llm                    openai | sim | vllm*" in lines


@pytest.mark.slow
def test_cfg_prints_the_composed_config_as_yaml(capsys: pytest.CaptureFixture[str]) -> None:
    assert command.main(["evaluate", "--cfg", "preset=demo", "prove.max_repairs=5"]) == 0
    printed = yaml.safe_load(capsys.readouterr().out)
    assert printed["prove"]["max_repairs"] == 5 and printed["benchmark_dir"] == "???"
    assert printed == OmegaConf.to_container(compose_config("evaluate", ["preset=demo", "prove.max_repairs=5"],
                                                            complete=False), resolve=False)


def test_help_with_a_mistake_in_its_command_line_is_the_one_error_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert command.main(["check", "--help", "lean.workerz=2"]) == 2
    captured = capsys.readouterr()
    assert (captured.out, captured.err) == ("", "error: lean.workerz: no such key; did you mean lean.workers?\n")


def test_the_usage_each_help_gives_is_the_one_the_readme_tables() -> None:
    readme = (REPO / "README.md").read_text()
    for name, job in command.JOBS.items():
        assert f"| `{job.usage.replace('|', chr(92) + '|')}` |" in readme, name


def test_a_newcomers_first_commands_answer_in_their_own_process(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    """`folklore mine --help` as typed; a mandatory value left out, and a flag given to `python -m`, one line each."""
    helped = subprocess.run([FOLKLORE, "mine", "--help"], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert helped.returncode == 0 and helped.stderr == ""
    assert "  prove.max_repairs=2 " in helped.stdout and "  seeds.root=??? " in helped.stdout
    missing = subprocess.run([FOLKLORE, "evaluate", "preset=demo"], cwd=tmp_path, capture_output=True, text=True,
                             timeout=120)
    assert missing.returncode == 2 and missing.stdout == ""
    assert missing.stderr.startswith("error: benchmark_dir has no value: give benchmark_dir=... (")
    assert missing.stderr.count("\n") == 1
    assert list(tmp_path.iterdir()) == []
    assert mine.main(["--help"]) == 2
    flagged = capsys.readouterr()
    assert flagged.out == ""
    assert flagged.err == ("error: --help: the job takes KEY=VALUE; `folklore mine --help` lists its keys and "
                           "`folklore mine --cfg` prints its config\n")
