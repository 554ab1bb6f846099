"""A config mistake on any job's command line is one `error:` line and exit 2, before Ray starts: a value of the
wrong type says what the key expects, an unknown key (with or without `+`) names the nearest key, a value outside a
key's choices lists them. Valid command lines still compose as before."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import ray
from omegaconf import OmegaConf

import conf
from conf import ConfigError, compose_config
from lean_pool import check, replay, sandbox
from operators.rows import formalizations
from pipelines import autoformalize, evaluate, export, index, mine, plan, report

REPO_DIR = Path(__file__).resolve().parents[1]
URI = "s3://b/run?endpoint_override=h:p&scheme=http"


def check_main(argv: list[str]) -> int:
    """`python -m lean_pool.check` takes paths besides overrides; a path that is never reached will do."""
    return check.main(["nowhere.lean", *argv])


# Per job: its main, then (override, words the error line must hold) for a wrong type, an unknown key and a value
# outside the key's choices. report has no key with choices.
MISTAKES: dict[str, tuple[Callable[[list[str]], int], list[tuple[str, str]]]] = {
    "mine": (mine.main, [
        ("discover.min_lemmas=abc", "discover.min_lemmas=abc: expects an integer (default 100)"),
        ("lean.workerz=2", "lean.workerz: no such key; did you mean lean.workers?"),
        ("verify.replay=bogus", "verify.replay=bogus: expects one of off, fresh, comparator"),
    ]),
    "autoformalize": (autoformalize.main, [
        ("autoformalize.retrieve_k=many", "autoformalize.retrieve_k=many: expects an integer (default 8)"),
        ("autoformalize.max_input_tokenz=9", "did you mean autoformalize.max_input_tokens?"),
        ("mode=bogus", "autoformalize.mode=bogus: expects one of direct, got, agent"),
    ]),
    "evaluate": (evaluate.main, [
        ("provers=prover", "provers=prover: expects a list (default [prover])"),
        ("benchmark.seed_rot=Mathlib", "benchmark.seed_rot: no such key; did you mean benchmark.seed_root?"),
        ("lean.sandbox.network=wifi", "lean.sandbox.network=wifi: expects one of auto, bwrap, unshare, off"),
    ]),
    "index": (index.main, [
        ("embed.actors=two", "embed.actors=two: expects an integer (default 1)"),
        ("faiss.hnsw_n=16", "faiss.hnsw_n: no such key; did you mean faiss.hnsw_m?"),
        ("faiss.kind=ivf", "faiss.kind=ivf: expects one of auto, flat, hnsw"),
    ]),
    "export": (export.main, [
        ("allow_sim=maybe", "allow_sim=maybe: expects true or false (default false)"),
        ("split.test_fraktion=0.2", "split.test_fraktion: no such key; did you mean split.test_fraction?"),
        ("format=xml", "format=xml: expects one of parquet, jsonl"),
    ]),
    "report": (report.main, [
        ("top_reasons=ten", "top_reasons=ten: expects an integer (default 10)"),
        ("plots.dpii=90", "plots.dpii: no such key; did you mean plots.dpi?"),
    ]),
    "plan": (plan.main, [
        ("lean.workers=two", "lean.workers=two: expects an integer (default 1)"),
        ("plan.cluster.nodez=2", "plan.cluster.nodez: no such key; did you mean plan.cluster.nodes?"),
        ("verify.replay=bogus", "verify.replay=bogus: expects one of off, fresh, comparator"),
    ]),
    "check": (check_main, [
        ("replay=maybe", "replay=maybe: expects true or false (default false)"),
        ("lean.workerz=2", "lean.workerz: no such key; did you mean lean.workers?"),
        ("mode=bogus", "mode=bogus: expects one of proof, statement"),
    ]),
}
CASES = [pytest.param(main, override, words, id=f"{job}:{override}")
         for job, (main, mistakes) in MISTAKES.items() for override, words in mistakes]
# An unknown key given with `+` (or `++`) is refused as well: Hydra would add it and the job would never read it.
CASES += [pytest.param(main, f"{plus}{override}", words, id=f"{job}:{plus}{override}")
          for job, (main, mistakes) in MISTAKES.items() for override, words in mistakes if "no such key" in words
          for plus in ("+", "++")]


def one_error_line(main: Callable[[list[str]], int], argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """The job's one stderr line, after checking it exited 2 without starting Ray."""
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1, err
    assert not ray.is_initialized()
    return err.strip()


