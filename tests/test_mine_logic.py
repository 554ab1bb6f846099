"""The mining pipeline's pure pieces: seeds, ids, splitting, prompts, loop helpers, summaries, run directory."""

from __future__ import annotations

import contextlib
import os
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

import psutil
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import ray
from omegaconf import OmegaConf
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from lean_pool.pool import LeanPool
from lean_pool.session_check import CheckResult
from operators.discover import DISCOVERY_SCHEMA, NO_ANSWER, SEED_WORK_SCHEMA, seed_units
from operators.formalize import keep_imports, rejection
from operators.judge import majority
from operators.llm import prompts
from operators.llm.sim.scripts import last_lean_block
from operators.prove import best_proof, with_environment
from operators.rows.candidates import CANDIDATE_SCHEMA, ERROR_INFRA, PROVED, STATUSES, candidates_table, funnel
from operators.rows.seeds import EMPTY, NOT_UTF8, OK, TOO_LONG, decode_seed, domain_of, seed_id, select
from operators.split import (
    DISCOVERED,
    NO_LEMMAS,
    NO_MARKER,
    SEED_ITEM_SCHEMA,
    explode,
    explode_seeds,
    split_answer,
    split_seeds,
)
from operators.trivial import with_tactic
from pipelines.jobs.mining import load_config
from pipelines.reporting.summary import seeds_table, status_counts_by_seed
from pipelines.runtime.job import ROW_BLOCK_BYTES, Job, configure_data_context
from pipelines.runtime.off_driver import OffDriver
from pipelines.runtime.run_dir import RunDir
from pipelines.runtime.waves import SeedWave, may_start, run_overlapping, seed_waves

MARKER = "brainstormed mathlib lemmas"
# The cap of lemmas kept per discover answer in these tests (discover.max_lemmas).
MAX_LEMMAS = 50


@pytest.fixture(scope="module")
def cfg():
    return load_config([], complete=False)


@pytest.fixture(scope="module")
def templates(cfg):
    return OmegaConf.to_container(cfg.prompts)


# --- config ---------------------------------------------------------------------------------------------


def test_default_config_is_real_backends_with_the_papers_budgets(cfg):
    assert cfg.llm.backend == "openai" and cfg.lean.backend == "repl"
    assert cfg.formalize.max_repairs == 10 and cfg.prove.max_repairs == 2
    assert cfg.llm.sampling.discover.temperature == 1.0 and cfg.llm.sampling.discover.top_p == 1.0
    assert cfg.prove.marker == "### Complete Lean 4 Proof" and cfg.formalize.marker == "error-free code"
    assert "import Aesop" in cfg.prove.env_lines


@pytest.mark.slow
def test_demo_preset_switches_to_simulators_and_shipped_seeds():
    demo = load_config(["preset=demo"])
    assert demo.llm.backend == "sim" and demo.lean.backend == "sim"
    seeds = sorted(Path(demo.seeds.root).rglob("*.lean"))
    assert len(seeds) >= 3


# --- seeds ----------------------------------------------------------------------------------------------


def test_seed_id_is_the_module_name():
    assert seed_id("Mathlib/Data/Finset/Max.lean") == "Mathlib.Data.Finset.Max"


def test_domain_table_reproduces_the_mathliblemma_split(cfg, mathliblemma_dir):
    """Every seed of the fixture sample lands in the domain the MathlibLemma dataset filed it under."""
    domains = OmegaConf.to_container(cfg.seeds.domains)
    seen = 0
    for directory in (mathliblemma_dir / "benchmark").iterdir():
        for lean_file in directory.rglob("*.lean"):
            seed_path = lean_file.parent.relative_to(directory)
            module = "Mathlib." + ".".join(seed_path.parts)
            assert domain_of(module, domains, "other") == directory.name, module
            seen += 1
    assert seen > 0


def test_domain_prefix_matches_whole_components():
    assert domain_of("Mathlib.DataX.Foo", {"Mathlib.Data": "foundational"}, "other") == "other"
    assert domain_of("Mathlib.Data", {"Mathlib.Data": "foundational"}, "other") == "foundational"


