"""A stage is declared once (`operators.stage.Stage`) and the pipeline is a list in config: the plan `mine` wires,
the pre-start CPU check, the capacity model and plan, the report's cost table and the LLM budget check all derive
from the declarations, optional stages and a stage declared outside Folklore included."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import polars as pl
import pytest

from conf import schema
from conf.schema.retrieval import Resources
from operators.decontaminate import STAGE as DECONTAMINATE
from operators.discover import STAGE as DISCOVER
from operators.pipeline import DECLARED, PipelineError, call_roles, pipeline
from operators.rows.candidates import candidates_table, empty_candidate
from operators.split import SEED_TO_DISCOVER
from operators.stage import Shared
from pipelines.jobs.mining import load_config
from pipelines.planning import capacity_plan
from pipelines.planning.capacity import mining_shape, streaming_cpus
from pipelines.reporting import stats
from pipelines.runtime import wiring
from pipelines.runtime.cli import compose_config
from pipelines.runtime.stage_settings import StageSettings

DEMO = "preset=demo"
REPO = Path(__file__).resolve().parents[1]
NOT_STAGES = {"writer", "lean pool"}
INPUTS = {SEED_TO_DISCOVER}
# Each job whose config lists a pipeline, with what it needs to compose.
JOBS = {"mine": [], "evaluate": ["benchmark_dir=x"], "autoformalize": ["input=x"], "contribute": ["run_dir=x"]}


def every_stage_on(shared_dir: Path) -> list[str]:
    """The demo with each optional stage switched on: dedup, decontaminate (a benchmark named), faithfulness."""
    return [DEMO, "dedup.enabled=true", "faithfulness.enabled=true",
            f"decontaminate.benchmarks=[{shared_dir / 'fixtures' / 'minif2f-lean4-valid'}]"]


class FakePool:
    """What a Lean stage asks of the pool when its plan step is built: a handle with its checks' priority."""

    def with_priority(self, priority: int) -> FakePool:
        return self


def wired(cfg: Any) -> list[tuple[str, dict[str, Any]]]:
    """The steps `mine` would put after discover into a wave's plan for `cfg` (name and `map_batches` options),
    built by the same code with a job holding no Ray (stages' arguments left empty)."""
    running = pipeline(cfg, INPUTS)
    job = SimpleNamespace(cfg=cfg, pool=FakePool(), settings=object(), ledger=None, llm_cache_dir=None,
                          pipeline=StageSettings(running, {}, None))  # type: ignore[arg-type]
    return [(step.name, step.options) for step in wiring.after_discover(job, priority=0)]


@pytest.mark.slow
def test_every_optional_stage_on_is_counted_by_the_plan_the_cpu_check_and_the_capacity_model(shared_dir):
    overrides = every_stage_on(shared_dir)
    cfg = load_config(overrides)
    names = [stage.name for stage in pipeline(cfg, INPUTS)]
    assert names == [DISCOVER, "split+dedup", DECONTAMINATE, "judge", "formalize", "faithfulness", "trivial",
                     "prove"]
    assert [name for name, _ in wired(cfg)] == names[1:]
    cpus = streaming_cpus(cfg, waves=1)
    assert set(cpus) - NOT_STAGES == set(names) - {"split"}
    assert cpus[DECONTAMINATE] == float(cfg.decontaminate.resources.num_cpus)
    estimate = capacity_plan.make_plan(overrides)
    rows = {stage for stage, count in estimate.work.rows.items() if count > 0}
    assert rows == {DISCOVER, *(name for name in names if name not in ("split", "split+dedup"))}


def test_stages_that_are_off_are_neither_wired_nor_counted():
    overrides = [DEMO, "dedup.enabled=false", "faithfulness.enabled=false"]
    cfg = load_config(overrides)
    names = [stage.name for stage in pipeline(cfg, INPUTS)]
    assert names == [DISCOVER, "split", "judge", "formalize", "trivial", "prove"]
    assert [name for name, _ in wired(cfg)] == names[1:]
    assert set(streaming_cpus(cfg, waves=1)) - NOT_STAGES == {"discover", "judge", "formalize", "trivial", "prove"}
    rows = capacity_plan.make_plan(overrides).work.rows
    assert DECONTAMINATE not in rows and "faithfulness" not in rows


