"""How well the naming checker tells Mathlib's own names from wrong ones, on real Mathlib source.

`python benchmarks/naming_bench.py [--mathlib-dir DIR] [--include PREFIX ...]` reads every theorem of the `.lean`
files under DIR (those whose path relative to DIR starts with one of the prefixes, when given) and judges each
statement twice: with its own written name in the namespace it is declared in (it should pass), and with the written
name of a theorem of another file (it should fail). The last line prints both shares and the theorem count.
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

from lean_pool.lean_source import THEOREM_KINDS, namespace_of, read_commands
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


def swapped_names(theorems: list[Theorem]) -> list[str]:
    """For each theorem, the written name of a theorem of another file, by a seeded shuffle (re-drawn when the
    file is the same)."""
    rng = random.Random(SEED)
    names = []
    for theorem in theorems:
        other = rng.choice(theorems)
        while other.path == theorem.path:
            other = rng.choice(theorems)
        names.append(other.name)
    return names


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


def judge(pair: tuple[Theorem, str]) -> tuple[NameCheck, NameCheck]:
    """The verdicts on a theorem's own name and on the swapped one (run in a worker process)."""
    theorem, swapped = pair
    rules = mathlib_rules()
    return (check_name(theorem.statement, theorem.name, rules, theorem.namespace),
            check_name(theorem.statement, swapped, rules, theorem.namespace))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mathlib-dir", type=Path, default=DEFAULT_MATHLIB)
    parser.add_argument("--include", action="append", default=[], help="path prefix relative to the Mathlib dir")
    args = parser.parse_args()
    if not args.mathlib_dir.is_dir():
        parser.error(f"no Mathlib checkout at {args.mathlib_dir} (pass --mathlib-dir)")
    theorems = read_theorems(args.mathlib_dir, args.include)
    pairs = list(zip(theorems, swapped_names(theorems)))
    with Pool(os.cpu_count()) as pool:
        verdicts = pool.map(judge, pairs, chunksize=CHUNK)
    real_misses = [(theorem, theorem.name, real) for (theorem, _), (real, _) in zip(pairs, verdicts) if not real.ok]
    swapped_passes = [(theorem, swapped, other) for (theorem, swapped), (_, other) in zip(pairs, verdicts) if other.ok]
    count = len(theorems)
    print(f"files={len({t.path for t in theorems})} theorems={count}")
    show_misses("real names rejected", real_misses)
    show_misses("swapped names accepted", swapped_passes)
    accepted = 1 - len(real_misses) / max(count, 1)
    flagged = 1 - len(swapped_passes) / max(count, 1)
    print(f"real_names_accepted={accepted:.3f} swapped_names_flagged={flagged:.3f} theorems={count}")


if __name__ == "__main__":
    main()
