"""A stand-in for the Lean REPL: same protocol, same framing, verdicts from explicit rules only.

Run as `python -m lean_pool.simulator --config JSON`, where JSON is the `sim:` block of
conf/lean/sim.yaml. It lets the whole pipeline (pool, verdicts, fault handling, benchmarks) run on a
machine without Lean. It decides nothing about mathematics: every answer follows from the textual
rules below, and it says so on stderr at start-up. Answer shapes, key order and line layout are
copied from the real REPL's transcripts (../shared/fixtures/lean-repl-transcripts).

Rules (all textual; commands, names and statements are read with `lean_pool.lean_source`, the
project's one Lean reader, so comments and string literals never count):
- a declaration containing the token `sorry` or `admit` gets the warning "declaration uses `sorry`"
  (at its name, or at the `example` keyword) and one `sorries` entry per token; the goal is the
  statement's type (text after the first top-level colon) behind "⊢ " — no hypotheses, no elaboration;
- text matching an `error_rules` pattern gets an error with that rule's message at the match;
- a name declared twice along an environment chain gets "'NAME' has already been declared";
- `#print axioms NAME` answers the standard three axioms for a declaration the sim accepted, adds
  `sorryAx` if it had a sorry or an error, and "Unknown constant" for a name it never saw.
  The sim cannot know real axiom use: a proof that cheats through another lemma is not traced.
- tactic mode is scripted: a tactic with `sorry`/`admit` leaves "Incomplete: contains sorry", a tactic
  matching an error rule is a REPL error, anything else is "Completed".

Faults, for the pool's failure handling and chaos benchmarks, come first (`lean_pool.sim_faults`): a request
containing a trigger pattern crashes, hangs, answers garbage, writes noise or grows on purpose; and `faults:` makes
a share of all checks crash or hang at random. Answers are laid out by `lean_pool.protocol.render_answer`.
"""

from __future__ import annotations

import argparse
import bisect
import json
import re
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from lean_pool.busy_log import append_busy_span
from lean_pool.lean_source import DECLARATION_KINDS, Command, code_only, find_tokens, read_commands, sorry_goal
from lean_pool.protocol import FRAME_END, render_answer
from lean_pool.sim_config import SimConfig
from lean_pool.sim_faults import Faults, write_flushed

BANNER = (
    "lean_pool.simulator: this is a SIMULATED Lean REPL; its verdicts come from explicit textual "
    "rules, no mathematics is checked\n"
)
MESSAGE_WIDTH = 120  # Lean's default Format width, which wraps long message texts

SORRY_WARNING = "declaration uses `sorry`"
STANDARD_AXIOMS = ("propext", "Classical.choice", "Quot.sound")
SORRY_AXIOM = "sorryAx"
UNKNOWN_ENV = "Unknown environment."
UNKNOWN_PROOF_STATE = "Unknown proof state."
MISPLACED_IMPORT = "invalid 'import' command, it must be used in the beginning of the file"
STATUS_COMPLETED = "Completed"
STATUS_OPEN_GOALS = "Incomplete: open goals remain"
STATUS_CONTAINS_SORRY = "Incomplete: contains sorry"
PICKLE_KIND_ENV = "folklore-sim-env"
PICKLE_KIND_PROOF_STATE = "folklore-sim-proof-state"

SORRY_TOKENS = ("sorry", "admit")
UNNAMED_KINDS = ("example",)


# --- positions ------------------------------------------------------------------------------


class Positions:
    """Turns string offsets into Lean positions (1-based line, 0-based column in code points)."""

    def __init__(self, text: str) -> None:
        self._starts = [0] + [i + 1 for i, c in enumerate(text) if c == "\n"]

    def at(self, offset: int) -> dict[str, int]:
        """The `{"line", "column"}` object the REPL uses for `pos`/`endPos`."""
        line = bisect.bisect_right(self._starts, offset) - 1
        return {"line": line + 1, "column": offset - self._starts[line]}


# --- environments and the command rules -------------------------------------------------------