@pytest.mark.slow
def test_a_shortened_pipeline_is_what_the_plan_and_the_capacity_model_count():
    overrides = [DEMO, "pipeline=[discover,split,formalize,prove]"]
    cfg = load_config(overrides)
    assert [name for name, _ in wired(cfg)] == ["split+dedup" if cfg.dedup.enabled else "split", "formalize",
                                                 "prove"]
    estimate = capacity_plan.make_plan(overrides)
    assert set(estimate.work.calls) == {DISCOVER, "formalize", "diagnose", "prove"}
    assert set(estimate.work.checks) == {"formalize", "prove"}
    full = capacity_plan.make_plan([DEMO])
    # Nothing judged and nothing set aside as trivial: more statements reach formalize and the provers.
    assert estimate.work.rows["formalize"] > full.work.rows["formalize"]
    assert estimate.work.rows["prove"] > full.work.rows["prove"]


@pytest.mark.parametrize(("listed", "line"), [
    ("[discover,split,prove,formalize]",
     "pipeline: prove takes rows compiled, which no stage before it gives (before it: discover, split)"),
    ("[discover,judge,split]", "pipeline: judge takes rows discovered, which no stage before it gives"),
    ("[discover,split,judgee]", "pipeline entry judgee is not a stage: did you mean judge?"),
    ("[discover,split,judge,judge]", "pipeline lists judge twice"),
    ("[discover,split,operators.judge:STAGE]", "pipeline entry operators.judge:STAGE: operators.judge.STAGE is a str,"),
    ("[discover,split,no_such_package.stage:STAGE]", "pipeline entry no_such_package.stage:STAGE: cannot import"),
])
def test_a_pipeline_that_cannot_work_is_one_line_naming_the_entry(listed, line):
    cfg = load_config([DEMO, "dedup.enabled=false", f"pipeline={listed}"])
    with pytest.raises(PipelineError) as raised:
        pipeline(cfg, INPUTS)
    message = str(raised.value)
    assert message.startswith(line) and "\n" not in message


EXTRA_STAGE = '''
    from typing import Any

    import pyarrow as pa

    from operators.rows.candidates import DISCOVERED
    from operators.stage import Resources, Stage

    SET_ASIDE = "set_aside"


    def set_aside(batch: pa.Table) -> pa.Table:
        return batch


    def arguments(cfg: Any, shared: Any) -> dict[str, Any]:
        return {}


    STAGE = Stage(name="second_judge", operator=set_aside, arguments=arguments,
                  resources=Resources(actors=3, max_concurrent_calls_per_actor=4, batch_size=2, num_cpus=0.5),
                  takes=frozenset({DISCOVERED}), gives=frozenset({DISCOVERED, SET_ASIDE}),
                  calls={"second_judge": ("judge",)}, checks_lean=True)
'''


@pytest.fixture
def extra_stage(tmp_path, monkeypatch) -> str:
    """A stage declared in a module of its own, outside Folklore, as `pipeline:` names it."""
    module = tmp_path / "lab_stages.py"
    module.write_text(textwrap.dedent(EXTRA_STAGE))
    monkeypatch.syspath_prepend(str(tmp_path))
    yield "lab_stages:STAGE"
    sys.modules.pop("lab_stages", None)