def test_select_keeps_lean_files_matching_globs():
    paths = ["Mathlib/A.lean", "Mathlib/B/C.lean", "Mathlib/B/D.txt", "Other/E.lean", "Mathlib/Tactic/F.lean"]
    assert select(paths, ["Mathlib/**"], ["Mathlib/Tactic/*"]) == ["Mathlib/A.lean", "Mathlib/B/C.lean"]


@pytest.mark.parametrize(
    ("data", "status"),
    [(b"\xff\xfe not utf8", NOT_UTF8), (b"", EMPTY), (b"  \n\n", EMPTY), (b"x" * 400, TOO_LONG), (b"theorem a", OK)],
)
def test_decode_seed_gives_a_status_per_bad_input(data, status):
    seed = decode_seed(data, max_tokens=100, chars_per_token=2.0)
    assert seed.status == status
    assert (seed.text is not None) == (status == OK)
    assert (seed.reason is None) == (status == OK)


# --- split ----------------------------------------------------------------------------------------------


def test_split_answer_statuses():
    assert split_answer("no marker here", MARKER, MAX_LEMMAS).status == NO_MARKER
    no_lemma = f"plan\n{MARKER}\n```lean\nimport Mathlib\ndef x := 1\n```"
    assert split_answer(no_lemma, MARKER, MAX_LEMMAS).status == NO_LEMMAS
    answer = f"plan\n{MARKER}\n```lean\nimport Mathlib\n\ntheorem a : 1 = 1 := sorry\n\nlemma b : 2 = 2 := sorry\n```"
    split = split_answer(answer, MARKER, MAX_LEMMAS)
    assert split.status == DISCOVERED and len(split.snippets) == 2 and (split.dropped, split.reason) == (0, None)
    assert all(snippet.startswith("import Mathlib") for snippet in split.snippets)


def test_an_answer_past_the_cap_keeps_the_first_lemmas_and_counts_the_rest_dropped():
    lemmas = "\n\n".join(f"theorem t{number} : {number} = {number} := sorry" for number in range(MAX_LEMMAS + 10))
    split = split_answer(f"plan\n{MARKER}\n```lean\nimport Mathlib\n\n{lemmas}\n```", MARKER, MAX_LEMMAS)
    assert (split.status, len(split.snippets), split.dropped) == (DISCOVERED, MAX_LEMMAS, 10)
    assert "theorem t0 " in split.snippets[0] and f"theorem t{MAX_LEMMAS - 1} " in split.snippets[-1]
    assert split.reason == f"10 of {MAX_LEMMAS + 10} lemmas dropped: discover.max_lemmas={MAX_LEMMAS}"


def _discovery(snippets: list[str], seed: str = "Mathlib.X", sample: int = 1) -> dict:
    return {
        "unit_id": f"{seed}/s{sample}", "seed_id": seed, "seed_path": seed.replace(".", "/") + ".lean",
        "domain": "d", "sample": sample, "snippets": snippets, "provenance": None,
        "finished_at": datetime.now(UTC),
    }


def test_explode_gives_stable_ids_one_candidate_per_snippet():
    rows = explode(_discovery(["a", "b", "c"]))
    assert [row["candidate_id"] for row in rows] == ["Mathlib.X/s1/c0", "Mathlib.X/s1/c1", "Mathlib.X/s1/c2"]
    assert [row["statement_raw"] for row in rows] == ["a", "b", "c"]
    table = candidates_table(rows)
    assert table.schema == CANDIDATE_SCHEMA and set(table.column("status").to_pylist()) == {"discovered"}


def test_a_seed_is_exploded_whole_from_every_file_that_holds_it(tmp_path):
    """A resumed discover writes a seed's later samples to new files; its candidates still leave together."""
    first, second = str(tmp_path / "a.parquet"), str(tmp_path / "b.parquet")
    pq.write_table(pa.Table.from_pylist([_discovery(["a", "b"], sample=0),
                                         _discovery(["y"], seed="Mathlib.Y", sample=0)],
                                        schema=DISCOVERY_SCHEMA), first)
    pq.write_table(pa.Table.from_pylist([_discovery(["c"], sample=1)], schema=DISCOVERY_SCHEMA), second)
    items = pa.Table.from_pylist([{"seed_id": "Mathlib.X", "paths": [first, second]}])
    table = explode_seeds(items)
    assert table.schema == CANDIDATE_SCHEMA
    assert sorted(table.column("candidate_id").to_pylist()) == ["Mathlib.X/s0/c0", "Mathlib.X/s0/c1", "Mathlib.X/s1/c0"]


