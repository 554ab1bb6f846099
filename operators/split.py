"""split: one discover answer -> its candidate statements, one self-contained Lean file each.

The code after the marker is read with `lean_pool.lean_source.read_commands`; each `lemma`/`theorem`
becomes a file with the context it needs, the first `discover.max_lemmas` of them (the rest are counted as dropped,
so one runaway answer cannot flood the later stages). What went wrong with an answer (no marker, no lemma) becomes
the discovery's status. Written discoveries become candidate rows a seed at a time, and the candidates
an earlier run already finished are left out, a seed at a time too. With `subgoals` on, the goals a finished
candidate's failed proofs left open become candidates as well, each a theorem in its parent's context.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from lean_pool.lean_source import (
    THEOREM_KINDS,
    Command,
    goal_theorem,
    read_commands,
    read_goal,
)
from operators.llm.answers import extract_code
from operators.rows.candidates import (
    COMPILED,
    SUBGOAL,
    TRIVIAL,
    CandidateRow,
    candidates_table,
    empty_candidate,
    new_candidate,
    subgoal_id,
)
from operators.stage import Config, Execution, Shared, Stage
from operators.storage import resolve

# Discovery statuses that come from the answer's text.
DISCOVERED = "discovered"
# The statuses of seed items in a mining plan: a seed with samples still to draw (what discover takes), and a seed
# whose discoveries are written (what split reads).
SEED_TO_DISCOVER = "seed to discover"
SEED_DISCOVERED = "seed discovered"
NO_MARKER = "no_marker"
NO_LEMMAS = "no_lemmas"

# Context commands a statement may need, kept in its file when in scope at the declaration.
# `include`/`omit` decide which section variables a theorem gets, so they travel with `variable`.
SNIPPET_CONTEXT = frozenset({"open", "universe", "variable", "set_option", "include", "omit"})


@dataclass(frozen=True)
class SplitAnswer:
    """What one discover answer yields: a status, the Lean code after the marker, one file per lemma kept, and how
    many lemmas beyond the cap were dropped (None when the answer was not split)."""

    status: str
    reason: str | None
    code: str | None
    snippets: tuple[str, ...]
    dropped: int | None


def split_answer(response: str, marker: str, max_lemmas: int) -> SplitAnswer:
    """Extract the code after the marker and split it into one snippet per `lemma`/`theorem`, keeping the first
    `max_lemmas` and counting the rest as dropped."""
    code = extract_code(response, marker)
    if code is None:
        return SplitAnswer(NO_MARKER, f"the answer has no `{marker}` line", None, (), None)
    lemmas = split_lemmas(code)
    if not lemmas:
        return SplitAnswer(NO_LEMMAS, "no `lemma` or `theorem` after the marker", code, (), 0)
    dropped = max(len(lemmas) - max_lemmas, 0)
    reason = f"{dropped} of {len(lemmas)} lemmas dropped: discover.max_lemmas={max_lemmas}" if dropped else None
    return SplitAnswer(DISCOVERED, reason, code, tuple(lemmas[:max_lemmas]), dropped)


def split_lemmas(code: str) -> list[str]:
    """One self-contained Lean file per `lemma`/`theorem` of `code`, in order.

    Each file has the imports, the enclosing `namespace`/`section` openers (with their `end`s appended)
    and the context commands still in scope at the declaration, then the declaration with its docstring,
    attributes, modifiers and `open ... in`. Nothing else is kept: other lemmas, `def`s, instances and
    comments between commands are dropped, so a statement that uses a `def` from the same answer will
    not compile on its own.
    """
    imports: list[str] = []
    files = []
    for command in read_commands(code):
        if command.kind == "import":
            imports.append(command.text)
        elif command.kind in THEOREM_KINDS:
            files.append(_lean_file(imports, command))
    return files


def _lean_file(imports: list[str], declaration: Command) -> str:
    """Imports, scope openers with their context, the declaration, then the `end`s, as one file."""
    scopes = declaration.scopes
    context = []
    for scope in scopes:
        context += [scope.opener] if scope.opener else []
        context += [command.text for command in scope.context if command.kind in SNIPPET_CONTEXT]
    closers = [scope.closer for scope in reversed(scopes) if scope.opener]
    blocks = ["\n".join(imports), "\n".join(context), declaration.text, "\n".join(closers)]
    return "\n\n".join(block for block in blocks if block) + "\n"


def explode(discovery: Mapping[str, Any]) -> list[CandidateRow]:
    """The candidate rows of one written discovery, one per snippet."""
    return [new_candidate(discovery, index, snippet) for index, snippet in enumerate(discovery["snippets"] or [])]


@dataclass(frozen=True)
class SubgoalSettings:
    """`subgoals:` as split and prove read it: how many open goals of one parent become candidates, and whether a
    failed first proof is followed by a request for a sketch."""

    max_per_candidate: int
    sketch_prompt: bool


SUBGOAL_SUFFIX = "_subgoal_"
# A parent's sub-goals are mined once its proving ended without a proof.
SUBGOAL_PARENT_STATUSES = (COMPILED,)
ASSUMPTION_REASON = "subgoal: the goal is one of its own hypotheses"


def open_goals_of(parent: Mapping[str, Any]) -> list[str]:
    """Every goal the parent's proof attempts left open, each once, in the order the attempts met them."""
    goals = [goal for proof in parent["proofs"] or [] for attempt in proof["attempts"] or []
             for goal in attempt.get("goals") or []]
    return list(dict.fromkeys(goals))


