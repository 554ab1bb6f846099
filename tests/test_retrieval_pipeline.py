"""Dedup and grounding inside the pipelines, on a declaration index of a small Lean tree of the test's own:
restatements of its declarations are dropped before the judge, grounded prompts carry real names and keep
the code to work on last, and a run refuses an index that cannot serve it."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pytest
import ray
import yaml
from omegaconf import OmegaConf

from lean_pool.session_check import CheckResult
from operators.formalize import FormalizeOperator
from operators.llm.settings import settings_from_config
from operators.llm.sim.scripts import last_lean_block
from operators.llm.sim.server import SimServer
from operators.prove import ProveOperator
from pipelines import index as index_pipeline
from pipelines import mine
from pipelines.jobs.mining import MiningJob, load_config
from tests.mine_support import (
    REPO,
    SIM_CONF,
    make_seeds,
    overrides,
    predicted_status,
    read_table,
    sibling_duplicates,
    sim_server_config,
)

pytestmark = pytest.mark.ray

# What the index knows: two of the sim's discover statements are restated here, under other bound names.
FOLK = """import Mathlib.Init

namespace Folk

/-- Adding zero changes nothing. -/
theorem add_zero' (m : ℕ) : m + 0 = m := Nat.add_zero m

theorem mul_one' (k : ℕ) : k * 1 = k := Nat.mul_one k

theorem succ_pos' (n : ℕ) : 0 < Nat.succ n := Nat.succ_pos n