@pytest.mark.parametrize(("main", "override", "words"), CASES)
def test_a_config_mistake_is_one_error_line_naming_the_key(main, override, words, capsys):
    assert words in one_error_line(main, [override], capsys)


@pytest.mark.slow
def test_the_issue_examples_read_as_asked(capsys):
    assert one_error_line(mine.main, ["preset=demo", "run_dir=/tmp/t", "discover.min_lemmas=abc"], capsys) == (
        "error: discover.min_lemmas=abc: expects an integer (default 6)")
    assert one_error_line(plan.main, ["preset=demo", "lean.workers=two"], capsys) == (
        "error: lean.workers=two: expects an integer (default 1)")
    assert one_error_line(mine.main, ["+lean.workerz=2"], capsys) == (
        "error: lean.workerz: no such key; did you mean lean.workers?")


@pytest.mark.slow
def test_the_command_a_user_types_ends_in_one_line_and_exit_2(tmp_path: Path):
    proc = subprocess.run([sys.executable, "-m", "pipelines.mine", "preset=demo", f"run_dir={tmp_path / 't'}",
                           "discover.min_lemmas=abc"], cwd=REPO_DIR, capture_output=True, text=True, timeout=120,
                          check=False)
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr == "error: discover.min_lemmas=abc: expects an integer (default 6)\n"


@pytest.mark.parametrize(("overrides", "words"), [
    (["lean.resources_per_repl={num_cpuz:1}"], "did you mean lean.resources_per_repl.num_cpus?"),
    (["lean.resources_per_repl={num_cpus:abc}"], "lean.resources_per_repl.num_cpus=abc: expects a number"),
    (["lean.sandbox=false"], "lean.sandbox=false: expects a mapping of enabled, network"),
    (["discover.min_lemmas=4.5"], "discover.min_lemmas=4.5: expects an integer (default 100)"),
    (["discover.min_lemmas=null"], "discover.min_lemmas=null: expects an integer"),
    (["min_lemmas=5"], "min_lemmas: no such key; did you mean discover.min_lemmas?"),
    (["presett=demo"], "presett: no such key; did you mean preset?"),
    (["dedup=true"], "dedup=true: expects one of default"),
    (["llm=vllm", "llm.serve.mode=bogus"], "llm.serve.mode=bogus: expects one of start, attach"),
    (["llm=vllm", "llm/engines=cpu", "llm.serve.engines.smollm2.accelerator_config.kind=npu"],
     "llm.serve.engines.smollm2.accelerator_config.kind=npu: expects one of cpu, gpu, tpu"),
    (["llm=vllm", "llm/engines=tpu"], "Could not find 'llm/engines/tpu'; Available options in 'llm/engines': cpu, gpu"),
    (["llm.endpoints.main.max_tokens_param=max"], "expects one of max_tokens, max_completion_tokens"),
    (["~lean.sandbox"], "~lean.sandbox: the job reads lean.sandbox"),
    (["~lean.sandboxx"], "lean.sandboxx: no such key; did you mean lean.sandbox?"),
    (["+discover.min_lemmas=4"], "Either remove + prefix: 'discover.min_lemmas=4'"),
    (["discover.min_lemmas=${oc.env:FOLKLORE_UNSET_VARIABLE}"], "discover.min_lemmas: "),
])
def test_mistakes_in_mappings_deletions_groups_and_interpolations_are_one_line(overrides, words):
    with pytest.raises(ConfigError) as caught:
        compose_config("mine", overrides)
    assert words in str(caught.value) and "\n" not in str(caught.value)


