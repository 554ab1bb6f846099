"""Numbers checked at start: every count, size and budget of conf/ has a declared range (`at_least`, `at_most` on its
schema field, conf/schema/), and a value outside it, given or default, is one `error:` line naming the key, the value
and the range, exit 2, before Ray starts and before anything is written. A deciding key added since a run was recorded
(`introduced`) lets that run resume."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import ray
from omegaconf import OmegaConf

from conf import ConfigError, compose_config, schema
from conf.schema.fields import optional, out_of_range
from lean_pool import check
from operators.discover import DISCOVERY_SCHEMA
from pipelines import autoformalize, evaluate, export, index, mine, plan, report
from pipelines.runtime.run_dir import RunDir
from pipelines.runtime.run_identity import ChangedSettings, claim, deciding_settings

REPO_DIR = Path(__file__).resolve().parents[1]
DEMO = ["preset=demo"]
# Every job's config, with the group choices that bring keys of their own (the demo: the simulators; evaluate and
# check: openai and repl).
COMPOSED = [("mine", DEMO), ("mine", ["llm=vllm", "llm/engines=gpu", "lean=kimina"]),
            ("mine", ["llm=vllm", "llm/engines=cpu"]), ("autoformalize", []), ("evaluate", []), ("export", []),
            ("report", []), ("index", []), ("plan", []), ("check", []), ("contribute", []), ("decontaminate", [])]


def leaves_of(node: object, segments: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], object]]:
    """Every (key as its segments, value) of a plain mapping that is not itself a mapping (a key the user names may
    hold dots: seeds.domains's `Mathlib.Logic`)."""
    if isinstance(node, dict):
        return [leaf for key, value in node.items() for leaf in leaves_of(value, (*segments, str(key)))]
    return [(segments, node)]


def is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


@pytest.fixture(scope="module")
def leaves() -> list[tuple[str, tuple[str, ...], object]]:
    return [(name, *leaf) for name, selections in COMPOSED
            for leaf in leaves_of(OmegaConf.to_container(compose_config(name, selections, complete=False)))]


def test_every_number_of_every_schema_has_a_range_or_a_reason_for_none():
    missing = sorted({key.path for name in schema.JOBS for key in schema.job_keys(name).values()
                      if optional(key.annotation)[0] in (int, float) and key.setting.at_least is None
                      and key.setting.unranged is None})
    assert not missing, f"give these a range in conf/schema/ (at_least=..., or unranged=WHY): {missing}"


@pytest.mark.slow
def test_every_number_a_job_composes_has_a_schema_key_whose_range_holds_it(leaves):
    for name, key, value in leaves:
        declared = schema.key_at(name, key)
        assert declared is not None, (name, key)
        assert not (is_number(value) and out_of_range(declared.setting, value)), (name, key, value)


def one_error_line(main: Callable[[list[str]], int], argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """The job's one stderr line, after checking it exited 2 without starting Ray."""
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1, err
    assert not ray.is_initialized()
    return err.strip()


@pytest.mark.slow
def test_the_command_a_user_types_is_refused_before_anything_starts(tmp_path: Path):
    run_dir = tmp_path / "run"
    proc = subprocess.run([sys.executable, "-m", "pipelines.mine", *DEMO, f"run_dir={run_dir}",
                           "ray.seeds_per_wave=0"], cwd=REPO_DIR, capture_output=True, text=True, timeout=120,
                          check=False)
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr == "error: ray.seeds_per_wave=0: out of range, expects at least 1\n"
    assert not run_dir.exists()


# The probes: each crashed deep in a run, or did nothing and exited 0, or ran as another value.
@pytest.mark.parametrize(("override", "line"), [
    ("ray.seeds_per_wave=0", "ray.seeds_per_wave=0: out of range, expects at least 1"),
    ("ray.waves_in_flight=0", "ray.waves_in_flight=0: out of range, expects at least 1"),
    ("output.rows_per_file=0", "output.rows_per_file=0: out of range, expects at least 1"),
    ("discover.samples_per_seed=0", "discover.samples_per_seed=0: out of range, expects at least 1"),
    ("ray.seeds_per_wave=-1", "ray.seeds_per_wave=-1: out of range, expects at least 1"),
    ("prove.max_repairs=-1", "prove.max_repairs=-1: out of range, expects at least 0"),
    ("ray.seeds_per_plan=0", "ray.seeds_per_plan is now called ray.seeds_per_wave; write ray.seeds_per_wave=..."),
    ("llm.sampling.judge.temperature=3", "llm.sampling.judge.temperature=3: out of range, expects from 0 to 2"),
])
def test_a_number_that_cannot_work_is_one_line_naming_key_value_and_range(override, line, tmp_path, capsys):
    run_dir = tmp_path / "run"
    assert one_error_line(mine.main, [*DEMO, f"run_dir={run_dir}", override], capsys) == f"error: {line}"
    assert not run_dir.exists()


def check_main(argv: list[str]) -> int:
    """`python -m lean_pool.check` takes paths besides overrides; a path that is never reached will do."""
    return check.main(["nowhere.lean", *argv])


@pytest.mark.parametrize(("main", "override", "line"), [
    (autoformalize.main, "autoformalize.retrieve_k=0", "autoformalize.retrieve_k=0: out of range, expects at least 1"),
    (evaluate.main, "llm.retry.max_attempts=0", "llm.retry.max_attempts=0: out of range, expects at least 1"),
    (index.main, "embed.batch_size=0", "embed.batch_size=0: out of range, expects at least 1"),
    (export.main, "split.test_fraction=1.5", "split.test_fraction=1.5: out of range, expects from 0 to 1"),
    (report.main, "top_reasons=0", "top_reasons=0: out of range, expects at least 1"),
    (plan.main, "plan.cluster.nodes=0", "plan.cluster.nodes=0: out of range, expects at least 1"),
    (check_main, "lean.workers=0", "lean.workers=0: out of range, expects at least 1"),
])
@pytest.mark.slow
def test_every_job_checks_the_ranges(main, override, line, capsys):
    assert one_error_line(main, [override], capsys) == f"error: {line}"


def test_the_composed_config_is_checked_not_only_the_numbers_typed():
    """A number that reaches a key through an interpolation (or a preset, or a group) is checked where it lands."""
    with pytest.raises(ConfigError) as refused:
        compose_config("mine", ["lean=sim", "ray.waves_in_flight=${lean.prewarm_repls}"])
    assert str(refused.value) == "ray.waves_in_flight=0: out of range, expects at least 1"


def test_a_run_recorded_before_max_lemmas_existed_resumes_and_another_cap_is_refused():
    cfg = OmegaConf.to_container(compose_config("mine", DEMO), resolve=False)
    old = deciding_settings("mine", cfg, [], {})
    del old["discover.max_lemmas"]
    manifest = claim({}, ["discoveries"], [], old, [], "t0")
    resumed = claim(manifest, ["discoveries"], ["discoveries"], deciding_settings("mine", cfg, [], {}), [], "t1")
    assert "accepted_changes" not in resumed
    cfg["discover"]["max_lemmas"] = 10
    with pytest.raises(ChangedSettings) as refused:
        claim(manifest, ["discoveries"], ["discoveries"], deciding_settings("mine", cfg, [], {}), [], "t1")
    assert refused.value.changes == {"discover.max_lemmas": (schema.introduced("mine")["discover.max_lemmas"],
                                                             10)}


@pytest.mark.parametrize(("job", "overrides"), [("mine", []), ("evaluate", ["benchmark_dir=b"]),
                                                ("autoformalize", ["input=i"]), ("contribute", ["run_dir=r"])])
@pytest.mark.slow
def test_a_run_recorded_before_pipelines_were_lists_resumes_with_its_jobs_stages_and_a_shorter_list_is_refused(
        job, overrides):
    cfg = OmegaConf.to_container(compose_config(job, [*DEMO, *overrides]), resolve=False)
    old = deciding_settings(job, cfg, [], {})
    del old["pipeline"]
    manifest = claim({}, ["candidates"], [], old, [], "t0")
    resumed = claim(manifest, ["candidates"], ["candidates"], deciding_settings(job, cfg, [], {}), [], "t1")
    assert "accepted_changes" not in resumed
    cfg["pipeline"] = cfg["pipeline"][:-1]
    with pytest.raises(ChangedSettings) as refused:
        claim(manifest, ["candidates"], ["candidates"], deciding_settings(job, cfg, [], {}), [], "t1")
    assert list(refused.value.changes) == ["pipeline"]


def test_discoveries_written_before_dropped_lemmas_existed_read_it_as_null(tmp_path: Path):
    old_schema = pa.schema([field for field in DISCOVERY_SCHEMA if field.name != "dropped_lemmas"])
    (tmp_path / "discoveries").mkdir()
    pq.write_table(pa.Table.from_pylist([{"unit_id": "u", "snippets": ["a"]}], schema=old_schema),
                   tmp_path / "discoveries" / "part-0.parquet")
    table = RunDir(str(tmp_path)).read("discoveries", DISCOVERY_SCHEMA)
    assert table.schema == DISCOVERY_SCHEMA
    assert table.column("dropped_lemmas").to_pylist() == [None]


def test_a_run_recorded_before_answer_format_existed_resumes_and_a_structured_call_is_refused():
    """`answer_format` was added to every shaped call's sampling at once: each entry counts as recorded `free`."""
    cfg = OmegaConf.to_container(compose_config("mine", DEMO), resolve=False)
    old = {key: value for key, value in deciding_settings("mine", cfg, [], {}).items()
           if not key.endswith((".answer_format", ".thinking_chars"))}
    manifest = claim({}, ["discoveries"], [], old, [], "t0")
    resumed = claim(manifest, ["discoveries"], ["discoveries"], deciding_settings("mine", cfg, [], {}), [], "t1")
    assert "accepted_changes" not in resumed
    cfg["llm"]["sampling"]["discover"]["answer_format"] = "structured"
    with pytest.raises(ChangedSettings) as refused:
        claim(manifest, ["discoveries"], ["discoveries"], deciding_settings("mine", cfg, [], {}), [], "t1")
    assert refused.value.changes == {"llm.sampling.discover.answer_format": ("free", "structured")}