def test_a_seed_leaves_out_only_its_own_candidates_an_earlier_run_finished(tmp_path):
    """Finished ids are read per seed from the candidate files the seed item names, never as one set of all."""
    discoveries = str(tmp_path / "d.parquet")
    pq.write_table(pa.Table.from_pylist([_discovery(["a", "b", "c"], sample=0)], schema=DISCOVERY_SCHEMA), discoveries)
    written = str(tmp_path / "c.parquet")
    pq.write_table(candidates_table([*explode(_discovery(["a"], sample=0)),
                                     *explode(_discovery(["z", "y"], seed="Mathlib.Y", sample=0))]), written)
    item = {"seed_id": "Mathlib.X", "paths": [discoveries], "finished_files": [written], "subgoal_depth": 0}
    left = split_seeds(pa.Table.from_pylist([item], schema=SEED_ITEM_SCHEMA))
    assert left.column("candidate_id").to_pylist() == ["Mathlib.X/s0/c1", "Mathlib.X/s0/c2"]
    fresh = pa.Table.from_pylist([{**item, "finished_files": []}], schema=SEED_ITEM_SCHEMA)
    assert split_seeds(fresh).num_rows == 3


def test_a_seed_work_item_becomes_one_discover_call_per_sample_still_to_draw():
    work = {"seed_id": "Mathlib.X", "seed_path": "Mathlib/X.lean", "seed_file": "/s/Mathlib/X.lean", "domain": "d",
            "samples": [0, 2], "round": 1, "known": [], "paths": [], "finished_files": []}
    units = seed_units(pa.Table.from_pylist([work], schema=SEED_WORK_SCHEMA)).to_pylist()
    assert [(unit["unit_id"], unit["sample"], unit["seed_file"]) for unit in units] == [
        ("Mathlib.X/s0", 0, "/s/Mathlib/X.lean"), ("Mathlib.X/s2", 2, "/s/Mathlib/X.lean")]
    later = seed_units(pa.Table.from_pylist([{**work, "round": 2, "known": ["theorem t : True := trivial"]}],
                                            schema=SEED_WORK_SCHEMA)).to_pylist()
    assert [(unit["unit_id"], unit["round"], unit["known"]) for unit in later][0] == (
        "Mathlib.X/r2/s0", 2, ["theorem t : True := trivial"])


# --- prompts --------------------------------------------------------------------------------------------


def test_repair_prompts_end_with_the_current_code(templates):
    """The code to repair is the last fenced lean block; the history before it keeps every attempt."""
    attempts = [
        {"code": "theorem a : 1 = 2 := sorry",
         "diagnostics": [{"severity": "error", "line": 1, "column": 0, "message": "boom"}]},
        {"code": "theorem a : 1 = 3 := sorry", "diagnostics": []},
    ]
    user = prompts.formalize_messages(templates, attempts, "error-free code")[-1]["content"]
    assert last_lean_block(user) == attempts[-1]["code"]
    assert "boom" in user and "theorem a : 1 = 2" in user and "error-free code" in user
    first = prompts.prove_messages(templates, "theorem s : True := sorry", ["import Aesop"], "### P", [])[-1]["content"]
    assert last_lean_block(first) == "theorem s : True := sorry" and "import Aesop" in first
    repair = prompts.prove_messages(templates, "theorem s : True := sorry", [], "### P", attempts)[-1]["content"]
    assert last_lean_block(repair) == attempts[-1]["code"]


def test_discover_prompt_carries_the_whole_seed(templates):
    seed = "theorem x : True := trivial\n" * 50
    user = prompts.discover_messages(templates, seed, MARKER, 100)[-1]["content"]
    assert seed.strip() in user and MARKER in user and "100" in user
    known = ["theorem found_before (n : ℕ) : n + 0 = n := by\n  simp"]
    later = prompts.discover_messages(templates, seed, MARKER, 100, known)[-1]["content"]
    assert later.startswith(user) and known[0] in later and known[0] not in user