@pytest.mark.slow
def test_a_stage_declared_outside_folklore_is_seen_everywhere_from_its_declaration_alone(extra_stage):
    overrides = [DEMO, f"pipeline=[discover,split,judge,{extra_stage},formalize,trivial,prove]"]
    cfg = load_config(overrides)
    # The plan wires it where the list puts it, with the resources its declaration gives.
    steps = dict(wired(cfg))
    assert list(steps)[1:3] == ["judge", "second_judge"]
    options = steps["second_judge"]
    assert options["batch_size"] == 2 and options["num_cpus"] == 0.5 and options["compute"].max_size == 3
    assert options["fn_constructor_kwargs"]["pool"] is not None  # it checks Lean
    # The CPU check reserves its actors.
    assert streaming_cpus(cfg, waves=1)["second_judge"] == 3 * 0.5
    # The capacity model and plan give it rows, calls, Lean checks and a wall-time bound of its own.
    shape = mining_shape(cfg)
    assert shape.stage_slots["second_judge"] == 3 * 4 * 2
    assert shape.row_stage_of_call["second_judge"] == "second_judge"
    estimate = capacity_plan.make_plan(overrides)
    assert estimate.work.rows["second_judge"] == estimate.work.rows["formalize"] > 0
    assert estimate.work.calls["second_judge"].calls == estimate.work.rows["second_judge"]
    assert estimate.work.checks["second_judge"] == estimate.work.rows["second_judge"]
    assert "stage second_judge" in estimate.needs.bounds_s
    # The LLM budget check holds its calls to the judge's model.
    assert call_roles(pipeline(cfg, INPUTS), ["prover"])["second_judge"] == ("judge",)
    # The report's cost table gives it a row.
    call = {"stage": "second_judge", "model": "m", "attempt": 1, "prompt_tokens": 10, "completion_tokens": 5,
            "latency_s": 1.0, "error_kind": None, "finish_reason": "stop"}
    candidates = pl.from_arrow(candidates_table([empty_candidate(candidate_id="c", seed_id="s", llm_calls=[call])]))
    cost = stats.cost_by_stage(candidates, None, pipeline(cfg, INPUTS))
    row = cost.filter(pl.col("stage") == "second_judge").row(0, named=True)
    assert (row["llm_calls"], row["prompt_tokens"]) == (1, 10)


@pytest.mark.slow
def test_every_prompt_a_stage_declares_is_in_its_jobs_config():
    for job, overrides in JOBS.items():
        cfg = compose_config(job, [DEMO, *overrides])
        for entry in cfg.pipeline:
            stage = DECLARED[str(entry)]
            missing = [key for key in stage.prompts if key not in cfg.prompts]
            assert missing == [], f"{job}: {stage.name} declares prompts its config lacks"


@pytest.mark.slow
def test_every_stage_declares_statuses_and_resources_its_jobs_config_has():
    for job, overrides in JOBS.items():
        cfg = compose_config(job, [DEMO, *overrides])
        for entry in cfg.pipeline:
            stage = DECLARED[str(entry)]
            assert stage.takes and stage.gives
            assert stage.resources_of(cfg) is not None or stage.name == "split", f"{job}: {stage.name} has no resources"
            if isinstance(stage.resources, str):  # a config section: the job's schema declares it a stage's shape
                declared = schema.key_at(job, stage.resources)
                assert declared is not None and declared.annotation is Resources and declared.speed, (job, stage.name)


def test_a_stage_settings_are_built_from_its_own_section():
    cfg = load_config([DEMO, "judge.samples=3"])
    shared = Shared(prompts=dict(cfg.prompts), index=None, grounding=None, subgoals=None, table="candidates",
                    benchmark_problems=tuple)
    assert DECLARED["judge"].arguments(cfg, shared)["judge"].samples == 3


def test_the_report_funnel_counts_what_decontaminate_marked():
    candidates = pl.DataFrame({
        "domain": ["a", "a", "a"], "seed_id": ["s", "s", "s"], "judge_verdict": [None, True, None],
        "status": ["contaminated", "proved", "duplicate"], "trivial": [None, False, None]})
    row = stats.funnel_by_domain(candidates, ["a"]).filter(pl.col("domain") == "all").row(0, named=True)
    assert (row["proposed"], row["duplicate"], row["contaminated"], row["proved"]) == (3, 1, 1, 1)


def test_the_stage_list_is_declared_in_one_place():
    """No module of the code spells the mining stages out as a list of names: `pipeline:` in conf/ does."""
    spelled = '"judge", "formalize"'
    found = [path.relative_to(REPO) for room in ("pipelines", "operators", "lean_pool")
             for path in (REPO / room).rglob("*.py") if spelled in path.read_text()]
    assert found == []
