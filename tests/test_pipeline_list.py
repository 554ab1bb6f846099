"""The pipeline is a list in config (issue 53): a list that cannot work is one `error:` line before Ray starts, with
nothing written; a stage declared outside Folklore (examples/stages/long_statements.py) runs in a demo mine and its
rows carry what it wrote; a resume with another list is refused by name; and docs/stages.md lists the declared stages
as their declarations say."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, cast

import pyarrow.parquet as pq
import pytest
from omegaconf import OmegaConf

from conf import compose_config
from examples.stages.long_statements import (
    MAX_CHARS,
    TOO_LONG,
    LongStatementSettings,
    set_aside_long,
)
from operators.pipeline import DECLARED
from operators.rows.candidates import DISCOVERED, DUPLICATE, PROVED, TRIVIAL
from operators.stage import Shared, Stage
from tests.test_bad_inputs import folklore, refused

REPO = Path(__file__).resolve().parents[1]
STAGES_PAGE = REPO / "docs" / "stages.md"
EXAMPLE = "examples.stages.long_statements:STAGE"
# The demo mine with the example stage in the judge's place and neither the judge nor the triviality check.
EXAMPLE_PIPELINE = f"pipeline=[discover,split,{EXAMPLE},formalize,prove]"
NONE = "—"
# Where a set-aside row's reason says the limit is set.
LIMIT = "examples.stages.long_statements.MAX_CHARS"


# --- lists that cannot work -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(("pipeline", "line"), [
    ("[discover,split,prove,formalize]",
     ("error: pipeline: prove takes rows compiled, which no stage before it gives (before it: discover, split+dedup); "
      "put it after formalize")),
    ("[discover,split,judgee,formalize]",
     ("error: pipeline entry judgee is not a stage: did you mean judge? the stages are discover, split, split+dedup, "
      "decontaminate, judge, formalize, faithfulness, trivial, prove, autoformalize, name, shorten, or "
      "package.module:NAME for one declared outside Folklore")),
    ("[discover,split,examples.stages.nope:STAGE]",
     ("error: pipeline entry examples.stages.nope:STAGE: cannot import examples.stages.nope (No module named "
      "'examples.stages.nope'); the module must be importable where the job runs (installed, or on PYTHONPATH)")),
    ("[discover,split,judge,formalize,judge,prove]",
     "error: pipeline lists judge twice: a stage runs once in a pipeline"),
], ids=["out_of_order", "misspelt", "no_such_module", "twice"])
def test_a_pipeline_that_cannot_work_is_one_line_before_anything_is_written(tmp_path: Path, pipeline: str,
                                                                           line: str) -> None:
    assert refused(tmp_path, "mine", "preset=demo", f"run_dir={tmp_path / 'run'}", f"pipeline={pipeline}") == line
    assert not (tmp_path / "run").exists()


# --- the example stage ----------------------------------------------------------------------------------------------


def test_the_example_stage_sets_aside_only_open_candidates_over_its_limit() -> None:
    rows: list[dict[str, Any]] = [{"status": DISCOVERED, "statement_raw": "x" * 12, "reason": None},
            {"status": DISCOVERED, "statement_raw": "x" * 10, "reason": None},
            {"status": DUPLICATE, "statement_raw": "x" * 12, "reason": "restates c0"}]
    assert set_aside_long(rows, LongStatementSettings(max_chars=10)) == [
        {"status": TOO_LONG, "statement_raw": "x" * 12,
         "reason": f"statement_raw is 12 characters, over the lab's limit of 10 ({LIMIT})"},
        rows[1], rows[2]]


@pytest.mark.ray
def test_a_stage_declared_outside_folklore_runs_and_a_resume_with_another_list_is_refused(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    done = folklore(tmp_path, "mine", "preset=demo", f"run_dir={run_dir}", EXAMPLE_PIPELINE)
    assert done.returncode == 0, done.stdout + done.stderr
    rows = pq.read_table(run_dir / "candidates").to_pylist()
    assert all(row["judge_verdict"] is None for row in rows), "nothing is judged"
    assert not [row for row in rows if row["status"] == TRIVIAL], "nothing is called trivial"
    assert any(row["status"] == PROVED for row in rows), "lemmas are still proved"
    open_rows = [row for row in rows if row["status"] != DUPLICATE]
    too_long = [row for row in open_rows if len(row["statement_raw"]) > MAX_CHARS]
    assert too_long, f"some demo statement is longer than {MAX_CHARS} characters"
    assert [row for row in open_rows if row["status"] == TOO_LONG] == too_long
    for row in too_long:
        assert row["reason"] == (f"statement_raw is {len(row['statement_raw'])} characters, over the lab's limit of "
                                 f"{MAX_CHARS} ({LIMIT})")
        assert row["formalize_attempts"] == [] and row["llm_calls"] == [], "no call was spent on a set-aside row"

    assert refused(tmp_path, "mine", "preset=demo", f"run_dir={run_dir}") == (
        f'error: {run_dir} holds rows made with other settings: pipeline=["discover", "split", '
        '"examples.stages.long_stat… (now ["discover", "split", "decontaminate", "judge", …). Start in another '
        "run_dir, or carry on with these rows knowingly with resume.accept_changes=[pipeline] (run.json records it)")


# --- docs/stages.md -------------------------------------------------------------------------------------------------


class Recorded(Mapping[str, Any]):
    """A config that notes the dotted path of every value read from it (a mapping read whole notes its values)."""

    def __init__(self, node: Mapping[str, Any], path: str, seen: set[str]) -> None:
        self.node, self.path, self.seen = node, path, seen

    def __getitem__(self, key: str) -> Any:
        value = self.node[key]
        if isinstance(value, Mapping):
            return Recorded(value, f"{self.path}{key}.", self.seen)
        self.seen.add(f"{self.path}{key}")
        return value

    def __iter__(self) -> Iterator[str]:
        return iter(self.node)

    def __len__(self) -> int:
        return len(self.node)


def keys_read(read: Callable[[Mapping[str, Any]], object], cfg: Mapping[str, Any]) -> set[str]:
    seen: set[str] = set()
    read(Recorded(cfg, "", seen))
    return seen


def spans(values: Iterable[str]) -> str:
    return ", ".join(f"`{value}`" for value in sorted(values)) or NONE


def default_pipelines() -> dict[str, list[str]]:
    """Each job whose config lists a `pipeline:`, and the stages it lists."""
    configs = {path.stem: cast(dict[str, Any], OmegaConf.to_container(OmegaConf.load(path)))
               for path in sorted((REPO / "conf").glob("*.yaml"))}
    return {job: [str(name) for name in cfg["pipeline"]] for job, cfg in configs.items() if "pipeline" in cfg}


@functools.cache
def composed(job: str) -> dict[str, Any]:
    """`job`'s default config, resolved: composed once for all the stages its pipeline lists."""
    return cast(dict[str, Any], OmegaConf.to_container(compose_config(job, [], complete=False), resolve=True))