# --- loop helpers ---------------------------------------------------------------------------------------


def test_repairs_keep_the_original_imports():
    repaired = keep_imports("import Mathlib\n\ntheorem a : 1 = 1 := sorry",
                            "import Mathlib\nimport Evil\ntheorem a : 1 = 1 := by sorry")
    assert repaired.startswith("import Mathlib\n") and "Evil" not in repaired and "theorem a" in repaired


def test_already_declared_and_refusals_are_final_rejections():
    declared = CheckResult(status="error", ok=False, reasons=[], messages=[
        {"severity": "error", "pos": {"line": 3, "column": 8}, "data": "'Nat.add_zero' has already been declared"}])
    assert "Nat.add_zero" in rejection(declared)
    refused = CheckResult(status="refused", ok=False, reasons=["`#eval` runs code"])
    assert "#eval" in rejection(refused)
    plain = CheckResult(status="error", ok=False, reasons=[], messages=[
        {"severity": "error", "pos": {"line": 1, "column": 0}, "data": "unknown identifier 'foo'"}])
    assert rejection(plain) is None


def test_proof_file_puts_every_import_first():
    code = with_environment(["import Mathlib", "import Aesop", "open Real"],
                            "import Mathlib\nimport Extra\n\ntheorem t : True := trivial")
    lines = code.splitlines()
    assert lines[:4] == ["import Mathlib", "import Aesop", "import Extra", "open Real"]
    assert lines[-1] == "theorem t : True := trivial"


def test_best_proof_takes_the_fewest_repairs():
    proofs = [
        {"role": "a", "proved": True, "success_at": 2},
        {"role": "b", "proved": True, "success_at": 0},
        {"role": "c", "proved": False, "success_at": None},
    ]
    assert best_proof(proofs)["role"] == "b"
    assert best_proof([proofs[2]]) is None


def test_trivial_check_replaces_sorry_tokens_only():
    assert with_tactic("theorem sorry_free : x := by sorry", "aesop") == "theorem sorry_free : x := by aesop"


def test_judge_majority_is_strict():
    assert majority([True]) and not majority([False])
    assert not majority([True, False]) and majority([True, True, False])


# --- summary and run directory --------------------------------------------------------------------------


def _discovery_rows() -> pa.Table:
    rows = [
        {"unit_id": "A/s0", "seed_id": "A", "seed_path": "A.lean", "domain": "d", "seed_status": OK, "seed_chars": 10,
         "status": DISCOVERED, "prompt_tokens": 5, "completion_tokens": 7},
        {"unit_id": "A/s1", "seed_id": "A", "seed_path": "A.lean", "domain": "d", "seed_status": OK, "seed_chars": 10,
         "status": ERROR_INFRA, "reason": "discover: infrastructure failure", "prompt_tokens": 0,
         "completion_tokens": 0},
        {"unit_id": "B/s0", "seed_id": "B", "seed_path": "B.lean", "domain": "d", "seed_status": EMPTY, "seed_chars": 0,
         "status": EMPTY, "reason": "the file is empty or blank", "prompt_tokens": 0, "completion_tokens": 0},
    ]
    return pa.Table.from_pylist(rows, schema=DISCOVERY_SCHEMA)


def test_seeds_table_reports_bad_seeds_and_counts_per_status():
    first = pa.table({"seed_id": ["A", "A"], "status": [PROVED, ERROR_INFRA]})
    second = pa.table({"seed_id": ["A"], "status": [PROVED]})  # the same seed's rows in another file
    counts = pa.concat_tables([status_counts_by_seed(first), status_counts_by_seed(second)])
    seeds = {row["seed_id"]: row for row in seeds_table(_discovery_rows(), counts).to_pylist()}
    assert seeds["A"]["status"] == ERROR_INFRA and seeds["A"]["samples"] == 2 and seeds["A"]["candidates"] == 3
    assert seeds["A"]["n_proved"] == 2 and seeds["A"]["n_error_infra"] == 1 and seeds["A"]["n_trivial"] == 0
    assert seeds["B"]["status"] == EMPTY and seeds["B"]["candidates"] == 0 and "empty" in seeds["B"]["reason"]


