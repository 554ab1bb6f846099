"""A run directory knows what made it: a restart with other deciding settings is refused by name before anything
starts, one that changes only speed or placement resumes, and `resume.accept_changes` carries on knowingly."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import ray
from omegaconf import OmegaConf

from conf import compose_config
from conf.schema import speed_keys
from conf.schema.fields import keys, section, setting
from pipelines import autoformalize, evaluate, mine
from pipelines.runtime.run_identity import (
    ChangedSettings,
    claim,
    deciding_settings,
    fingerprint,
    flat_settings,
    matches,
    refusal,
)
from tests.mine_support import FAST_LEAN

# The demo on the simulators at their quickest: every restart below composes the same, so none of it is a change.
DEMO = ["preset=demo", *FAST_LEAN, "llm.sim.latency.median_s=0.01"]


def candidate_ids(run_dir: Path) -> list[str]:
    return sorted(pq.read_table(run_dir / "candidates", columns=["candidate_id"]).column(0).to_pylist())


def error_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip()]


@pytest.fixture(scope="module")
def mined(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished demo mining run."""
    run_dir = tmp_path_factory.mktemp("identity") / "run"
    assert mine.main([*DEMO, f"run_dir={run_dir}"]) == 0
    return run_dir


def test_flat_settings_and_patterns() -> None:
    flat = flat_settings({"a": {"b": 1, "c": {"d": [1, 2]}}, "e": {}})
    assert flat == {"a.b": 1, "a.c.d": [1, 2], "e": {}}
    assert matches("ray.address", ["ray"]) and matches("lean.sim.crash_pattern", ["lean.sim.*_pattern"])
    assert not matches("rayon", ["ray"]) and not matches("lean.sim.error_rules", ["lean.sim.*_pattern"])


def test_deciding_settings_leave_out_speed_and_take_what_start_found() -> None:
    config = {"prove": {"max_repairs": 2}, "stages": {"prove": {"actors": 4}}, "lean": {"toolchain": None}}
    settings = deciding_settings("mine", config, ["stages"], {"lean.toolchain": "v4.21.0"})
    assert settings == {"job": "mine", "lean.toolchain": "v4.21.0", "prove.max_repairs": 2}
    assert fingerprint(settings) == fingerprint(dict(reversed(settings.items())))


def test_claim_refuses_changes_to_tables_with_rows_and_records_accepted_ones() -> None:
    first = claim({"run_id": "r"}, ["candidates"], [], {"job": "mine", "k": 1}, [], "t0")
    with pytest.raises(ChangedSettings) as refused:
        claim(first, ["candidates"], ["candidates"], {"job": "mine", "k": 2}, [], "t1")
    assert refused.value.changes == {"k": (1, 2)}
    # A table still without rows takes the new settings: nothing was made with the old ones.
    fresh = claim(first, ["candidates"], [], {"job": "mine", "k": 2}, [], "t1")
    assert fresh["tables"]["candidates"]["settings"]["k"] == 2
    accepted = claim(first, ["candidates"], ["candidates"], {"job": "mine", "k": 2}, ["k"], "t1")
    assert accepted["accepted_changes"] == [{"at": "t1", "changes": {"k": [1, 2]}}]
    assert accepted["tables"]["candidates"]["settings"]["k"] == 2
    message = refusal("runs/x", {"k": (1, 2), "prompts.judge": ("a" * 100, None)})
    assert "\n" not in message and "k=1 (now 2)" in message and "resume.accept_changes=[k,prompts.judge]" in message


@pytest.mark.ray
def test_restart_with_other_models_or_budgets_is_refused_by_name(mined: Path, capsys: pytest.CaptureFixture) -> None:
    before = candidate_ids(mined)
    capsys.readouterr()
    status = mine.main([*DEMO, f"run_dir={mined}", "prove.max_repairs=5", "llm.models.prover.model=other-prover",
                        "dedup.enabled=false"])
    out, err = capsys.readouterr()
    assert status == 2 and out == "" and not ray.is_initialized()
    [line] = error_lines(err)
    assert line.startswith(f"error: {mined} holds rows made with other settings:")
    for shown in ("prove.max_repairs=2 (now 5)", "llm.models.prover.model=prover (now other-prover)",
                  "dedup.enabled=true (now false)", "another run_dir",
                  "resume.accept_changes=[dedup.enabled,llm.models.prover.model,prove.max_repairs]"):
        assert shown in line
    assert candidate_ids(mined) == before


