"""How well the naming checker tells Mathlib's own names from wrong ones, on real Mathlib source.

`python benchmarks/naming_bench.py [--mathlib-dir DIR] [--include PREFIX ...]` reads every theorem of the `.lean`
files under DIR (those whose path relative to DIR starts with one of the prefixes, when given) and judges each
statement, in the namespace it is declared in, with its own written name (it should pass) and with hard negatives
(each should fail): the name of a theorem of another file (swapped), its own words in reverse order (reordered;
names whose reverse is themselves are left out), two property words of the convention (property words), and the
name of another theorem of the same file (same file; names whose words are the same set are left out). Beside the
checker, a plain-substring matcher (a name passes when each of its words is written in the statement) judges the
swapped names, so the gap shows. The last line prints the shares and the theorem count.
"""

from __future__ import annotations

import argparse
import os
import random
from collections import Counter
from dataclasses import dataclass
from functools import cache
from multiprocessing import Pool
from pathlib import Path

from omegaconf import OmegaConf

from lean_pool.lean_source import THEOREM_KINDS, first_theorem, namespace_of, read_commands
from operators.contribute.naming import NameCheck, NamingRules, check_name, naming_rules

REPO = Path(__file__).resolve().parents[1]
DEFAULT_MATHLIB = REPO.parent / "shared/fixtures/mathlib-sample"
RULES_FILE = REPO / "conf/naming/mathlib.yaml"
SEED = 0
EXAMPLES = 6
CHUNK = 200
VARIABLE = frozenset({"variable"})


@dataclass(frozen=True)
class Theorem:
    """One theorem of the sample: its file, namespace, written name, source, and the `variable` commands in force."""

    path: str
    namespace: str
    name: str
    text: str
    variables: str

    @property
    def statement(self) -> str:
        """What the checker reads: the variables in force, then the theorem."""
        return f"{self.variables}\n{self.text}"


def read_theorems(mathlib: Path, prefixes: list[str]) -> list[Theorem]:
    """Every theorem/lemma with a balanced signature in the `.lean` files under `mathlib` (filtered by prefix)."""
    theorems = []
    for path in sorted(mathlib.rglob("*.lean")):
        relative = path.relative_to(mathlib).as_posix()
        if prefixes and not any(relative.startswith(prefix) for prefix in prefixes):
            continue
        for command in read_commands(path.read_text(encoding="utf-8")):
            if command.kind in THEOREM_KINDS and command.balanced and command.written_name:
                variables = "\n".join(v.text for v in command.context(VARIABLE))
                theorems.append(Theorem(relative, namespace_of(command.scopes), command.written_name, command.text,
                                        variables))
    return theorems


@dataclass(frozen=True)
class Negatives:
    """The wrong names one theorem is judged with; None where its kind does not apply to it."""

    swapped: str
    reordered: str | None
    property_words: str
    same_file: str | None


def _words(name: str) -> list[str]:
    return name.split(".")[-1].split("_")


def reordered_name(name: str) -> str | None:
    """The name with the words of its last part in reverse order, or None when that is the name itself."""
    *space, last = name.split(".")
    reverse = ".".join([*space, "_".join(reversed(last.split("_")))])
    return None if reverse == name else reverse


def negatives(theorems: list[Theorem], property_words: list[str]) -> list[Negatives]:
    """For each theorem, by a seeded draw: a name from another file, its own words reversed, two distinct property
    words, and a name from its own file whose words differ from its own (None when the file has no such name)."""
    rng = random.Random(SEED)
    by_file: dict[str, list[str]] = {}
    for theorem in theorems:
        by_file.setdefault(theorem.path, []).append(theorem.name)
    drawn = []
    for theorem in theorems:
        other = rng.choice(theorems)
        while other.path == theorem.path:
            other = rng.choice(theorems)
        siblings = [n for n in by_file[theorem.path] if set(_words(n)) != set(_words(theorem.name))]
        drawn.append(Negatives(swapped=other.name, reordered=reordered_name(theorem.name),
                               property_words="_".join(rng.sample(property_words, 2)),
                               same_file=rng.choice(siblings) if siblings else None))
    return drawn


def substring_accepts(statement: str, name: str) -> bool:
    """The baseline: a name passes when one of its words (but `of`, of two letters or more) is written, in any case,
    in what the checker reads of the statement: the theorem's signature, without its own name, and the variables
    in force."""
    text = " ".join(first_theorem(statement)).lower()
    return any(word.lower() in text for word in _words(name) if len(word) >= 2 and word != "of")


