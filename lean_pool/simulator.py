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

Faults, for the pool's failure handling and chaos benchmarks: a request containing a trigger pattern
crashes, hangs, answers garbage, writes noise or grows on purpose; and `faults:` makes a share of all
checks crash or hang at random (see `FaultRates` for how the draws stay reproducible yet let a retry pass).
"""

from __future__ import annotations

import argparse
import bisect
import hashlib
import json
import re
import secrets
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, NoReturn

from lean_pool.busy_log import append_busy_span
from lean_pool.lean_source import DECLARATION_KINDS, Command, code_only, find_tokens, read_commands, sorry_goal

BANNER = (
    "lean_pool.simulator: this is a SIMULATED Lean REPL; its verdicts come from explicit textual "
    "rules, no mathematics is checked\n"
)
LINE_WIDTH = 80  # Lean's Json.pretty width: the REPL's answers are laid out for it
MESSAGE_WIDTH = 120  # Lean's default Format width, which wraps long message texts
FRAME_END = "\n\n"
CRASH_EXIT_CODE = 1
HANG_SLEEP_S = 3600.0
MIB = 1024 * 1024
PAGE_BYTES = 4096
GARBAGE_TEXT = "simulated garbage: this answer is deliberately not JSON\n"
NOISE_TEXT = "simulated noise: a line on stderr that is not part of any answer\n"

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

CRASH = "crash"
HANG = "hang"
FAULT_SEED_BITS = 63  # a seed drawn from the OS fits a signed 64-bit config integer
DRAW_BYTES = 8        # bytes of a SHA-256 digest turned into one draw in [0, 1)


@dataclass(frozen=True)
class ErrorRule:
    """Text matching `pattern` (a regular expression) gets an error saying `message`."""

    pattern: str
    message: str


@dataclass(frozen=True)
class FaultRates:
    """Random faults for chaos runs: a share `crash_rate` of checks exits without answering, a share `hang_rate`
    never answers (the pool's timeout ends it). A check is any command, file or tactic request except a header
    import, which is the REPL starting rather than a check.

    Each delivery of a check draws once, from (seed, its position among this process's checks, its text): one
    process fed the same requests misbehaves the same way, while a check the pool retries on a fresh REPL lands at
    another position and draws anew. A fixed `seed` is for tests: every REPL restarted after a crash would replay
    the same draws, so a check that crashed as the first of its process would crash again as the first of the
    next. With `seed` null each process takes its own seed from the OS and says it on stderr, so any process's
    draws can be replayed by setting that seed.
    """

    crash_rate: float
    hang_rate: float
    seed: int | None

    def __post_init__(self) -> None:
        rates = (self.crash_rate, self.hang_rate)
        if any(rate < 0 for rate in rates) or sum(rates) > 1:
            raise ValueError(f"sim.faults: crash_rate={self.crash_rate} and hang_rate={self.hang_rate} must be "
                             "shares: each at least 0, together at most 1")

    @property
    def enabled(self) -> bool:
        return self.crash_rate > 0 or self.hang_rate > 0


def fault_draw(seed: int, position: int, text: str) -> float:
    """A number in [0, 1) that depends only on its arguments: the random faults' only source of chance."""
    digest = hashlib.sha256(f"{seed}\x1f{position}\x1f{text}".encode()).digest()
    return int.from_bytes(digest[:DRAW_BYTES], "big") / 2 ** (8 * DRAW_BYTES)


def drawn_fault(rates: FaultRates, seed: int, position: int, text: str) -> str | None:
    """`crash`, `hang` or None for the check delivered at `position` (1-based) of a process, with text `text`."""
    draw = fault_draw(seed, position, text)
    if draw < rates.crash_rate:
        return CRASH
    if draw < rates.crash_rate + rates.hang_rate:
        return HANG
    return None


def is_check(request: dict[str, Any] | None) -> bool:
    """Whether random faults may hit this request: a command, file or tactic, but not a header import (a command
    of imports only) nor an environment or proof state being pickled."""
    if request is None:
        return False
    if "tactic" in request or "path" in request:
        return True
    command = request.get("cmd")
    if not isinstance(command, str):
        return False
    kinds = {parsed.kind for parsed in read_commands(command)}
    return kinds != {"import"}


@dataclass(frozen=True)
class SimConfig:
    """The `sim:` block of conf/lean/sim.yaml; every key is required so a typo fails loudly."""

    import_s: float
    check_s: float
    burn_cpu: bool
    crash_pattern: str
    hang_pattern: str
    garbage_pattern: str
    noise_pattern: str
    grow_pattern: str
    grow_mb: int
    faults: FaultRates
    busy_log: str | None
    error_rules: tuple[ErrorRule, ...] = ()

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> SimConfig:
        """Build from the JSON given on the command line."""
        values = dict(raw)
        values["faults"] = FaultRates(**values["faults"])
        values["error_rules"] = tuple(ErrorRule(**rule) for rule in values.get("error_rules") or ())
        return cls(**values)


# --- the REPL's JSON layout -------------------------------------------------------------------


def _json_string(text: str) -> str:
    """Escape a string the way Lean's Json renderer does (non-ASCII stays as is)."""
    out = ['"']
    for char in text:
        if char == '"':
            out.append('\\"')
        elif char == "\\":
            out.append("\\\\")
        elif char == "\n":
            out.append("\\n")
        elif char == "\r":
            out.append("\\r")
        elif ord(char) < 0x20:
            out.append(f"\\u{ord(char):04x}")
        else:
            out.append(char)
    out.append('"')
    return "".join(out)


def _ordered(obj: dict[str, Any]) -> list[tuple[str, Any]]:
    """Lean stores object fields in a sorted map and prints them in reverse key order."""
    return sorted(obj.items(), key=lambda item: item[0], reverse=True)


def _flat(value: Any) -> str:
    """A value on one line, as Lean prints a group that fits."""
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_json_string(k)}: {_flat(v)}" for k, v in _ordered(value)) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_flat(v) for v in value) + "]"
    if isinstance(value, str):
        return _json_string(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    return str(value)


def _layout(value: Any, indent: int, column: int, trailing: int) -> str:
    """Lean's Format algorithm specialised to JSON: a bracket group stays on one line if it and
    the text up to the next possible break (`trailing` characters) fit, else each item gets a line."""
    flat = _flat(value)
    if not isinstance(value, (dict, list)) or not value or column + len(flat) + trailing <= LINE_WIDTH:
        return flat
    inner = indent + 1
    items = _ordered(value) if isinstance(value, dict) else list(value)
    pieces = []
    for index, item in enumerate(items):
        item_trailing = 1 + (trailing if index == len(items) - 1 else 0)
        item_column = column + 1 if index == 0 else inner
        if isinstance(value, dict):
            pieces.append(_layout_field(item[0], item[1], inner, item_column, item_trailing))
        else:
            pieces.append(_layout(item, inner, item_column, item_trailing))
    opener, closer = ("{", "}") if isinstance(value, dict) else ("[", "]")
    return opener + (",\n" + " " * inner).join(pieces) + closer


def _layout_field(key: str, value: Any, indent: int, column: int, trailing: int) -> str:
    """`"key": value` on one line if it fits, else the value on its own line at the indent."""
    flat = f"{_json_string(key)}: {_flat(value)}"
    if column + len(flat) + trailing <= LINE_WIDTH:
        return flat
    return f"{_json_string(key)}:\n{' ' * indent}{_layout(value, indent, indent, trailing)}"


def render_answer(answer: dict[str, Any]) -> str:
    """One answer exactly as the REPL prints it (without the blank line that ends the frame)."""
    return _layout(answer, 0, 0, 0)


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
        self.kept_memory: list[bytearray] = []
        self.error_rules = [(re.compile(rule.pattern), rule.message) for rule in config.error_rules]
        faults = config.faults
        self.fault_seed = faults.seed if faults.seed is not None else secrets.randbits(FAULT_SEED_BITS)
        self.checks_drawn = 0  # checks that drew against the fault rates so far: the next one's position - 1

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

    # -- fault triggers -------------------------------------------------------------------------

    def fault_notice(self) -> str:
        """The stderr line that says random faults are on and with which seed ("" when they are off)."""
        faults = self.config.faults
        if not faults.enabled:
            return ""
        return (f"lean_pool.simulator: random faults on: crash_rate={faults.crash_rate} hang_rate={faults.hang_rate} "
                f"seed={self.fault_seed} (sim.faults.seed={self.fault_seed} replays this process's draws)\n")

    def draw_fault(self, text: str, request: dict[str, Any] | None) -> str | None:
        """The random fault this delivery suffers, if any; only checks draw (and count)."""
        if not self.config.faults.enabled or not is_check(request):
            return None
        self.checks_drawn += 1
        return drawn_fault(self.config.faults, self.fault_seed, self.checks_drawn, text)

    def misbehave(self, text: str, request: dict[str, Any] | None, out: BinaryIO) -> bool:
        """Apply the fault triggers, then the random faults; True if the request must not be answered normally."""
        config = self.config
        if config.crash_pattern and config.crash_pattern in text:
            _crash(f"crash trigger {config.crash_pattern!r} seen")
        if config.hang_pattern and config.hang_pattern in text:
            _hang(f"hang trigger {config.hang_pattern!r} seen")
        fault = self.draw_fault(text, request)
        if fault == CRASH:
            _crash(f"random crash at check {self.checks_drawn} (seed {self.fault_seed})")
        if fault == HANG:
            _hang(f"random hang at check {self.checks_drawn} (seed {self.fault_seed})")
        if config.garbage_pattern and config.garbage_pattern in text:
            _write(out, GARBAGE_TEXT + "\n")
            return True
        if config.noise_pattern and config.noise_pattern in text:
            sys.stderr.write(NOISE_TEXT)
            sys.stderr.flush()
        if config.grow_pattern and config.grow_pattern in text:
            self._grow()
        return False

    def _grow(self) -> None:
        """Keep grow_mb more memory, writing every page so the resident set really grows."""
        try:
            block = bytearray(self.config.grow_mb * MIB)
            block[::PAGE_BYTES] = b"\x01" * len(range(0, len(block), PAGE_BYTES))
        except MemoryError:
            sys.stderr.write("lean_pool.simulator: out of memory while growing; exiting\n")
            sys.stderr.flush()
            sys.exit(CRASH_EXIT_CODE)
        self.kept_memory.append(block)


def _crash(reason: str) -> NoReturn:
    """Exit without answering, as a REPL that died would; stderr says why."""
    sys.stderr.write(f"lean_pool.simulator: {reason}; exiting\n")
    sys.stderr.flush()
    sys.exit(CRASH_EXIT_CODE)


def _hang(reason: str) -> NoReturn:
    """Never answer, as a REPL stuck in elaboration would; stderr says why."""
    sys.stderr.write(f"lean_pool.simulator: {reason}; never answering\n")
    sys.stderr.flush()
    while True:
        time.sleep(HANG_SLEEP_S)


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


def _write(out: BinaryIO, text: str) -> None:
    out.write(text.encode("utf-8"))
    out.flush()


def parse_request(raw: str) -> tuple[dict[str, Any] | None, str]:
    """The request object, or None and the text of the REPL-level `{"message": ...}` to answer."""
    try:
        request = json.loads(raw)
    except json.JSONDecodeError as error:
        return None, f"Could not parse JSON request: {error}"
    if not isinstance(request, dict):
        return None, f"{raw}\nrequest must be a JSON object"
    return request, ""


def serve(simulator: Simulator, stdin: BinaryIO, stdout: BinaryIO) -> None:
    """The read-answer loop: one answer per request, each ended by a blank line and flushed."""
    for raw in read_requests(stdin):
        request, failure = parse_request(raw)
        if simulator.misbehave(request_text(raw, request), request, stdout):
            continue
        answer = {"message": failure} if request is None else simulator.handle(request)
        _write(stdout, render_answer(answer) + FRAME_END)


def main(argv: list[str] | None = None) -> None:
    """Entry point of `python -m lean_pool.simulator --config JSON`."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", required=True, help="the sim: block of conf/lean/sim.yaml as JSON")
    args = parser.parse_args(argv)
    config = SimConfig.from_dict(json.loads(args.config))
    simulator = Simulator(config)
    sys.stderr.write(BANNER + simulator.fault_notice())
    sys.stderr.flush()
    serve(simulator, sys.stdin.buffer, sys.stdout.buffer)


if __name__ == "__main__":
    main()
