"""Recall and false positives of benchmark decontamination, on restatements of real benchmark problems.

Half of miniF2F's validation split (a directory of .lean files) and half of the ProofNet sample (JSONL) are the
benchmarks; the corpus holds restatements of their problems, near misses of them, and unrelated statements (the other
halves of both, and real Mathlib theorems). The restatements are written by this file's own text edits, not by the
canonical form under test: the theorem renamed and `theorem`/`lemma` swapped, binders and hypotheses renamed,
ungrouped and reordered (dependencies kept), a conjunction hypothesis split into one hypothesis per conjunct, a
hypothesis moved after the colon, the layout changed, and
notation variants (`x^2`, `λ x ↦`, nested `∀`, `b > a` for `a < b`, `sin` for `Real.sin` under `open Real`). A near
miss is a restatement with one constant or one operator changed: a different statement, whose flagging a corpus owner
judges. Reading the benchmarks and judging the corpus go through the jobs' own functions
(`pipelines.runtime.benchmarks`).

    python benchmarks/decontaminate_bench.py [--seed 0] [--variants 3] [--mathlib 1500]

Last line: `recall=… false_positive_rate=… near_miss_flagged=… rows_per_s=…`.
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from omegaconf import OmegaConf

from conf import compose_config
from lean_pool.lean_source import read_commands
from operators.decontaminate import DECISIVE_KINDS, read_statements
from pipelines.runtime.benchmarks import decontaminator

FIXTURES = Path(__file__).resolve().parents[2] / "shared" / "fixtures"
MINIF2F = FIXTURES / "minif2f-lean4-valid"
PROOFNET = FIXTURES / "proofnet-lean4-sample" / "proofnet.jsonl"
MATHLIB = FIXTURES / "mathlib-sample" / "Mathlib"
OPENERS, CLOSERS = "([{⦃⟨", ")]}⦄⟩"
NAME_CHARS = "_'!?₀₁₂₃₄₅₆₇₈₉ₐₑₒₓₕₖₗₘₙₚₛₜ"
FRESH_NAMES = ["a", "b", "c", "d", "u", "v", "w", "p", "q", "r", "s", "t", "k", "m", "n", "x", "y", "z", "α", "β",
               "hA", "hB", "hC", "hD", "hE", "hF", "hG", "hH", "hI", "hJ", "hK", "hL", "hM", "hN", "hP", "hQ"]
RESTATEMENT, NEAR_MISS, UNRELATED = "restatement", "near_miss", "unrelated"


@dataclass
class Binder:
    """A binder group as written: its bracket, its names (empty for an instance), its type."""

    opener: str
    names: list[str]
    type: str

    def text(self) -> str:
        closer = CLOSERS[OPENERS.index(self.opener)]
        if not self.names:
            return f"{self.opener}{self.type}{closer}"
        return f"{self.opener}{' '.join(self.names)} : {self.type}{closer}"


@dataclass(frozen=True)
class Source:
    """A problem as the corpus writer sees it: its id, the lines before its theorem, its signature."""

    problem_id: str
    preamble: str
    signature: str


@dataclass(frozen=True)
class Row:
    """A corpus row of the bench: its text, what it is, the problem it derives from, the edits made."""

    text: str
    kind: str
    problem: str | None
    edits: tuple[str, ...]


def is_name_char(c: str) -> bool:
    return c.isalnum() or c in NAME_CHARS


def replace_word(text: str, old: str, new: str) -> str:
    """`old` replaced where it stands as a whole name (a field access `old.x` counts, `y.old` does not)."""
    out, i = [], 0
    while i < len(text):
        if text.startswith(old, i) and (i == 0 or (not is_name_char(text[i - 1]) and text[i - 1] != ".")) and (
                i + len(old) == len(text) or not is_name_char(text[i + len(old)])):
            out.append(new)
            i += len(old)
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def split_signature(signature: str) -> tuple[list[Binder], str] | None:
    """The binder groups before the top-level colon and the conclusion, by bracket counting."""
    binders, i = [], 0
    while i < len(signature):
        c = signature[i]
        if c.isspace():
            i += 1
        elif c in OPENERS and c != "⟨":
            depth, j = 0, i
            while j < len(signature):
                depth += (signature[j] in OPENERS) - (signature[j] in CLOSERS)
                if depth == 0:
                    break
                j += 1
            inside = signature[i + 1 : j]
            binders.append(group(c, inside))
            i = j + 1
        elif c == ":":
            return binders, signature[i + 1 :].strip()
        else:
            return None
    return None


def group(opener: str, inside: str) -> Binder:
    depth = 0
    for k, c in enumerate(inside):
        depth += (c in OPENERS) - (c in CLOSERS)
        if c == ":" and depth == 0 and not inside.startswith(":=", k):
            names = inside[:k].split()
            if opener == "[":
                return Binder("[", [], inside[k + 1 :].strip())
            return Binder(opener, names, inside[k + 1 :].strip())
    return Binder(opener, [] if opener == "[" else inside.split(), inside.strip() if opener == "[" else "")


def mentions(text: str, name: str) -> bool:
    return replace_word(text, name, "\0") != text


def render(keyword: str, name: str, binders: list[Binder], conclusion: str, layout: str) -> str:
    if layout == "one_line":
        return f"{keyword} {name} {' '.join(b.text() for b in binders)} : {conclusion} := by sorry"
    if layout == "spaced":
        inner = " ".join(b.text().replace("(", "( ").replace(")", " )") for b in binders)
        return f"{keyword} {name}\n    {inner} :\n    {conclusion} := by\n  sorry"
    lines = "\n".join(f"  {b.text()}" for b in binders)
    return f"{keyword} {name}\n{lines} :\n  {conclusion} := by\n  sorry"


def restate(source: Source, rng: random.Random, near_miss: bool) -> Row | None:
    """A restatement (or near miss) of `source`, by edits chosen at random."""
    split = split_signature(source.signature)
    if split is None:
        return None
    binders, conclusion = split
    edits = ["renamed_theorem"]
    taken = {w for w in FRESH_NAMES if mentions(source.signature, w)}
    fresh = [w for w in FRESH_NAMES if w not in taken]
    rng.shuffle(fresh)
    if rng.random() < 0.7:
        singles = []
        for b in binders:
            singles += [Binder(b.opener, [n], b.type) for n in b.names] if len(b.names) > 1 else [b]
        if len(singles) != len(binders):
            edits.append("ungrouped")
        binders = singles
    renaming = {}
    for b in binders:
        for n in b.names:
            if fresh and n not in renaming:
                renaming[n] = fresh.pop()
    if renaming:
        edits.append("renamed_binders")

        def apply(text: str) -> str:
            marked = text
            for old in renaming:
                marked = replace_word(marked, old, f"\x01{old}\x02")
            for old, new in renaming.items():
                marked = marked.replace(f"\x01{old}\x02", new)
            return marked

        binders = [Binder(b.opener, [renaming.get(n, n) for n in b.names], apply(b.type)) for b in binders]
        conclusion = apply(conclusion)
    if rng.random() < 0.3:
        binders, split = split_conjunction(binders, conclusion)
        if split:
            edits.append("split_conjunction")
    if rng.random() < 0.8:
        binders, moved = reorder(binders, rng)
        if moved:
            edits.append("reordered")
    if rng.random() < 0.3:
        binders, conclusion, moved = hypothesis_after_colon(binders, conclusion)
        if moved:
            edits.append("hypothesis_after_colon")
    text_edits = notation_edits(rng, source.preamble)
    for edit, fn in text_edits:
        new_binders = [Binder(b.opener, b.names, fn(b.type)) for b in binders]
        new_conclusion = fn(conclusion)
        if new_conclusion != conclusion or any(a.type != b.type for a, b in zip(new_binders, binders)):
            edits.append(edit)
            binders, conclusion = new_binders, new_conclusion
    if near_miss:
        changed = change_meaning(binders, conclusion, rng)
        if changed is None:
            return None
        binders, conclusion, edit = changed
        edits.append(edit)
    keyword = rng.choice(["theorem", "lemma"])
    name = f"restated_{rng.randrange(10**6)}"
    layout = rng.choice(["one_line", "spaced", "lines"])
    text = f"{source.preamble}\n\n{render(keyword, name, binders, conclusion, layout)}\n"
    return Row(text, NEAR_MISS if near_miss else RESTATEMENT, source.problem_id, tuple(edits + [layout]))


def reorder(binders: list[Binder], rng: random.Random) -> tuple[list[Binder], bool]:
    """A random order of the binders in which each still comes after those its type mentions."""
    left, order = list(range(len(binders))), []
    while left:
        ready = [i for i in left
                 if not any(mentions(binders[i].type, n) for j in left if j != i for n in binders[j].names)]
        pick = rng.choice(ready or left)
        order.append(pick)
        left.remove(pick)
    return [binders[i] for i in order], order != sorted(order)


def top_level_parts(text: str, separator: str) -> list[str]:
    """`text` cut at each `separator` outside brackets."""
    parts, depth, start, i = [], 0, 0, 0
    while i < len(text):
        depth += (text[i] in OPENERS) - (text[i] in CLOSERS)
        if depth == 0 and text.startswith(separator, i):
            parts.append(text[start:i])
            start = i + len(separator)
            i = start
            continue
        i += 1
    return [*parts, text[start:]]


def split_conjunction(binders: list[Binder], conclusion: str) -> tuple[list[Binder], bool]:
    """The first hypothesis nothing mentions whose type is a conjunction (`(h : A ∧ B)`) as one hypothesis per
    conjunct (`(h_1 : A) (h_2 : B)`)."""
    for i, b in enumerate(binders):
        others = [x.type for k, x in enumerate(binders) if k != i] + [conclusion]
        parts = top_level_parts(b.type, " ∧ ")
        if (b.opener != "(" or len(b.names) != 1 or len(parts) < 2 or any(mentions(t, b.names[0]) for t in others)
                or any(s in b.type for s in ("∨", "→", "↔", "∀", "∃", "fun", "λ", ","))):
            continue
        split = [Binder("(", [f"{b.names[0]}_{k}"], part.strip()) for k, part in enumerate(parts, 1)]
        return binders[:i] + split + binders[i + 1 :], True
    return binders, False


def hypothesis_after_colon(binders: list[Binder], conclusion: str) -> tuple[list[Binder], str, bool]:
    """The last hypothesis nothing mentions moved into the conclusion as a premise (`(h : P) : Q` as `: P → Q`)."""
    if any(s in conclusion for s in ("↔", "∀", "∃", "fun", "λ", "→")):
        return binders, conclusion, False
    for i in range(len(binders) - 1, -1, -1):
        b = binders[i]
        others = [x.type for k, x in enumerate(binders) if k != i] + [conclusion]
        if b.opener == "(" and len(b.names) == 1 and not any(mentions(t, b.names[0]) for t in others):
            premise = b.type
            if any(s in premise for s in ("→", "↔", "∀", "∃", "fun", "λ", ",")):
                premise = f"({premise})"
            return binders[:i] + binders[i + 1 :], f"{premise} → {conclusion}", True
    return binders, conclusion, False


def nested_forall(text: str) -> str:
    """`∀ a b : T, P` as `∀ a : T, ∀ b : T, P` (plain names only)."""
    at = text.find("∀ ")
    if at < 0:
        return text
    comma = text.find(",", at)
    section = text[at + 2 : comma] if comma > 0 else ""
    names, _, kind = section.partition(":")
    words = names.split()
    if comma < 0 or len(words) < 2 or any(c in names for c in OPENERS + "∈<>≤≥") or not all(
            is_name_char(w[0]) for w in words):
        return text
    typed = f" : {kind.strip()}" if kind.strip() else ""
    return text[:at] + " ".join(f"∀ {w}{typed}," for w in words) + text[comma + 1 :]


def mirrored(text: str) -> str:
    """A type that is one comparison of two space-free terms, `a < b` or `a ≤ b`, as `b > a` or `b ≥ a`."""
    parts = text.split(" ")
    if len(parts) == 3 and parts[1] in ("<", "≤") and not any(c in text for c in "∧∨→↔,"):
        return f"{parts[2]} {'>' if parts[1] == '<' else '≥'} {parts[0]}"
    return text


def notation_edits(rng: random.Random, preamble: str) -> list[tuple[str, object]]:
    """Some of the notation variants, chosen at random."""
    edits = [("tight_power", lambda t: t.replace(" ^ ", "^")),
             ("lambda", lambda t: t.replace("fun ", "λ ").replace(" =>", " ↦")),
             ("nested_forall", nested_forall),
             ("mirrored_comparison", mirrored)]
    if "open" in preamble and "Real" in preamble:
        edits.append(("opened_namespace", lambda t: replace_word(replace_word(replace_word(
            replace_word(t, "Real.sin", "sin"), "Real.cos", "cos"), "Real.log", "log"), "Real.sqrt", "sqrt")))
    return [e for e in edits if rng.random() < 0.5]


def change_meaning(binders: list[Binder], conclusion: str, rng: random.Random
                   ) -> tuple[list[Binder], str, str] | None:
    """One constant or one operator changed, in the conclusion when it has one, else in a hypothesis."""
    texts = [conclusion] + [b.type for b in binders]
    for target in range(len(texts)):
        text = texts[target]
        digits = [i for i, c in enumerate(text) if c in "0123456789" and (i == 0 or not is_name_char(text[i - 1]))
                  and (i + 1 == len(text) or text[i + 1] not in "0123456789")]
        swaps = [(op, new) for op, new in ((" + ", " - "), (" - ", " + "), (" * ", " + "), (" < ", " ≤ "),
                                           (" ≤ ", " < "), (" = ", " ≠ ")) if op in text]
        if not digits and not swaps:
            continue
        if digits and (not swaps or rng.random() < 0.5):
            i = rng.choice(digits)
            changed, edit = text[:i] + str((int(text[i]) + 1) % 10) + text[i + 1 :], "changed_constant"
        else:
            op, new = rng.choice(swaps)
            at = rng.choice([k for k in range(len(text)) if text.startswith(op, k)])
            changed, edit = text[:at] + new + text[at + len(op) :], "changed_operator"
        texts[target] = changed
        return ([Binder(b.opener, b.names, t) for b, t in zip(binders, texts[1:])], texts[0], edit)
    return None


def theorem_of(text: str) -> tuple[str, str, str] | None:
    """(name, the text before the theorem, its signature) of a file's one theorem."""
    command = next((c for c in read_commands(text) if c.kind in ("theorem", "lemma")), None)
    if command is None:
        return None
    return command.name, text[: command.start].strip(), command.signature