def show_misses(title: str, misses: list[tuple[Theorem, str, NameCheck]]) -> None:
    print(f"{title}: {len(misses)}")
    reasons = Counter(reason.split("`")[0] + "`...`" + reason.split("`")[-1] for _, _, check in misses
                      for reason in check.reasons)
    for reason, count in reasons.most_common(EXAMPLES):
        print(f"  {count:6d}  {reason}")
    for theorem, name, check in random.Random(SEED).sample(misses, min(EXAMPLES, len(misses))):
        conclusion = " ".join(theorem.text.split())[:110]
        print(f"  - {name} [{theorem.namespace}] {theorem.path}\n      {conclusion}\n      {'; '.join(check.reasons)}")


@cache
def mathlib_rules() -> NamingRules:
    """The rules of conf/naming/mathlib.yaml, read once per process."""
    return naming_rules(OmegaConf.to_container(OmegaConf.load(RULES_FILE)))


@dataclass(frozen=True)
class Verdicts:
    """The checker's verdicts on one theorem's own name and its negatives (None where a negative does not apply),
    and the baseline's on the swapped name."""

    real: NameCheck
    baseline_real: bool
    swapped: NameCheck
    reordered: NameCheck | None
    property_words: NameCheck
    same_file: NameCheck | None
    baseline_swapped: bool


def judge(pair: tuple[Theorem, Negatives]) -> Verdicts:
    """The verdicts on a theorem's own name and on its negatives (run in a worker process)."""
    theorem, wrong = pair
    rules = mathlib_rules()

    def check(name: str | None) -> NameCheck | None:
        return None if name is None else check_name(theorem.statement, name, rules, theorem.namespace)

    return Verdicts(real=check_name(theorem.statement, theorem.name, rules, theorem.namespace),
                    baseline_real=substring_accepts(theorem.statement, theorem.name),
                    swapped=check_name(theorem.statement, wrong.swapped, rules, theorem.namespace),
                    reordered=check(wrong.reordered), property_words=check_name(theorem.statement,
                    wrong.property_words, rules, theorem.namespace), same_file=check(wrong.same_file),
                    baseline_swapped=substring_accepts(theorem.statement, wrong.swapped))


def flagged(misses: list[tuple[Theorem, str, NameCheck]], judged: int) -> float:
    """The share of `judged` wrong names the checker refused, given those it let pass."""
    return 1 - len(misses) / max(judged, 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mathlib-dir", type=Path, default=DEFAULT_MATHLIB)
    parser.add_argument("--include", action="append", default=[], help="path prefix relative to the Mathlib dir")
    args = parser.parse_args()
    if not args.mathlib_dir.is_dir():
        parser.error(f"no Mathlib checkout at {args.mathlib_dir} (pass --mathlib-dir)")
    theorems = read_theorems(args.mathlib_dir, args.include)
    if not theorems:
        parser.error(f"no theorem under {args.mathlib_dir} with --include {args.include or '(all)'}")
    rules = mathlib_rules()
    pairs = list(zip(theorems, negatives(theorems, sorted(rules.property_words - rules.leading_property_words))))
    with Pool(os.cpu_count()) as pool:
        verdicts = pool.map(judge, pairs, chunksize=CHUNK)
    count = len(theorems)
    print(f"files={len({t.path for t in theorems})} theorems={count}")
    real_misses = [(theorem, theorem.name, v.real) for (theorem, _), v in zip(pairs, verdicts) if not v.real.ok]
    show_misses("real names rejected", real_misses)
    shares = {}
    for kind in ("swapped", "reordered", "property_words", "same_file"):
        judged = [(theorem, getattr(wrong, kind), getattr(v, kind)) for (theorem, wrong), v in zip(pairs, verdicts)
                  if getattr(v, kind) is not None]
        passed = [(theorem, name, check) for theorem, name, check in judged if check.ok]
        show_misses(f"{kind} names accepted (of {len(judged)})", passed)
        shares[kind] = flagged(passed, len(judged))
    baseline = 1 - sum(v.baseline_swapped for v in verdicts) / max(count, 1)
    print(f"baseline (a name passes when one of its words is written in the statement): "
          f"real_names_accepted={sum(v.baseline_real for v in verdicts) / max(count, 1):.3f} "
          f"swapped_names_flagged={baseline:.3f}")
    accepted = 1 - len(real_misses) / max(count, 1)
    print(f"real_names_accepted={accepted:.3f} swapped_names_flagged={shares['swapped']:.3f} "
          f"reordered_flagged={shares['reordered']:.3f} property_words_flagged={shares['property_words']:.3f} "
          f"same_file_flagged={shares['same_file']:.3f} baseline_swapped_flagged={baseline:.3f} theorems={count}")


if __name__ == "__main__":
    main()