@pytest.mark.ray
def test_restart_with_other_speed_settings_resumes(mined: Path, capsys: pytest.CaptureFixture) -> None:
    before = candidate_ids(mined)
    capsys.readouterr()
    status = mine.main([*DEMO, f"run_dir={mined}", "prove.resources.max_concurrent_calls_per_actor=3",
                        "llm.endpoints.sim.concurrency=7", "lean.timeout_s=30", "ray.seeds_per_wave=2",
                        "output.status_every_s=5"])
    out, _ = capsys.readouterr()
    assert status == 0 and out.startswith("resume: 3 discoveries and 18 candidates finished")
    assert candidate_ids(mined) == before


@pytest.mark.ray
def test_accepted_change_is_recorded_and_then_is_the_run_s_own(mined: Path, capsys: pytest.CaptureFixture) -> None:
    assert mine.main([*DEMO, f"run_dir={mined}", "prove.max_repairs=3",
                      "resume.accept_changes=[prove.max_repairs]"]) == 0
    manifest = json.loads((mined / "run.json").read_text())
    [accepted] = manifest["accepted_changes"]
    assert accepted["changes"] == {"prove.max_repairs": [2, 3]}
    assert manifest["tables"]["candidates"]["settings"]["prove.max_repairs"] == 3
    capsys.readouterr()
    assert mine.main([*DEMO, f"run_dir={mined}", "prove.max_repairs=3"]) == 0
    assert mine.main([*DEMO, f"run_dir={mined}"]) == 2
    assert "prove.max_repairs=3 (now 2)" in capsys.readouterr().err


@pytest.mark.ray
def test_autoformalize_modes_have_their_own_run_dirs_and_refuse_each_other(tmp_path: Path,
                                                                           capsys: pytest.CaptureFixture) -> None:
    direct = compose_config("autoformalize", DEMO).run_dir
    got = compose_config("autoformalize", [*DEMO, "autoformalize.mode=got"]).run_dir
    assert direct != got and direct.endswith("direct") and got.endswith("got")
    run_dir = tmp_path / "af"
    assert autoformalize.main([*DEMO, f"run_dir={run_dir}"]) == 0
    capsys.readouterr()
    assert autoformalize.main([*DEMO, f"run_dir={run_dir}", "mode=got"]) == 2
    [line] = error_lines(capsys.readouterr().err)
    assert "autoformalize.mode=direct (now got)" in line


@pytest.mark.ray
def test_another_job_in_the_same_run_dir_is_refused(mined: Path, mathliblemma_dir: Path,
                                                    capsys: pytest.CaptureFixture) -> None:
    capsys.readouterr()
    assert evaluate.main([*DEMO, f"benchmark_dir={mathliblemma_dir / 'benchmark'}", f"run_dir={mined}"]) == 2
    assert "job=mine (now evaluate)" in capsys.readouterr().err


def settings_with(cfg: dict, speed: tuple[str, ...], **lean: object) -> dict:
    """The deciding settings of `cfg` with its `lean` section changed as given, speed keys left out."""
    changed = {**cfg, "lean": {**cfg["lean"], **lean}}
    return deciding_settings("mine", changed, list(speed), {})


def test_a_speed_field_resumes_with_another_value_and_a_deciding_one_is_refused_by_name():
    """Whether a key decides a run's rows is declared on its schema field: `speed` on the field (lean.workers) or on
    its section (ray), or nothing (prove.max_repairs, which decides)."""
    speed = speed_keys()
    assert {"lean.workers", "ray.address", "llm.serve.engines.*.replicas"} <= set(speed)
    assert "prove.max_repairs" not in speed and "lean.toolchain" not in speed
    cfg = {**OmegaConf.to_container(compose_config("mine", DEMO), resolve=False)}
    manifest = claim({}, ["candidates"], [], settings_with(cfg, speed), [], "t0")
    resumed = claim(manifest, ["candidates"], ["candidates"], settings_with(cfg, speed, workers=8), [], "t1")
    assert "accepted_changes" not in resumed
    deciding = {**cfg, "prove": {**cfg["prove"], "max_repairs": 7}}
    with pytest.raises(ChangedSettings) as refused:
        claim(manifest, ["candidates"], ["candidates"], settings_with(deciding, speed), [], "t1")
    assert list(refused.value.changes) == ["prove.max_repairs"]


@section(speed=True)
class Pool:
    """A section all of whose keys change only speed."""

    workers: int = setting("workers", at_least=1)


@section
class Serving:
    """A section with one speed key and one deciding key, and a mapping of named entries."""

    replicas: int = setting("replicas", at_least=1, speed=True)
    model: str = setting("model")
    engines: dict[str, Pool] = setting("engines by name")
    pool: Pool = setting("the pool")


def test_speed_is_read_from_fields_sections_and_the_entries_of_named_mappings():
    assert [key.path for key in keys(Serving) if key.speed] == ["replicas", "engines.*.workers", "pool",
                                                                "pool.workers"]
