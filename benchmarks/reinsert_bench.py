"""How close contribute puts a lemma to where Mathlib's authors put it, and how close its name comes to theirs.

`python benchmarks/reinsert_bench.py --mathlib-dir DIR [--include PREFIX]... --lemmas N` takes N theorems (a fixed
seed) of the `.lean` files under DIR (those whose path relative to DIR starts with one of the prefixes, when given)
out of their files, proof and all. Each comes back as a mined lemma does: its statement at the root with no name, in
a statement file carrying the file's context in force there and the prover's environment, and its proof beside it.
Contribute's own steps place it (`place_lemmas`), name it (`suggested_name`) and make its patch (`unified_diff`),
which must pass `git apply --check` and the project's check that a patch only adds what it offers. The result is
compared with Mathlib's: the namespace, the distance in declarations from the original spot, the full name, and the
namespaces the patch opens. The last line prints the shares.
"""

from __future__ import annotations

import argparse
import random
import subprocess
import tempfile
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from omegaconf import OmegaConf

from lean_pool.lean_source import (
    DECLARATION_KINDS,
    THEOREM_KINDS,
    Command,
    body_start,
    opened_namespaces,
    read_commands,
)
from operators.contribute.naming import NamingRules, naming_rules, suggested_name
from operators.contribute.patches import changed_declarations
from operators.contribute.placement import Offer, place_lemmas, unified_diff

REPO = Path(__file__).resolve().parents[1]
DEFAULT_MATHLIB = REPO.parent / "shared/fixtures/mathlib-sample"
RULES_FILE = REPO / "conf/naming/mathlib.yaml"
CONTRIBUTE_FILE = REPO / "conf/contribute.yaml"
MINE_FILE = REPO / "conf/mine.yaml"
SEED = 0
# The name a mined statement carries before naming: it says nothing of the lemma.
PLACEHOLDER = "mined_lemma"
# How far (in declarations of the file) from Mathlib's own spot still counts as beside it.
NEAR = 3
EXAMPLES = 6
CONTEXT_KINDS = frozenset({"open", "variable", "universe"})


@dataclass(frozen=True)
class Taken:
    """A theorem taken out of its file: the file's path and text without it, the theorem as Mathlib has it, and how
    many declarations of the file stood before it."""

    path: str
    stripped: str
    theorem: Command
    position: int

    @property
    def namespace(self) -> str:
        """The namespace Mathlib declares the theorem in (a dotted name's own included)."""
        return self.theorem.name.rsplit(".", 1)[0] if "." in self.theorem.name else ""


@dataclass(frozen=True)
class Outcome:
    """One lemma offered back: where it went and how it compares with Mathlib's."""

    taken: Taken
    namespace: str
    full_name: str
    distance: int
    applied: bool
    opens_added: int


def taken_out(path: str, text: str, theorem: Command) -> Taken:
    """`text` without `theorem` (and the blank line after it), so that the file reads as if it was never written."""
    end = theorem.end
    while text[end : end + 1] == "\n" and end - theorem.end < 2:
        end += 1
    stripped = text[: theorem.start] + text[end:]
    before = [c for c in read_commands(text) if c.kind in DECLARATION_KINDS and c.name and c.start < theorem.start]
    return Taken(path, stripped, theorem, len(before))


def sampled_theorems(mathlib: Path, prefixes: list[str], count: int) -> list[Taken]:
    """`count` theorems of the files under `mathlib` (filtered by prefix), drawn with a fixed seed: each a theorem
    or lemma with a balanced signature, a proof and no `open ... in` before it."""
    found: list[tuple[str, str, Command]] = []
    for file in sorted(mathlib.rglob("*.lean")):
        relative = file.relative_to(mathlib).as_posix()
        if prefixes and not any(relative.startswith(prefix) for prefix in prefixes):
            continue
        text = file.read_text(encoding="utf-8")
        found += [(relative, text, c) for c in read_commands(text)
                  if c.kind in THEOREM_KINDS and c.balanced and c.written_name and not c.prefixes
                  and body_start(c) < c.end - c.start]
    chosen = random.Random(SEED).sample(found, min(count, len(found)))
    return [taken_out(path, text, theorem) for path, text, theorem in chosen]


def offered(taken: Taken, environment: str, name: str) -> Offer:
    """The theorem as a mined lemma: at the root under `name`, after the context in force at it in its file and the
    prover's environment; proved by its own proof."""
    theorem = taken.theorem
    context = "\n".join(command.text for command in theorem.context(CONTEXT_KINDS))
    head = f"import Mathlib\n{environment}\n{context}\n\ntheorem {name} {theorem.signature}"
    return Offer(theorem.name, f"{head} := by\n  sorry\n", f"{head} {theorem.text[body_start(theorem):]}\n", name)