@dataclass
class EnvState:
    """What the sim remembers of an environment: declared names (with whether each used sorry),
    the open namespaces/sections, and `open`ed namespaces. Child environments start from a copy."""

    declarations: dict[str, bool] = field(default_factory=dict)
    scopes: list[tuple[str, str]] = field(default_factory=list)
    opens: list[str] = field(default_factory=list)

    def copy(self) -> EnvState:
        """A child environment sees its parent's names; what it adds stays its own."""
        return EnvState(dict(self.declarations), list(self.scopes), list(self.opens))

    def namespace(self) -> str:
        """The current namespace prefix (sections do not add to it)."""
        return ".".join(name for kind, name in self.scopes if kind == "namespace" and name)

    def full_name(self, name: str) -> str:
        """The name a declaration gets inside the current namespace (`_root_.` escapes it)."""
        if name.startswith("_root_."):
            return name.removeprefix("_root_.")
        prefix = self.namespace()
        return f"{prefix}.{name}" if prefix else name

    def resolve(self, name: str) -> str | None:
        """Lean's lookup order, reduced: innermost namespace outwards, then `open`ed ones."""
        parts = self.namespace().split(".") if self.namespace() else []
        candidates = [".".join(parts[:i] + [name]) for i in range(len(parts), -1, -1)]
        candidates += [f"{opened}.{name}" for opened in self.opens]
        return next((c for c in candidates if c in self.declarations), None)


def _is_axiom_query(text: str) -> bool:
    """An axiom query only looks a declaration up, so it costs no simulated check time."""
    commands = read_commands(text)
    return len(commands) == 1 and commands[0].kind == "#print" and commands[0].text.split()[1:2] == ["axioms"]


def axioms_message(name: str, used_sorry: bool) -> str:
    """`#print axioms` text in Lean's format: names sorted by Lean's Name order (fewer components
    first), the list wrapped like Lean's Format when the line is too long."""
    axioms = list(STANDARD_AXIOMS) + ([SORRY_AXIOM] if used_sorry else [])
    axioms.sort(key=lambda axiom: (axiom.count("."), axiom.split(".")))
    head = f"'{name}' depends on axioms: "
    flat = head + "[" + ", ".join(axioms) + "]"
    if len(flat) <= MESSAGE_WIDTH:
        return flat
    return head + "[" + ",\n ".join(axioms) + "]"


def _message(severity: str, start: dict[str, int], end: dict[str, int], data: str) -> dict[str, Any]:
    return {"severity": severity, "pos": start, "endPos": end, "data": data}


@dataclass
class CommandResult:
    """Messages and sorries of one command, before it gets its env id."""

    messages: list[dict[str, Any]] = field(default_factory=list)
    sorries: list[dict[str, Any]] = field(default_factory=list)


