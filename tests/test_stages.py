"""The stages a job runs are declared once (`operators/stages.py`): the plan `mine` wires, the pre-start CPU check,
the capacity model and the report's funnel count the same ones, optional stages included."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import polars as pl

from operators.stages import DECONTAMINATE, MINING_STAGES, STATEMENT_STAGES, running
from pipelines.reporting import capacity_plan, stats
from pipelines.reporting.capacity import streaming_cpus
from pipelines.runtime import stages
from pipelines.runtime.job import load_config

DEMO = "preset=demo"
REPO = Path(__file__).resolve().parents[1]
NOT_STAGES = {"writer", "lean pool"}


def every_stage_on(shared_dir: Path) -> list[str]:
    """The demo with each optional stage switched on: dedup, decontaminate (a benchmark named), faithfulness."""
    return [DEMO, "dedup.enabled=true", "faithfulness.enabled=true",
            f"decontaminate.benchmarks=[{shared_dir / 'fixtures' / 'minif2f-lean4-valid'}]"]


class FakePool:
    """What a Lean stage asks of the pool when its `Stage` is built: a handle with its checks' priority."""

    def with_priority(self, priority: int) -> FakePool:
        return self


def wired_stage_names(cfg: Any) -> list[str]:
    """The names of the stages `mine` would put after discover into a wave's plan for `cfg`, built by the same code
    with a job whose options are plain dicts (no Ray started)."""
    def options(stage: str, **kwargs: Any) -> dict[str, Any]:
        return {"stage": stage, **kwargs}

    job = SimpleNamespace(cfg=cfg, pool=FakePool(), steps=SimpleNamespace(
        subgoals=None, dedup=object(), decontaminate=object(), judge=object(), formalize=object(),
        faithfulness=object(), trivial=object(), prove=object()),
        operator_options=options, llm_options=options, dedup_options=lambda **kwargs: kwargs)
    return [stage.name for stage in stages.verify_stages(job, priority=0)]


def test_every_optional_stage_on_is_counted_by_the_plan_the_cpu_check_and_the_capacity_model(shared_dir):
    overrides = every_stage_on(shared_dir)
    cfg = load_config(overrides)
    declared = running(MINING_STAGES, cfg)
    names = [spec.name for spec in declared]
    assert names == ["discover", "split+dedup", DECONTAMINATE, "judge", "formalize", "faithfulness", "trivial",
                     "prove"]
    assert wired_stage_names(cfg) == names[1:]
    cpus = streaming_cpus(cfg, waves=1)
    assert set(cpus) - NOT_STAGES == {spec.shape for spec in declared if spec.shape is not None}
    assert cpus[DECONTAMINATE] == float(cfg.stages.decontaminate.num_cpus)
    estimate = capacity_plan.make_plan(overrides)
    rows = {stage for stage, count in estimate.work.rows.items() if count > 0}
    assert rows == {"discover", *(spec.name for spec in declared if spec.name not in ("split", "split+dedup"))}


def test_stages_that_are_off_are_neither_wired_nor_counted():
    cfg = load_config([DEMO, "dedup.enabled=false", "faithfulness.enabled=false"])
    names = [spec.name for spec in running(MINING_STAGES, cfg)]
    assert names == ["discover", "split", "judge", "formalize", "trivial", "prove"]
    assert wired_stage_names(cfg) == names[1:]
    assert set(streaming_cpus(cfg, waves=1)) - NOT_STAGES == {"discover", "judge", "formalize", "trivial", "prove"}
    rows = capacity_plan.make_plan([DEMO, "dedup.enabled=false", "faithfulness.enabled=false"]).work.rows
    assert rows[DECONTAMINATE] == 0 and rows["faithfulness"] == 0


def test_evaluate_runs_the_declared_statement_stages():
    cfg = load_config([DEMO, "faithfulness.enabled=true"])
    assert [spec.name for spec in running(STATEMENT_STAGES, cfg)] == ["formalize", "faithfulness", "trivial", "prove"]


def test_the_report_funnel_counts_what_decontaminate_marked():
    candidates = pl.DataFrame({
        "domain": ["a", "a", "a"], "seed_id": ["s", "s", "s"], "judge_verdict": [None, True, None],
        "status": ["contaminated", "proved", "duplicate"], "trivial": [None, False, None]})
    row = stats.funnel_by_domain(candidates, ["a"]).filter(pl.col("domain") == "all").row(0, named=True)
    assert (row["proposed"], row["duplicate"], row["contaminated"], row["proved"]) == (3, 1, 1, 1)


def test_the_stage_list_is_declared_in_one_place():
    """No other module spells the mining stages out as a list of names."""
    spelled = '"judge", "formalize"'
    found = [path.relative_to(REPO) for room in ("pipelines", "operators", "lean_pool")
             for path in (REPO / room).rglob("*.py") if spelled in path.read_text()]
    assert found == []