def applies(path: str, old: str, patch: str) -> bool:
    """Whether `git apply --check` takes `patch` against a file `path` holding `old`."""
    with tempfile.TemporaryDirectory() as directory:
        target = Path(directory) / path
        target.parent.mkdir(parents=True)
        target.write_text(old, encoding="utf-8")
        (Path(directory) / "change.patch").write_text(patch, encoding="utf-8")
        checked = subprocess.run(["git", "apply", "--check", "change.patch"], cwd=directory, capture_output=True)
        return checked.returncode == 0


@cache
def settings() -> tuple[NamingRules, tuple[str, ...], str]:
    """The naming rules, the context contribute drops, and the prover's `open` line, as the project's config
    gives them."""
    rules = naming_rules(OmegaConf.to_container(OmegaConf.load(RULES_FILE)))
    dropped = tuple(OmegaConf.load(CONTRIBUTE_FILE).contribute.dropped_context)
    environment = "\n".join(line for line in OmegaConf.load(MINE_FILE).prove.env_lines if line.startswith("open "))
    return rules, dropped, environment


def reinserted(taken: Taken) -> Outcome:
    """The theorem offered back through placement, naming and the patch, as contribute does it."""
    rules, dropped, environment = settings()
    mined = offered(taken, environment, PLACEHOLDER)
    located = place_lemmas(taken.stripped, [mined], dropped).placements[0]
    relative = suggested_name(mined.statement, rules, located.namespace)
    name = f"{located.namespace}.{relative}" if located.namespace else relative
    result = place_lemmas(taken.stripped, [offered(taken, environment, name)], dropped)
    placement = result.placements[0]
    patch = unified_diff(taken.path, taken.stripped, result.text)
    clean = not changed_declarations(taken.stripped, result.text, [placement.full_name])
    declarations = [c for c in read_commands(result.text) if c.kind in DECLARATION_KINDS and c.name]
    position = next(i for i, c in enumerate(declarations) if c.name == placement.full_name)
    opens = sum(len(opened_namespaces(c.text)) for c in read_commands(placement.text) if c.kind == "open")
    return Outcome(taken, placement.namespace, placement.full_name, abs(position - taken.position),
                   clean and applies(taken.path, taken.stripped, patch), opens)


def show(title: str, outcomes: list[Outcome]) -> None:
    print(f"{title}: {len(outcomes)}")
    for outcome in random.Random(SEED).sample(outcomes, min(EXAMPLES, len(outcomes))):
        theorem = outcome.taken.theorem
        print(f"  - {theorem.name} -> {outcome.full_name} (distance {outcome.distance}) {outcome.taken.path}\n"
              f"      {' '.join(theorem.signature.split())[:110]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mathlib-dir", type=Path, default=DEFAULT_MATHLIB)
    parser.add_argument("--include", action="append", default=[], help="path prefix relative to the Mathlib dir")
    parser.add_argument("--lemmas", type=int, default=200, help="how many theorems to take out and offer back")
    args = parser.parse_args()
    if not args.mathlib_dir.is_dir():
        parser.error(f"no Mathlib checkout at {args.mathlib_dir} (pass --mathlib-dir)")
    if args.lemmas < 1:
        parser.error(f"--lemmas {args.lemmas} must be at least 1")
    taken_out = sampled_theorems(args.mathlib_dir, args.include, args.lemmas)
    if not taken_out:
        parser.error(f"no theorem to take out under {args.mathlib_dir} with --include {args.include or '(all)'}")
    outcomes = [reinserted(taken) for taken in taken_out]
    count = max(len(outcomes), 1)
    print(f"files={len({o.taken.path for o in outcomes})} lemmas={len(outcomes)}")
    show("placed outside Mathlib's namespace", [o for o in outcomes if o.namespace != o.taken.namespace])
    show(f"placed more than {NEAR} declarations away", [o for o in outcomes if o.distance > NEAR])
    show("patches not applied", [o for o in outcomes if not o.applied])
    show("opens added", [o for o in outcomes if o.opens_added])
    in_namespace = sum(o.namespace == o.taken.namespace for o in outcomes) / count
    near = sum(o.distance <= NEAR for o in outcomes) / count
    exact = sum(o.full_name == o.taken.theorem.name for o in outcomes) / count
    applied = sum(o.applied for o in outcomes) / count
    opens = sum(o.opens_added for o in outcomes) / count
    print(f"placed_in_namespace={in_namespace:.3f} within_3_declarations={near:.3f} names_exact={exact:.3f} "
          f"patches_applied={applied:.3f} opens_added_per_lemma={opens:.3f} lemmas={len(outcomes)}")


if __name__ == "__main__":
    main()