class Simulator:
    """The REPL's state across requests: environments, proof states and the id counters."""

    def __init__(self, config: SimConfig) -> None:
        self.config = config
        self.envs: list[EnvState] = []
        self.proof_states: list[list[str]] = []
        self.error_rules = [(re.compile(rule.pattern), rule.message) for rule in config.error_rules]

    # -- requests ---------------------------------------------------------------------------

    def handle(self, request: dict[str, Any]) -> dict[str, Any]:
        """Answer one parsed request the way the REPL would."""
        if "cmd" in request:
            return self.command(request["cmd"], request.get("env"))
        if "path" in request:
            return self.file(request["path"], request.get("env"))
        if "tactic" in request and "proofState" in request:
            return self.tactic(request["tactic"], request["proofState"])
        if "pickleTo" in request and "env" in request:
            return self.pickle_env(request["pickleTo"], request["env"])
        if "pickleTo" in request and "proofState" in request:
            return self.pickle_proof_state(request["pickleTo"], request["proofState"])
        if "unpickleEnvFrom" in request:
            return self.unpickle_env(request["unpickleEnvFrom"])
        if "unpickleProofStateFrom" in request:
            return self.unpickle_proof_state(request["unpickleProofStateFrom"])
        return {"message": f"{json.dumps(request, ensure_ascii=False)}\nunsupported request: expected "
                           "cmd, path, tactic with proofState, pickleTo, unpickleEnvFrom or unpickleProofStateFrom"}

    def file(self, path: str, env: int | None) -> dict[str, Any]:
        """File mode: the file's text is run like a command."""
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as error:
            return {"message": f"cannot read file {path}: {error.strerror}"}
        return self.command(text, env)

    def command(self, text: str, env: int | None) -> dict[str, Any]:
        """Run a command: fresh environment without `env`, else a child of that environment."""
        if env is not None and not self._valid(env, len(self.envs)):
            return {"message": UNKNOWN_ENV}
        state = EnvState() if env is None else self.envs[env].copy()
        result, imported = self._run_text(text, state, header_allowed=env is None)
        check_s = 0.0 if _is_axiom_query(text) else self.config.check_s
        self._spend((self.config.import_s if imported else 0.0) + check_s)
        self.envs.append(state)
        answer: dict[str, Any] = {}
        if result.sorries:
            answer["sorries"] = result.sorries
        if result.messages:
            answer["messages"] = result.messages
        answer["env"] = len(self.envs) - 1
        return answer

    def tactic(self, text: str, proof_state: int) -> dict[str, Any]:
        """Scripted tactic mode: sorry stays incomplete, an error rule fails, the rest completes."""
        if not self._valid(proof_state, len(self.proof_states)):
            return {"message": UNKNOWN_PROOF_STATE}
        self._spend(self.config.check_s)
        for pattern, message in self.error_rules:
            if pattern.search(text):
                return {"message": f"Lean error:\n<input>:1:1: {message}"}
        goals = self.proof_states[proof_state]
        if find_tokens(text, SORRY_TOKENS) and goals:
            sorry_state = self._new_proof_state(goals[:1])
            answer = self._proof_state_answer(self._new_proof_state([]), [])
            answer["proofStatus"] = STATUS_CONTAINS_SORRY
            answer["sorries"] = [{"proofState": sorry_state, "goal": goals[0]}]
            return answer
        return self._proof_state_answer(self._new_proof_state([]), [])

    def pickle_env(self, path: str, env: int) -> dict[str, Any]:
        """Write the sim's view of an environment as JSON; the answer names the same env."""
        if not self._valid(env, len(self.envs)):
            return {"message": UNKNOWN_ENV}
        state = self.envs[env]
        payload = {"kind": PICKLE_KIND_ENV, "declarations": state.declarations,
                   "scopes": state.scopes, "opens": state.opens}
        Path(path).write_text(json.dumps(payload), encoding="utf-8")
        return {"env": env}

    def unpickle_env(self, path: str) -> dict[str, Any]:
        """Read an environment written by `pickle_env` into a new env id."""
        payload = self._read_pickle(path, PICKLE_KIND_ENV)
        if payload is None:
            return {"message": f"cannot unpickle environment from {path}: not a simulator pickle"}
        scopes = [(kind, name) for kind, name in payload["scopes"]]
        self.envs.append(EnvState(dict(payload["declarations"]), scopes, list(payload["opens"])))
        return {"env": len(self.envs) - 1}

    def pickle_proof_state(self, path: str, proof_state: int) -> dict[str, Any]:
        """Write a proof state's goals; like the REPL, the answer is a new proof state."""
        if not self._valid(proof_state, len(self.proof_states)):
            return {"message": UNKNOWN_PROOF_STATE}
        goals = self.proof_states[proof_state]
        Path(path).write_text(json.dumps({"kind": PICKLE_KIND_PROOF_STATE, "goals": goals}), encoding="utf-8")
        return self._proof_state_answer(self._new_proof_state(goals), goals)

    def unpickle_proof_state(self, path: str) -> dict[str, Any]:
        """Read goals written by `pickle_proof_state` into a new proof state."""
        payload = self._read_pickle(path, PICKLE_KIND_PROOF_STATE)
        if payload is None:
            return {"message": f"cannot unpickle proof state from {path}: not a simulator pickle"}
        goals = list(payload["goals"])
        return self._proof_state_answer(self._new_proof_state(goals), goals)

    # -- rules --------------------------------------------------------------------------------

    def _run_text(self, text: str, state: EnvState, header_allowed: bool) -> tuple[CommandResult, bool]:
        """Apply every rule to one command's text; returns its result and whether it imported."""
        code = code_only(text)
        positions = Positions(text)
        commands = read_commands(text)
        bounds = [command.start for command in commands[1:]] + [len(text)]
        rule_errors = self._rule_errors(text, positions)
        result, imported, in_header = CommandResult(), False, header_allowed
        for command, bound in zip(commands, bounds):
            errors = [error for offset, error in rule_errors if command.start <= offset < bound]
            result.messages.extend(errors)
            if command.kind == "import" and in_header:
                imported = True
                continue
            in_header = False
            self._apply_command(command, code, positions, state, bool(errors), result)
        first = commands[0].start if commands else len(text)
        result.messages[:0] = [error for offset, error in rule_errors if offset < first]
        return result, imported

    def _rule_errors(self, text: str, positions: Positions) -> list[tuple[int, dict[str, Any]]]:
        found = []
        for pattern, message in self.error_rules:
            for match in pattern.finditer(text):
                found.append((match.start(), _message("error", positions.at(match.start()),
                                                      positions.at(match.end()), message)))
        return sorted(found, key=lambda item: item[0])

    def _apply_command(self, command: Command, code: str, positions: Positions, state: EnvState,
                       has_error: bool, result: CommandResult) -> None:
        words = code[command.keyword_end:command.end].split()
        if command.kind in DECLARATION_KINDS:
            self._declaration(command, code, positions, state, has_error, result)
        elif command.kind == "import":
            result.messages.append(_message("error", positions.at(command.keyword_at),
                                            positions.at(command.keyword_end), MISPLACED_IMPORT))
        elif command.kind in ("namespace", "section"):
            state.scopes.append((command.kind, command.written_name))
        elif command.kind == "end" and state.scopes:
            state.scopes.pop()
        elif command.kind == "open" and words[-1:] != ["in"]:
            state.opens.extend(state.full_name(name) for name in words)
        elif command.kind == "#print" and words[:1] == ["axioms"] and len(words) > 1:
            self._print_axioms(command, words[1], code, positions, state, result)

    def _declaration(self, command: Command, code: str, positions: Positions, state: EnvState,
                     has_error: bool, result: CommandResult) -> None:
        """The sorry and duplicate-name rules for one declaration."""
        name = "" if command.kind in UNNAMED_KINDS else command.written_name
        if name:
            where = (command.name_at, command.name_at + len(name))
        else:
            where = (command.keyword_at, command.keyword_end)
        full_name = state.full_name(name) if name else None
        if full_name is not None and full_name in state.declarations:
            result.messages.append(_message("error", positions.at(where[0]), positions.at(where[1]),
                                            f"'{full_name}' has already been declared"))
            return
        sorries = find_tokens(code, SORRY_TOKENS, where[1], command.end)
        if sorries:
            for start, end in sorries:
                goal = sorry_goal(command.signature, code[where[1]:start])
                result.sorries.append({"proofState": self._new_proof_state([goal]),
                                       "pos": positions.at(start), "goal": goal,
                                       "endPos": positions.at(end)})
            result.messages.append(_message("warning", positions.at(where[0]), positions.at(where[1]),
                                            SORRY_WARNING))
        if full_name is not None:
            state.declarations[full_name] = bool(sorries) or has_error

    def _print_axioms(self, command: Command, name: str, code: str, positions: Positions, state: EnvState,
                      result: CommandResult) -> None:
        full_name = state.resolve(name)
        if full_name is None:
            start = code.find(name, command.keyword_end)
            result.messages.append(_message("error", positions.at(start), positions.at(start + len(name)),
                                            f"Unknown constant `{name}`"))
            return
        result.messages.append(_message("info", positions.at(command.keyword_at), positions.at(command.keyword_end),
                                        axioms_message(full_name, state.declarations[full_name])))

    # -- helpers ------------------------------------------------------------------------------

    @staticmethod
    def _valid(index: Any, count: int) -> bool:
        return isinstance(index, int) and not isinstance(index, bool) and 0 <= index < count

    def _new_proof_state(self, goals: list[str]) -> int:
        self.proof_states.append(list(goals))
        return len(self.proof_states) - 1

    @staticmethod
    def _proof_state_answer(proof_state: int, goals: list[str]) -> dict[str, Any]:
        status = STATUS_OPEN_GOALS if goals else STATUS_COMPLETED
        return {"proofStatus": status, "proofState": proof_state, "goals": list(goals)}

    @staticmethod
    def _read_pickle(path: str, kind: str) -> dict[str, Any] | None:
        try:
            payload = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        return payload if isinstance(payload, dict) and payload.get("kind") == kind else None

    def _spend(self, seconds: float) -> None:
        """Stand in for Lean's work: spin the CPU (CPU seconds, so contention slows it like Lean) or sleep. With a
        `busy_log`, the wall-clock span is appended to it, so a benchmark can tell how busy the pool was."""
        if seconds <= 0:
            return
        started = time.time()
        if not self.config.burn_cpu:
            time.sleep(seconds)
        else:
            deadline = time.process_time() + seconds
            while time.process_time() < deadline:
                pass
        if self.config.busy_log is not None:
            append_busy_span(self.config.busy_log, started, time.time())