def restated(parent_file: str, declaration: str) -> str | None:
    """`declaration` in place of the first theorem of `parent_file`, as a file of its own with the context the parent
    had (imports, namespaces, `open`s, variables): split's rules, applied to a goal's statement."""
    theorem = next((c for c in read_commands(parent_file) if c.kind in THEOREM_KINDS), None)
    if theorem is None:
        return None
    files = split_lemmas(parent_file[:theorem.start] + declaration + "\n" + parent_file[theorem.end:])
    return files[0] if files else None


def subgoal_candidates(parent: Mapping[str, Any], max_per_candidate: int) -> list[CandidateRow]:
    """The candidates a parent's open goals give, at most `max_per_candidate`: each goal a theorem named after its
    parent, in the parent's context. A goal that is one of its own hypotheses is `trivial` at once; a goal that
    cannot be a statement (a `let` value among its hypotheses, text that is not a goal) gives none."""
    statement = parent["statement"] or ""
    theorem = next((c for c in read_commands(statement) if c.kind in THEOREM_KINDS), None)
    if theorem is None:
        return []
    rows = []
    for index, text in enumerate(open_goals_of(parent)[:max_per_candidate]):
        goal = read_goal(text)
        if goal is None or goal.let_bound:
            continue
        lean_file = restated(statement, goal_theorem(goal, f"{theorem.written_name}{SUBGOAL_SUFFIX}{index + 1}"))
        if lean_file is None:
            continue
        row = empty_candidate(
            candidate_id=subgoal_id(parent["candidate_id"], index), parent_id=parent["candidate_id"],
            goal_index=index, origin=SUBGOAL, depth=(parent["depth"] or 0) + 1, statement_raw=lean_file,
            discovered_at=parent["finished_at"],
            **{key: parent[key] for key in ("unit_id", "seed_id", "seed_path", "domain", "sample", "snippet_index",
                                            "round", "provenance")})
        if goal.is_assumption:
            row.update({"status": TRIVIAL, "trivial": True, "reason": ASSUMPTION_REASON})
        rows.append(row)
    return rows


PARENT_COLUMNS = ["candidate_id", "unit_id", "seed_id", "seed_path", "domain", "sample", "snippet_index", "round",
                  "depth", "statement", "proofs", "provenance", "finished_at"]

