"""`answer_format: structured`: the constraint derived from each parser's shape admits the answers the parser reads
and only those, a JSON answer comes back as the parser's text, the client sends the constraint in the endpoint's form,
and an endpoint that refuses it is one line before the run."""

from __future__ import annotations

import json
import random
import re
import textwrap
import threading
from collections.abc import Iterator
from dataclasses import replace
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml

from operators.llm.answer_format import RESPONSE_FORMAT, STRUCTURED_OUTPUTS, answer_regex, rendered
from operators.llm.answers import JUDGE_VERDICT, CodeShape, extract_code, judge_accepts
from operators.llm.backend import LLMBackend
from operators.llm.client import create_kwargs, refused_answer_formats
from operators.llm.errors import LLMConfigError
from operators.llm.settings import settings_from_config
from operators.pipeline import DECLARED, answer_shapes, call_roles
from operators.split import DISCOVERED, split_answer
from tests.json_endpoint import JsonEndpoint, chat_completion

CONF = Path(__file__).resolve().parents[1] / "conf" / "llm"
DISCOVER_MARKER = "brainstormed mathlib lemmas"  # conf/mine.yaml's discover.marker
PROVE_MARKER = "### Complete Lean 4 Proof"  # prove.marker: `#` and spaces, which regexes may escape
ODD_MARKER = "code (v2.0)? [final] *here* $1 ^ {x|y} + a\\b"  # every character a regex gives a meaning
# A discover answer of the kind a model writes (MathlibLemma's format): a plan, the marker, one `lean` block.
REAL_ANSWER = f"""Looking at the file, the API lacks a few simp lemmas about `List.rotate`.

{DISCOVER_MARKER}
```lean
import Mathlib

namespace List

theorem rotate_length_mul (l : List α) (n : ℕ) : l.rotate (l.length * n) = l := by
  sorry

lemma rotate_replicate' (a : α) (n k : ℕ) : (replicate n a).rotate k = replicate n a := by sorry

end List
```
"""
FREE_PIECES = ("plan", " ", "\n", "\t", "lemma", "correct", "incorrect", "*", "#", "(", "ℕ", DISCOVER_MARKER[:9])
CODE_PIECES = ("theorem t : 1 = 1 := by sorry", "\n", "  ", "lemma", "open Nat", "namespace X", "(n : ℕ)", "end X",
               "#check", "\"s\"", "--", ":=")
SAMPLES = 150
SEED = 55


def joined(rng: random.Random, pieces: tuple[str, ...], most: int) -> str:
    return "".join(rng.choice(pieces) for _ in range(rng.randrange(most + 1)))


def code_answers(shape: CodeShape, thinking_chars: int) -> Iterator[tuple[str, str | None]]:
    """(answer, its code) pairs built the way the regex reads: free text, the marker line, a fenced block; plus the
    marker and backticks spliced in at random places (code unknown: None), which the regex must admit only where the
    parser still reads code."""
    rng = random.Random(SEED)
    for _ in range(SAMPLES):
        free = joined(rng, (*FREE_PIECES, shape.marker), 12)[:thinking_chars]
        code = joined(rng, CODE_PIECES, 10) + rng.choice(CODE_PIECES[:1])
        answer = f"{free}\n{shape.marker}\n```{shape.tag}\n{code}\n```\n" if free else \
            f"{shape.marker}\n```{shape.tag}\n{code}\n```\n"
        yield answer, code
        spliced = rng.choice(("`", "``", "```", "\n```\n", shape.marker, "```lean\n"))
        at = rng.randrange(len(answer) + 1)
        yield answer[:at] + spliced + answer[at:], None


@pytest.mark.parametrize("thinking_chars", [0, 400])
def test_the_discover_regex_admits_a_real_answer_that_the_parser_splits(thinking_chars: int) -> None:
    regex = answer_regex(CodeShape(DISCOVER_MARKER), thinking_chars)
    shown = REAL_ANSWER if thinking_chars else REAL_ANSWER[REAL_ANSWER.index(DISCOVER_MARKER):]
    assert re.fullmatch(regex, shown)
    split = split_answer(shown, DISCOVER_MARKER, 10)
    assert split.status == DISCOVERED and len(split.snippets) == 2