# --- the process ------------------------------------------------------------------------------


def read_requests(stream: BinaryIO) -> Iterator[str]:
    """Requests as the REPL reads them: lines up to a blank line, each line's trailing whitespace
    (its newline included) removed before joining — so a raw line break inside a JSON string
    disappears, exactly as the transcripts show."""
    lines: list[str] = []
    for raw in stream:
        line = raw.decode("utf-8")
        if line.strip():
            lines.append(line.rstrip(" \t\r\n"))
        elif lines:
            yield "".join(lines)
            lines = []
    if lines:
        yield "".join(lines)


def request_text(raw: str, request: dict[str, Any] | None) -> str:
    """What the triggers look at: the request itself, plus the file it names in file mode."""
    if request and isinstance(request.get("path"), str):
        try:
            return raw + "\n" + Path(request["path"]).read_text(encoding="utf-8")
        except OSError:
            return raw
    return raw


def parse_request(raw: str) -> tuple[dict[str, Any] | None, str]:
    """The request object, or None and the text of the REPL-level `{"message": ...}` to answer."""
    try:
        request = json.loads(raw)
    except json.JSONDecodeError as error:
        return None, f"Could not parse JSON request: {error}"
    if not isinstance(request, dict):
        return None, f"{raw}\nrequest must be a JSON object"
    return request, ""


def serve(simulator: Simulator, faults: Faults, stdin: BinaryIO, stdout: BinaryIO) -> None:
    """The read-answer loop: one answer per request, each ended by a blank line and flushed."""
    for raw in read_requests(stdin):
        request, failure = parse_request(raw)
        if faults.misbehave(request_text(raw, request), request, stdout):
            continue
        answer = {"message": failure} if request is None else simulator.handle(request)
        write_flushed(stdout, render_answer(answer) + FRAME_END)


def main(argv: list[str] | None = None) -> None:
    """Entry point of `python -m lean_pool.simulator --config JSON`."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", required=True, help="the sim: block of conf/lean/sim.yaml as JSON")
    args = parser.parse_args(argv)
    config = SimConfig.from_dict(json.loads(args.config))
    simulator = Simulator(config)
    faults = Faults(config)
    sys.stderr.write(BANNER + faults.fault_notice())
    sys.stderr.flush()
    serve(simulator, faults, sys.stdin.buffer, sys.stdout.buffer)


if __name__ == "__main__":
    main()