# What split takes, one row per seed: the discovery files holding its rows, and the candidate files holding the
# rows of it an earlier run finished (read for that seed alone, so no list of every finished id is ever built). With
# a `subgoal_depth` above 0, the open goals of its finished candidates one level above become candidates too.
SEED_ITEM_SCHEMA = pa.schema([
    ("seed_id", pa.string()),
    ("paths", pa.list_(pa.string())),
    ("finished_files", pa.list_(pa.string())),
    ("subgoal_depth", pa.int32()),
])


def explode_seeds(batch: pa.Table, subgoals: SubgoalSettings | None = None) -> pa.Table:
    """`map_batches` step over seed items (`SEED_ITEM_SCHEMA`): every candidate of these seeds, from every discovery
    file that holds them, and (items with a `subgoal_depth`, `subgoals` on) the sub-goals of their parents. A seed's
    candidates leave in one block, so the dedup stage sees them together."""
    seeds = batch.column("seed_id").to_pylist()
    paths = dict.fromkeys(path for paths in batch.column("paths").to_pylist() for path in paths)
    rows = []
    for path in paths:
        filesystem, location = resolve(path)
        written = pq.read_table(location, filesystem=filesystem, filters=[("seed_id", "in", seeds)])
        for discovery in written.to_pylist():
            rows.extend(explode(discovery))
    for item in batch.to_pylist():
        if subgoals is not None and item["subgoal_depth"]:
            for parent in parents(item):
                rows.extend(subgoal_candidates(parent, subgoals.max_per_candidate))
    return candidates_table(rows)


def parents(item: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The finished candidates of a seed item one level above its `subgoal_depth` whose proving left goals open."""
    found: list[dict[str, Any]] = []
    for path in item["finished_files"]:
        filesystem, location = resolve(path)
        written = pq.read_table(location, filesystem=filesystem, columns=PARENT_COLUMNS, filters=[
            ("seed_id", "=", item["seed_id"]), ("status", "in", list(SUBGOAL_PARENT_STATUSES)),
            ("depth", "=", item["subgoal_depth"] - 1)])
        found.extend(parent for parent in written.to_pylist() if open_goals_of(parent))
    return found


def unfinished(candidates: pa.Table, seeds: pa.Table) -> pa.Table:
    """The `candidates` of the seed items `seeds` that an earlier run has not written: each seed's finished ids are
    read from its own `finished_files`, so what an earlier run wrote is never redone."""
    seed_ids = seeds.column("seed_id").to_pylist()
    files = dict.fromkeys(path for paths in seeds.column("finished_files").to_pylist() for path in paths)
    finished = []
    for path in files:
        filesystem, location = resolve(path)
        written = pq.read_table(location, filesystem=filesystem, columns=["candidate_id"],
                                filters=[("seed_id", "in", seed_ids)])
        finished.append(written.column("candidate_id"))
    if not finished:
        return candidates
    done = pa.chunked_array(finished, pa.string()).combine_chunks()
    return candidates.filter(pc.invert(pc.is_in(candidates.column("candidate_id"), value_set=done)))


def split_seeds(batch: pa.Table, subgoals: SubgoalSettings | None = None) -> pa.Table:
    """The split step without dedup: the seeds' candidates (and sub-goals) an earlier run has not finished."""
    return unfinished(explode_seeds(batch, subgoals), batch)


def split_arguments(cfg: Config, shared: Shared) -> dict[str, Any]:
    """Split takes the sub-goal settings alone (None when sub-goals are off)."""
    return {"subgoals": shared.subgoals}


def with_dedup(cfg: Config) -> str | None:
    """Split compares each candidate with the index and its siblings when `dedup.enabled`: split+dedup runs instead."""
    return "split+dedup" if cfg["dedup"]["enabled"] else None


DECLARATION = Stage(
    name="split", operator=split_seeds, arguments=split_arguments, execution=Execution.TASKS,
    takes=frozenset({SEED_DISCOVERED}), gives=frozenset({DISCOVERED, TRIVIAL}), instead=with_dedup)