@pytest.mark.parametrize("marker", [DISCOVER_MARKER, PROVE_MARKER, ODD_MARKER])
@pytest.mark.parametrize("thinking_chars", [0, 60])
def test_the_code_parser_reads_every_sampled_answer_its_regex_admits(marker: str, thinking_chars: int) -> None:
    shape = CodeShape(marker)
    regex = re.compile(answer_regex(shape, thinking_chars))
    admitted = 0
    for answer, code in code_answers(shape, thinking_chars):
        if regex.fullmatch(answer):
            admitted += 1
            read = extract_code(answer, marker)
            assert read is not None, answer
            if code is not None and marker.lower() not in code.lower():
                assert read == textwrap.dedent(code).strip(), answer
    assert admitted >= SAMPLES  # every answer built in the shape, and some spliced ones


def test_no_answer_of_another_shape_is_admitted() -> None:
    regex = re.compile(answer_regex(CodeShape(PROVE_MARKER), 200))
    cut = REAL_ANSWER.replace(DISCOVER_MARKER, PROVE_MARKER).rsplit("```", 1)[0]
    for answer in ("no marker\n```lean\ntheorem t : True := trivial\n```\n",  # the parser finds no marker
                   f"{PROVE_MARKER}\nno block", f"{PROVE_MARKER}\n```lean\n\n```\n",  # no code after it
                   "x" * 201 + f"\n{PROVE_MARKER}\n```lean\nt\n```\n",  # more free text than allowed
                   f"{PROVE_MARKER}\n```lean\nt\n```\n```\n",  # a fence line after the block
                   cut):
        assert not regex.fullmatch(answer), answer


@pytest.mark.parametrize("thinking_chars", [0, 80])
def test_the_judge_reads_every_sampled_verdict_its_regex_admits_as_that_word(thinking_chars: int) -> None:
    regex = re.compile(answer_regex(JUDGE_VERDICT, thinking_chars))
    rng = random.Random(SEED)
    admitted = 0
    for _ in range(SAMPLES):
        word = rng.choice((JUDGE_VERDICT.accept, JUDGE_VERDICT.reject))
        free = joined(rng, FREE_PIECES, 12)[:thinking_chars]
        answer = f"{free}\n{word}" if free else word
        if regex.fullmatch(answer):
            admitted += 1
            assert judge_accepts(answer) == (word == JUDGE_VERDICT.accept), answer
    assert admitted == SAMPLES
    assert not regex.fullmatch("correct, I think") and not regex.fullmatch("Correct")


@pytest.mark.parametrize("code", [
    "theorem t : 1 = 1 := rfl",
    "  lemma indented : True := trivial\n  lemma second : True := trivial",
    "```lean\ntheorem fenced : True := trivial\n```",  # a model fencing its code inside the JSON string
    "open Lean in\n#eval `(term| x)\ntheorem t : True := trivial -- ``quoted`` and ````four````",
])
def test_a_json_code_answer_renders_to_text_extract_code_reads_back_whole(code: str) -> None:
    shape = CodeShape(PROVE_MARKER)
    for fields in ({"code": code}, {"thinking": "First `simp`, then ```this```.", "code": code}):
        assert extract_code(rendered(shape, json.dumps(fields)), PROVE_MARKER) == textwrap.dedent(code).strip()


def test_a_json_verdict_renders_to_the_word_the_judge_reads_and_a_cut_answer_stays_as_it_came() -> None:
    accept = json.dumps({"thinking": "The statement holds.\nincorrect would be wrong.", "verdict": "correct"})
    assert judge_accepts(rendered(JUDGE_VERDICT, accept))
    assert not judge_accepts(rendered(JUDGE_VERDICT, json.dumps({"verdict": "incorrect"})))
    cut = '{"thinking": "The statement hol'
    assert rendered(JUDGE_VERDICT, cut) == cut and rendered(CodeShape(PROVE_MARKER), "[1]") == "[1]"


def llm_config(name: str, **sampling: dict[str, Any]) -> dict[str, Any]:
    cfg = yaml.safe_load((CONF / f"{name}.yaml").read_text())
    cfg.pop("defaults", None)
    for call, values in sampling.items():
        cfg["sampling"][call].update(values)
    return cfg


# The sections of a job's config the stages' shapes are read from.
JOB_SECTIONS = {"discover": {"marker": DISCOVER_MARKER}, "formalize": {"marker": "error-free code"},
                "prove": {"marker": PROVE_MARKER}}