end Folk
"""
RESTATED_IN_INDEX = {"(n : ℕ) : n + 0 = n": "Folk.add_zero'", "(n : ℕ) : n * 1 = n": "Folk.mul_one'"}
SAMPLES = 2


@pytest.fixture(scope="module")
def index_dir(tmp_path_factory):
    """The index of the Folk tree, with Ray running for the module."""
    root = tmp_path_factory.mktemp("folk")
    (root / "Folk").mkdir()
    (root / "Folk" / "Basic.lean").write_text(FOLK)
    out = tmp_path_factory.mktemp("index") / "decls"
    ray.init(num_cpus=10, include_dashboard=False, log_to_driver=False)
    try:
        assert index_pipeline.main([f"mathlib_dir={root}", f"out={out}"]) == 0
        yield out
    finally:
        ray.shutdown()


def _sim_statement(row: dict[str, Any]) -> str:
    line = next(line for line in row["statement_raw"].splitlines() if line.startswith("theorem "))
    return line.split(" ", 2)[2].split(" := by sorry")[0]


def test_mine_drops_restatements_of_the_index_and_of_siblings_with_grounding_on(index_dir, tmp_path):
    seed_list = make_seeds(tmp_path / "seeds")
    with SimServer(sim_server_config(median_s=0.01)) as server:
        args = overrides(tmp_path / "run", tmp_path / "seeds", seed_list, server.base_url, SAMPLES)
        assert mine.main([*args, f"index.dir={index_dir}", "grounding.enabled=true"]) == 0
    rows = read_table(tmp_path / "run", "candidates").to_dicts()
    in_index = {row["candidate_id"]: RESTATED_IN_INDEX[_sim_statement(row)] for row in rows
                if _sim_statement(row) in RESTATED_IN_INDEX}
    assert in_index, "the sim proposed some statement the index holds"
    for row in rows:
        if row["candidate_id"] in in_index:
            assert (row["status"], row["dedup_kind"], row["dedup_match"]) == ("duplicate", "mathlib",
                                                                              in_index[row["candidate_id"]])
    siblings = sibling_duplicates([row for row in rows if row["candidate_id"] not in in_index])
    script = yaml.safe_load(SIM_CONF.read_text())["sim"]["script"]
    expected = {row["candidate_id"]: "duplicate" if row["candidate_id"] in in_index
                else predicted_status(row, script, 0, 10, 2, siblings) for row in rows}
    assert {row["candidate_id"]: row["status"] for row in rows} == expected, \
        "grounded prompts still get the scripted repairs and proofs: the code to work on stays last"
    assert Counter(expected.values())["proved"] > 0
    dedup, grounding = (json.loads(rows[0]["provenance"][stage]) for stage in ("dedup", "grounding"))
    configured = yaml.safe_load((REPO / "conf" / "dedup" / "default.yaml").read_text())["threshold"]
    assert dedup["threshold"] == configured and dedup["index_rev"].startswith("sha256:")
    assert grounding["index_rev"] == dedup["index_rev"] and grounding["k"] > 0


def test_a_run_refuses_an_index_it_cannot_use(index_dir, tmp_path, capsys):
    base = ["preset=demo", f"run_dir={tmp_path / 'run'}"]
    assert mine.main([*base, f"index.dir={index_dir}", "dedup.enabled=true", "embedding.model_id=another"]) == 2
    assert "embedded with all-MiniLM" in capsys.readouterr().err
    assert mine.main([*base, f"index.dir={tmp_path / 'none'}", "grounding.enabled=true"]) == 2
    assert "no index there" in capsys.readouterr().err
    assert mine.main([*base, "grounding.enabled=true"]) == 2
    assert "needs index.dir" in capsys.readouterr().err
    assert not (tmp_path / "run" / "candidates").exists()


class _ScriptedPool:
    """A Lean pool stand-in for one operator: the first statement check reports an unknown name, then all pass."""

    def __init__(self) -> None:
        self.checks = 0

    async def check(self, code: str, **_: Any) -> CheckResult:
        self.checks += 1
        if self.checks == 1:
            message = {"severity": "error", "pos": {"line": 3, "column": 8},
                       "data": "unknown identifier 'Folk.add_zro'"}
            return CheckResult(status="error", ok=False, reasons=["Lean reported errors"], messages=[message])
        return CheckResult(status="passed", ok=True, reasons=[])

    async def replay(self, code: str, **_: Any) -> None:
        """The replay is off for this stand-in."""
        return None


def _recording(operator_class: type) -> type:
    class Recording(operator_class):
        """The operator, keeping every request it sends."""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.sent: list[Any] = []

        async def complete(self, request: Any) -> Any:
            self.sent.append(request)
            return await super().complete(request)

    return Recording


async def test_grounded_prompts_show_related_declarations_and_real_names_for_an_unknown_one(index_dir, tmp_path):
    cfg = load_config(["preset=demo", f"run_dir={tmp_path / 'run'}", f"index.dir={index_dir}",
                       "grounding.enabled=true"])
    settings_cfg = OmegaConf.to_container(cfg.llm, resolve=True)
    steps = MiningJob(cfg).pipeline  # the settings a run hands its actors
    statement = "import Mathlib\n\ntheorem t (a : ℕ) : a + 0 = a := by sorry\n"
    with SimServer(sim_server_config(median_s=0.01)) as server:
        settings = settings_from_config(settings_cfg).with_base_url("sim", server.base_url)
        formalize = _recording(FormalizeOperator)(settings, formalize=steps.of("formalize")["formalize"],
                                                  pool=_ScriptedPool())
        row = {"candidate_id": "x/s0/c0", "status": "discovered", "statement_raw": statement,
               "llm_calls": [], "prompt_tokens": 0, "completion_tokens": 0, "lean_checks": 0, "lean_seconds": 0.0,
               "lean_imports": 0}
        done = await formalize.process_row(dict(row))
        prove = _recording(ProveOperator)(settings, prove=steps.of("prove")["prove"], pool=_ScriptedPool())
        await prove.process_row({**done, "status": "compiled", "statement": statement, "proofs": []})
    assert done["status"] == "compiled" and done["formalize_repairs"] == 1
    (repair,) = formalize.sent
    prompt = repair.messages[-1]["content"]
    assert "Folk.add_zero' (m : ℕ) : m + 0 = m" in prompt
    assert "Lean does not know `Folk.add_zro`" in prompt and "- Folk.add_zero'" in prompt
    assert last_lean_block(prompt).startswith("import Mathlib"), "the code to repair is still the last block"
    first_proof = prove.sent[0].messages[-1]["content"]
    assert "Folk.add_zero' (m : ℕ) : m + 0 = m" in first_proof and "Lean does not know" not in first_proof
    assert last_lean_block(first_proof) == statement.strip()