def test_a_seed_whose_every_discover_call_was_refused_is_not_ok_and_says_why():
    refused = "bad_request: max_tokens=8192 cannot be greater than max_model_len=4096."
    rows = [{"unit_id": f"{seed}/s{sample}", "seed_id": seed, "seed_path": f"{seed}.lean", "domain": "d",
             "seed_status": OK, "seed_chars": 10, "status": status, "reason": reason, "prompt_tokens": 0,
             "completion_tokens": 0}
            for seed, sample, status, reason in [("A", 0, NO_ANSWER, refused), ("A", 1, NO_ANSWER, refused),
                                                 ("B", 0, NO_ANSWER, refused), ("B", 1, DISCOVERED, None)]]
    seeds = {row["seed_id"]: row for row in seeds_table(pa.Table.from_pylist(rows, schema=DISCOVERY_SCHEMA),
                                                        status_counts_by_seed(CANDIDATE_SCHEMA.empty_table())
                                                        ).to_pylist()}
    assert (seeds["A"]["status"], seeds["A"]["reason"]) == (NO_ANSWER, refused)
    assert seeds["B"]["status"] == OK, "one answered sample is a seed that was mined"
    assert "unanswered" not in seeds["A"]


def test_funnel_lists_every_status_in_order():
    counts = funnel(["proved", "trivial", "proved"])
    assert list(counts) == list(STATUSES) and counts["proved"] == 2 and counts["compiled"] == 0


def test_prepare_removes_partial_files_and_drops_retried_rows(tmp_path):
    run = RunDir(str(tmp_path / "run"))
    table_dir = tmp_path / "run" / "discoveries"
    table_dir.mkdir(parents=True)
    pq.write_table(_discovery_rows(), table_dir / "a.parquet")
    (table_dir / "b.parquet").write_bytes(b"PAR1 cut short by a kill")
    repair = run.prepare("discoveries", {ERROR_INFRA})
    assert (repair.partial_files_removed, repair.retried_rows_dropped) == (1, 1)
    assert run.ids("discoveries", "unit_id") == {"A/s0", "B/s0"}
    assert [p.name for p in table_dir.iterdir()] == ["a.parquet"]
    assert run.prepare("discoveries", {ERROR_INFRA}) == type(repair)(0, 0)


def test_waves_take_discovered_seeds_first_and_never_exceed_their_size():
    to_discover = [{"seed_id": f"new{i}"} for i in range(5)]
    to_split = [{"seed_id": f"old{i}"} for i in range(3)]
    waves = seed_waves(to_discover, to_split, 3)
    assert [wave.index for wave in waves] == [0, 1, 2]
    assert [([d["seed_id"] for d in wave.to_discover], [s["seed_id"] for s in wave.to_split]) for wave in waves] == [
        ([], ["old0", "old1", "old2"]), (["new0", "new1", "new2"], []), (["new3", "new4"], [])]
    assert seed_waves([], [], 3) == []
    assert len(seed_waves(to_discover, to_split, 100)) == 1


def _wave(seeds: int, samples: int = 2, index: int = 0) -> SeedWave:
    return SeedWave(index, [{"seed_id": f"s{i}", "samples": list(range(samples))} for i in range(seeds)], [])


def test_a_wave_starts_once_the_waves_before_it_are_discovered_and_never_beyond_the_waves_in_flight():
    waves = [_wave(3), _wave(3), SeedWave(2, [], [{"seed_id": "old"}]), _wave(1)]
    assert [wave.units for wave in waves] == [6, 6, 0, 2]
    assert may_start(0, waves, running=0, discovered_units=0, in_flight=2)
    assert not may_start(1, waves, running=1, discovered_units=5, in_flight=2)  # wave 0 still discovering
    assert may_start(1, waves, running=1, discovered_units=6, in_flight=2)
    assert not may_start(2, waves, running=2, discovered_units=12, in_flight=2)  # two waves already run
    assert may_start(2, waves, running=1, discovered_units=12, in_flight=2)
    assert may_start(3, waves, running=1, discovered_units=12, in_flight=2)  # wave 2 discovers nothing
    assert not may_start(1, waves, running=1, discovered_units=6, in_flight=1)