def test_the_client_sends_a_structured_calls_shape_in_its_endpoints_form_and_nothing_for_a_free_call() -> None:
    cfg = llm_config("openai", discover={"answer_format": "structured", "thinking_chars": 300,
                                         "extra_body": {"repetition_penalty": 1.1}})
    shapes = answer_shapes(DECLARED.values(), JOB_SECTIONS)
    settings = settings_from_config(cfg).with_answer_shapes(shapes)
    discover = settings.request("discover", "discover", [{"role": "user", "content": "x"}], "c1")
    judge = settings.request("judge", "judge", [{"role": "user", "content": "x"}], "c1")
    openai = create_kwargs(discover, settings.endpoints["main"])
    schema = openai[RESPONSE_FORMAT]["json_schema"]
    assert schema["strict"] and set(schema["schema"]["required"]) == {"thinking", "code"}
    assert openai["extra_body"] == {"repetition_penalty": 1.1}
    vllm = create_kwargs(discover, replace(settings.endpoints["main"], structured_form=STRUCTURED_OUTPUTS))
    assert vllm["extra_body"] == {"repetition_penalty": 1.1, STRUCTURED_OUTPUTS: {
        "regex": answer_regex(CodeShape(DISCOVER_MARKER), 300)}}
    assert RESPONSE_FORMAT not in vllm
    free = create_kwargs(judge, settings.endpoints["main"])
    assert RESPONSE_FORMAT not in free and "extra_body" not in free


@pytest.mark.parametrize("call", ["diagnose", "think"])
def test_a_prose_call_asked_structured_is_one_config_error_naming_its_key(call: str) -> None:
    cfg = llm_config("sim", **{call: {"answer_format": "structured"}})
    stages = [DECLARED["formalize"], DECLARED["autoformalize"]]
    with pytest.raises(LLMConfigError) as caught:
        LLMBackend(cfg, call_roles(stages, cfg["provers"]), answer_shapes(stages, JOB_SECTIONS | {
            "formalize": {"marker": "error-free code"}}))
    assert str(caught.value).startswith(f"llm.sampling.{call}.answer_format=structured: ")
    assert "\n" not in str(caught.value)


class RefusesConstraints(JsonEndpoint):
    """An OpenAI-compatible endpoint that lists model `m` and answers 400, as a server without structured outputs
    does, to any request carrying a constraint; others get a short answer."""

    def do_GET(self) -> None:  # noqa: N802 - stdlib naming
        self.send_json(200, {"object": "list", "data": [{"id": "m", "object": "model", "created": 0,
                                                          "owned_by": "x"}]})

    def do_POST(self) -> None:  # noqa: N802 - stdlib naming
        body = self.request_json()
        if STRUCTURED_OUTPUTS in body or RESPONSE_FORMAT in body:
            self.send_json(400, {"error": {"message": "Unrecognized request argument supplied",
                                           "type": "invalid_request", "code": 400}})
            return
        self.send_json(200, chat_completion("ok", model="m"))


@pytest.fixture
def refusing_url() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), RefusesConstraints)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_port}/v1"
    server.shutdown()
    server.server_close()


@pytest.mark.slow
@pytest.mark.parametrize("form", [STRUCTURED_OUTPUTS, RESPONSE_FORMAT])
def test_an_endpoint_refusing_the_constraint_is_one_probe_line_naming_the_keys(refusing_url: str, form: str) -> None:
    cfg = llm_config("openai", discover={"answer_format": "structured"}, judge={"answer_format": "structured"})
    cfg["endpoints"]["main"].update(base_url=refusing_url, api_key_env=None, structured_form=form,
                                    max_tokens_param="max_tokens")
    cfg["models"] = {role: {**bound, "model": "m"} for role, bound in cfg["models"].items()}
    stages = [DECLARED["discover"], DECLARED["judge"]]
    backend = LLMBackend(cfg, call_roles(stages, cfg["provers"]), answer_shapes(stages, JOB_SECTIONS))
    with pytest.raises(LLMConfigError) as caught:
        backend.__enter__()
    line = str(caught.value)
    assert "\n" not in line and line.count("refuses") == 1
    assert line.startswith("llm.sampling.discover.answer_format=structured, llm.sampling.judge.answer_format="
                           f"structured: endpoint main ({refusing_url}, model m) refuses")
    assert "llm.endpoints.main.structured_form" in line and "HTTP 400" in line
    assert "Unrecognized request argument supplied" in line
    free = llm_config("openai")
    free["endpoints"]["main"].update(base_url=refusing_url, api_key_env=None, max_tokens_param="max_tokens")
    free["models"] = cfg["models"]
    settings = settings_from_config(free).with_answer_shapes(answer_shapes(stages, JOB_SECTIONS))
    assert refused_answer_formats(settings, 5, call_roles(stages, free["provers"]), 8) == []