@pytest.mark.slow
def test_valid_command_lines_still_compose():
    cfg = compose_config("mine", ["preset=demo", "lean.timeout_s=7.5", "faithfulness.alpha=1", "ray.num_cpus=null",
                                  "llm.endpoints.sim.api_key_env=null",
                                  "seeds.include=[Mathlib/Data/**,Mathlib/Order/**]", "lean.sim.import_s=0.1",
                                  "++discover.min_lemmas=7", f"run_dir='{URI}'"], complete=False)
    assert (cfg.lean.timeout_s, cfg.faithfulness.alpha, cfg.ray.num_cpus, cfg.run_dir) == (7.5, 1, None, URI)
    assert (list(cfg.seeds.include), cfg.lean.sim.import_s, cfg.discover.min_lemmas) == (
        ["Mathlib/Data/**", "Mathlib/Order/**"], 0.1, 7)
    evaluate = compose_config("evaluate", ["provers=[a,b]", "llm=openai", "lean=sim"], complete=False)
    assert evaluate.llm.provers == ["a", "b"]
    served = compose_config("mine", ["llm=vllm", "llm.serve.http_port=8001"], complete=False)
    assert served.llm.serve.http_port == 8001
    engine = "llm.serve.engines.smollm2"
    cpu = compose_config("mine", ["llm=vllm", "llm/engines=cpu", f"{engine}.model_source=/models/s",
                                  f"+{engine}.runtime_env.env_vars.OMP_NUM_THREADS=2",
                                  f"{engine}.placement_group_config={{bundle_per_worker:{{CPU:2}}}}",
                                  f"+{engine}.accelerator_config.topology=2x2"],
                         complete=False).llm.serve.engines.smollm2
    assert (cpu.model_source, cpu.runtime_env.env_vars.OMP_NUM_THREADS) == ("/models/s", 2)
    assert (cpu.placement_group_config.bundle_per_worker.CPU, cpu.accelerator_config.topology) == (2, "2x2")
    kimina = compose_config("check", ["lean=kimina", "lean.kimina.url=http://lean-box:8000"], complete=False)
    assert kimina.lean.backend == "kimina"
    assert compose_config("export", [f"run_dir='{URI}'", "format=jsonl"], complete=False).format == "jsonl"
    assert compose_config("mine", ["hydra.job.chdir=false"], complete=False).run_dir == "runs/mine"


def test_open_mappings_take_new_keys_and_lose_old_ones():
    endpoint = "{base_url:'http://h:8000/v1',api_key_env:null,concurrency:4,request_timeout_s:60,max_tokens_param:max_tokens,structured_form:structured_outputs}"
    cfg = compose_config("mine", [f"+llm.endpoints.local={endpoint}", "+llm.sampling.prove.seed=3",
                                  "~llm.sampling.judge.temperature", "+llm.models.critic={endpoint:local,model:m}"],
                         complete=False)
    assert cfg.llm.endpoints.local.concurrency == 4 and cfg.llm.sampling.prove.seed == 3
    assert "temperature" not in cfg.llm.sampling.judge and cfg.llm.models.critic.endpoint == "local"


def test_the_declared_choices_are_the_ones_the_code_branches_on():
    assert conf.choices("autoformalize.mode") == formalizations.MODES
    assert conf.choices("verify.replay") == replay.MODES
    assert conf.choices("lean.sandbox.network") == sandbox.NETWORK_MODES
    assert conf.choices("format") == tuple(export.FORMATS)
    assert set(conf.choices("mode")) == set(check.GOAL)


@pytest.mark.slow
def test_every_renamed_key_names_a_key_a_job_has_and_its_old_spelling_none():
    composed = [compose_config(name, selections, complete=False) for name, selections in [
        ("mine", []), ("mine", ["preset=demo"]), ("mine", ["llm=vllm", "lean=kimina"]),
        ("mine", ["llm=vllm", "llm/engines=cpu"]), ("autoformalize", []), ("contribute", []),
        ("evaluate", []), ("export", []), ("report", []), ("index", []), ("plan", []), ("check", [])]]
    keys = {key for cfg in composed for key in paths(OmegaConf.to_container(cfg))}
    for old, new in conf.renamed().items():
        assert new in keys and old not in keys, (old, new)


def paths(node: object, prefix: str = "") -> list[str]:
    """Every dotted key of a plain mapping, inner mappings included."""
    if not isinstance(node, dict):
        return []
    return [path for key, value in node.items() for path in [f"{prefix}{key}", *paths(value, f"{prefix}{key}.")]]


@pytest.mark.parametrize(("name", "override", "new"), [
    ("mine", "ray.seeds_per_plan=5", "ray.seeds_per_wave"), ("mine", "ray.plans_in_flight=2", "ray.waves_in_flight"),
    ("mine", "stages.benchmark.num_cpus=2", "decontaminate.resources.num_cpus"),
    ("mine", "stages.judge.actors=2", "judge.resources.actors"),
    ("plan", "plan.defaults.lean_check_s=2", "plan.assumed.lean_check_s"), ("index", "embed.rows_per_batch=8",
                                                                            "embed.batch_size")])
def test_an_old_spelling_of_a_renamed_key_is_one_line_naming_the_new_one(name, override, new):
    with pytest.raises(ConfigError) as refused:
        compose_config(name, [override])
    assert str(refused.value).startswith(f"{override.split('=')[0]} is now called {new}")