def test_overlapping_waves_start_the_next_while_the_current_tail_runs_and_raise_a_waves_error():
    """Wave 1 starts while wave 0 is still running (its seeds are discovered), wave 2 only once one of them ended."""
    waves = [_wave(1, index=index) for index in range(3)]
    discovered = [0]
    events: list[str] = []
    release = {index: threading.Event() for index in range(3)}

    def execute(wave: SeedWave) -> None:
        index = wave.index
        events.append(f"start {index}")
        discovered[0] += wave.units
        release[index].wait(10)
        events.append(f"end {index}")

    def releaser() -> None:
        while "start 1" not in events:
            time.sleep(0.01)
        assert "start 2" not in events
        release[0].set()
        while "start 2" not in events:
            time.sleep(0.01)
        release[1].set()
        release[2].set()

    helper = threading.Thread(target=releaser)
    helper.start()
    run_overlapping(waves, execute, lambda: discovered[0], in_flight=2, check_every_s=0.01)
    helper.join()
    assert events.index("start 1") < events.index("end 0") < events.index("start 2")
    assert sorted(events) == ["end 0", "end 1", "end 2", "start 0", "start 1", "start 2"]

    def failing(wave: SeedWave) -> None:
        raise RuntimeError("endpoint down")

    with pytest.raises(RuntimeError, match="endpoint down"):
        run_overlapping(waves, failing, lambda: 0, in_flight=2, check_every_s=0.01)


def test_waves_starting_at_once_share_one_lean_pool(monkeypatch):
    """Waves that start at once (a resumed run's waves of seeds discovered before start together) ask for the pool
    from their own threads at the same moment: one pool is started, not one each (seen: eight REPLs busy at once in
    a pool of four, which the capacity plan and the machine were not sized for)."""
    started: list[int] = []

    def slow_start(lean_cfg, verify):
        time.sleep(0.05)
        started.append(1)
        return object()

    monkeypatch.setattr(LeanPool, "start", staticmethod(slow_start))
    job = Job.__new__(Job)
    job._pool, job._pool_lock = None, threading.Lock()
    job.lean_cfg, job.cfg = {}, OmegaConf.create({"verify": {}})
    pools: list[object] = []
    threads = [threading.Thread(target=lambda: pools.append(job.pool)) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(started) == 1 and len({id(pool) for pool in pools}) == 1


@pytest.mark.ray
def test_a_wave_executes_in_a_process_that_exits_with_it(ray_cluster):
    """What a wave's execution holds (Ray Data's records of its blocks, whatever its allocator kept) goes when the
    wave ends: it runs in a worker on the driver's node, not in the driver, and that worker does not outlive it."""
    off_driver = OffDriver(NodeAffinitySchedulingStrategy(node_id=ray.get_runtime_context().get_node_id(), soft=False))
    executed_by = off_driver.run(lambda: os.getpid())
    assert executed_by != os.getpid()
    with contextlib.suppress(psutil.NoSuchProcess):
        psutil.Process(executed_by).wait(timeout=30)  # psutil.TimeoutExpired: the worker outlived its wave


def test_a_mining_jobs_ray_data_hands_rows_on_one_by_one_without_waiting_on_the_driver():
    """One row per block, and no per-task limit on blocks waiting for the driver: the setting is private to Ray
    Data's `DataContext`, so an upgrade that renames it fails here rather than slowing split+dedup threefold."""
    context = ray.data.DataContext()
    assert context._max_num_blocks_in_streaming_gen_buffer is not None  # Ray's default, which the job lifts
    configure_data_context(context, 60.0)
    assert context._max_num_blocks_in_streaming_gen_buffer is None
    assert (context.target_max_block_size, context.execution_no_progress_timeout_s) == (ROW_BLOCK_BYTES, 60.0)
    assert not context.enable_progress_bars