def stage_row(stage: Stage, pipelines: dict[str, list[str]]) -> str:
    """The table row docs/stages.md gives `stage`: the jobs listing it, its statuses, the sections its settings are
    read from and the keys its switch reads (in the first job listing it, else mine's), its resources section, its LLM
    call labels, whether it checks Lean."""
    jobs = [job for job, listed in pipelines.items() if stage.name in listed]
    cfg = composed(jobs[0] if jobs else "mine")
    shared = Shared(prompts=cfg["prompts"], index=None, grounding=None, subgoals=None, table="candidates",
                    benchmark_problems=lambda: (), examples=None)
    sections = {key.split(".")[0] for key in keys_read(lambda read: stage.arguments(read, shared), cfg)}
    switch = keys_read(stage.runs, cfg) | (keys_read(stage.instead, cfg) if stage.instead else set())
    entry = stage.resources if isinstance(stage.resources, str) else NONE
    cells = [f"`{stage.name}`", ", ".join(jobs) or NONE, spans(stage.takes), spans(stage.gives), spans(sections),
             spans(switch), NONE if entry == NONE else f"`{entry}`", spans(stage.calls),
             "yes" if stage.checks_lean else "no"]
    return "| " + " | ".join(cells) + " |"


@pytest.mark.slow
def test_docs_stages_lists_each_declared_stage_as_declared() -> None:
    pipelines = default_pipelines()
    expected = [stage_row(stage, pipelines) for stage in DECLARED.values()]
    listed = [line for line in STAGES_PAGE.read_text().splitlines() if line.startswith("| `")]
    assert listed == expected, "docs/stages.md's rows, as the declarations give them:\n" + "\n".join(expected)