def sources() -> tuple[list[tuple[Path, Source]], list[tuple[dict, Source]]]:
    minif2f = []
    for path in sorted(MINIF2F.glob("*.lean")):
        found = theorem_of(path.read_text())
        if found:
            name, preamble, signature = found
            minif2f.append((path, Source(name, preamble, signature)))
    proofnet = []
    for line in PROOFNET.read_text().splitlines():
        record = json.loads(line)
        found = theorem_of(record["formal_statement"])
        if found:
            proofnet.append((record, Source(record["name"], record["header"].strip(), found[2])))
    return minif2f, proofnet


def mathlib_rows(count: int, rng: random.Random) -> list[Row]:
    """Real Mathlib theorems, each with the `open` lines in force where it stands."""
    theorems = []
    for path in sorted(MATHLIB.rglob("*.lean")):
        for command in read_commands(path.read_text()):
            if command.kind in ("theorem", "lemma") and command.balanced and command.signature:
                opens = "\n".join(c.text for c in command.context(frozenset({"open"})))
                theorems.append(f"{opens}\n{command.text}")
    return [Row(text, UNRELATED, None, ("mathlib",)) for text in rng.sample(theorems, min(count, len(theorems)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--variants", type=int, default=3, help="restatements per benchmark problem")
    parser.add_argument("--mathlib", type=int, default=1500, help="unrelated Mathlib theorems in the corpus")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    minif2f, proofnet = sources()
    rng.shuffle(minif2f)
    rng.shuffle(proofnet)
    bench_m, held_m = minif2f[: len(minif2f) // 2], minif2f[len(minif2f) // 2 :]
    bench_p, held_p = proofnet[: len(proofnet) // 2], proofnet[len(proofnet) // 2 :]
    with tempfile.TemporaryDirectory() as tmp:
        benchmark_dir = Path(tmp) / "minif2f-half"
        benchmark_dir.mkdir()
        for path, _ in bench_m:
            (benchmark_dir / path.name).write_text(path.read_text())
        proofnet_file = Path(tmp) / "proofnet-half.jsonl"
        proofnet_file.write_text("".join(json.dumps(record) + "\n" for record, _ in bench_p))
        rows: list[Row] = []
        for _, source in bench_m + bench_p:
            made = 0
            while made < args.variants:
                row = restate(source, rng, near_miss=False)
                if row is None:
                    break
                rows.append(row)
                made += 1
            near = restate(source, rng, near_miss=True)
            if near is not None:
                rows.append(near)
        rows += [Row(path.read_text(), UNRELATED, None, ("minif2f_held_out",)) for path, _ in held_m]
        rows += [Row(f"{record['header']}\n{record['formal_statement']}", UNRELATED, None, ("proofnet_held_out",))
                 for record, _ in held_p]
        rows += mathlib_rows(args.mathlib, rng)
        cfg = OmegaConf.to_container(compose_config("decontaminate", [
            "corpus=unused", "out=unused", f"benchmarks=[{benchmark_dir},{proofnet_file}]"]), resolve=True)
        judge = decontaminator(cfg, cfg["embedding"])
        started = time.perf_counter()
        for row in rows:
            read_statements(row.text, judge.settings, judge.index.opened)
        reading = time.perf_counter() - started
        started = time.perf_counter()
        verdicts = judge.judge([row.text for row in rows])
        seconds = time.perf_counter() - started
    print(f"keys and n-grams alone: {len(rows) / reading:.1f} rows/s; the rest of a row's time is its embedding")
    report(rows, verdicts, judge, seconds, [b.name + f" ({len(b.problems)} problems)" for b in judge.benchmarks])


def report(rows: list[Row], verdicts: list, judge, seconds: float, benchmarks: list[str]) -> None:
    print(f"benchmarks: {', '.join(benchmarks)}; corpus: {len(rows)} rows")
    found: dict[str, Counter] = {kind: Counter() for kind in (RESTATEMENT, NEAR_MISS, UNRELATED)}
    totals = Counter(row.kind for row in rows)
    missed_edits: Counter = Counter()
    wrong = 0
    for row, verdict in zip(rows, verdicts, strict=True):
        if verdict.contaminated:
            found[row.kind][verdict.kind] += 1
            if row.kind == RESTATEMENT and verdict.problem != row.problem:
                wrong += 1
        elif row.kind == RESTATEMENT:
            missed_edits.update(row.edits)
        if judge.index.ngram_flagged(verdict):
            found[row.kind]["ngram_flagged"] += 1
    for kind in (RESTATEMENT, NEAR_MISS, UNRELATED):
        by = ", ".join(f"{k} {found[kind][k]}" for k in DECISIVE_KINDS)
        flagged = sum(found[kind][k] for k in DECISIVE_KINDS)
        print(f"{kind}: {totals[kind]} rows, flagged {flagged} ({by}); ngram_flagged {found[kind]['ngram_flagged']}"
              f" (reported only)")
    print(f"restatements matched to another problem than their own: {wrong}")
    if missed_edits:
        print("edits of the missed restatements: " + ", ".join(f"{e} {c}" for e, c in missed_edits.most_common()))
    recall = sum(found[RESTATEMENT][k] for k in DECISIVE_KINDS) / totals[RESTATEMENT]
    false_positive_rate = sum(found[UNRELATED][k] for k in DECISIVE_KINDS) / totals[UNRELATED]
    near = sum(found[NEAR_MISS][k] for k in DECISIVE_KINDS) / max(totals[NEAR_MISS], 1)
    print(f"recall={recall:.4f} false_positive_rate={false_positive_rate:.4f} near_miss_flagged={near:.4f} "
          f"rows_per_s={len(rows) / seconds:.1f}")


if __name__ == "__main__":
    main()
