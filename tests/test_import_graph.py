"""The house rule, read from the source with `ast`: three rooms with arrows one way, `pipelines` (the entry points)
→ `operators` (the steps) → `lean_pool` (everything touching Lean), `conf/` their config, and `harness/`, the
benchmarks and the tests on top.

- No module imports an entry point (`python -m` modules and the `folklore` dispatcher); the dispatcher imports the
  job it runs with `importlib`, which is no import statement. A benchmark, on top like the tests, may run a job in
  its own process through the entry point's `main`, and use nothing else of it.
- `operators` imports nothing from `pipelines`.
- `lean_pool` imports nothing from `operators` or `pipelines`, and of `conf` only the package itself: its config
  loading (`compose_config`, `ConfigError`, `package_dir`), which every room reads its config through.
- `conf` is config and its loading: it imports none of the rooms, nor anything on top of them.
- Nothing below the top imports `harness`, the benchmarks or the tests; `harness` imports neither of the other two.
- A benchmark imports nothing from the tests and does not touch `sys.path` (the harness is a package of its own).
- No import cycle among the modules of the three rooms.

Every import statement counts, those inside functions too: an import put off to run time is still an arrow.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ROOMS = ("pipelines", "operators", "lean_pool")
PACKAGES = (*ROOMS, "conf", "harness")
BENCHMARKS = "benchmarks"
TESTS = "tests"
ENTRY_POINTS = frozenset({"pipelines.mine", "pipelines.plan", "pipelines.report", "pipelines.export",
                          "pipelines.autoformalize", "pipelines.evaluate", "pipelines.decontaminate",
                          "pipelines.index", "pipelines.command", "lean_pool.check"})


@dataclass(frozen=True)
class Import:
    """One module an import statement of `source` names, at `line` of its file, and what `source` uses of it: the
    names imported from it, or the attributes read of it when the module itself is imported (`*`: the module as a
    whole, or not known)."""

    source: str
    target: str
    line: int
    path: Path
    uses: frozenset[str]

    def __str__(self) -> str:
        used = ", ".join(sorted(self.uses))
        return f"{self.path.relative_to(REPO)}:{self.line}: {self.source} imports {self.target} (uses {used})"


def module_name(path: Path) -> str:
    """`pipelines/runtime/job.py` → `pipelines.runtime.job`; a package's `__init__.py` is the package; a benchmark is
    a top-level module, as its siblings import it (`from scale_bench import ...`)."""
    relative = path.relative_to(REPO).with_suffix("")
    parts = list(relative.parts)
    if parts[0] == BENCHMARKS:
        parts = parts[1:]
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def python_files(folder: str) -> list[Path]:
    return sorted(path for path in (REPO / folder).rglob("*.py") if "__pycache__" not in path.parts)


FILES = {module_name(path): path for folder in (*PACKAGES, BENCHMARKS) for path in python_files(folder)}
BENCHMARK_MODULES = frozenset(module_name(path) for path in python_files(BENCHMARKS))
TEST_MODULES = frozenset(path.stem for path in python_files(TESTS))


WHOLE = "*"


def attributes_read(tree: ast.Module, name: str) -> frozenset[str]:
    """The attributes read of the module bound to `name` (`name.main`), with `*` when `name` is used otherwise."""
    read = {node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name) and node.value.id == name}
    bare = sum(isinstance(node, ast.Name) and node.id == name for node in ast.walk(tree))
    attribute_reads = sum(isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                          and node.value.id == name for node in ast.walk(tree))
    return frozenset(read | ({WHOLE} if bare > attribute_reads else set()))


def imported(source: str, node: ast.Import | ast.ImportFrom, tree: ast.Module) -> Iterator[tuple[str, frozenset[str]]]:
    """The modules an import statement of `source` names, and what `source` uses of each: `from pkg import mod`
    names `pkg.mod` when that is a module here, else `pkg`; a relative import is resolved against `source`'s
    package."""
    if isinstance(node, ast.Import):
        yield from ((alias.name, frozenset({WHOLE})) for alias in node.names)
        return
    base = node.module or ""
    if node.level:
        package = source.split(".") if FILES[source].name == "__init__.py" else source.split(".")[:-1]
        base = ".".join([*package[:len(package) - node.level + 1], *([base] if base else [])])
    for alias in node.names:
        module = f"{base}.{alias.name}"
        if module in FILES:
            yield module, attributes_read(tree, alias.asname or alias.name)
        else:
            yield base, frozenset({alias.name})


def imports_of(source: str) -> list[Import]:
    path = FILES[source]
    tree = ast.parse(path.read_text(), str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found += [Import(source, target, node.lineno, path, uses) for target, uses in imported(source, node, tree)]
    return found


IMPORTS = [found for source in FILES for found in imports_of(source)]


def within(module: str, *packages: str) -> bool:
    return any(module == package or module.startswith(f"{package}.") for package in packages)


def broken(rule: str, offenders: list[Import]) -> str:
    return f"{rule}:\n" + "\n".join(map(str, offenders))


def test_the_files_read_are_the_project_s() -> None:
    assert {"pipelines.mine", "operators.dedup", "lean_pool.pool", "conf", "harness.ray_nodes", "scale_bench"} \
        <= set(FILES)


def test_no_module_imports_an_entry_point() -> None:
    offenders = [found for found in IMPORTS if found.target in ENTRY_POINTS
                 and not (found.source in BENCHMARK_MODULES and found.uses == {"main"})]
    assert not offenders, broken("an entry point is imported", offenders)


def test_operators_import_nothing_from_pipelines() -> None:
    offenders = [found for found in IMPORTS if within(found.source, "operators") and within(found.target, "pipelines")]
    assert not offenders, broken("operators import pipelines", offenders)


def test_lean_pool_imports_no_other_room_and_of_conf_only_its_config_loading() -> None:
    offenders = [found for found in IMPORTS if within(found.source, "lean_pool")
                 and (within(found.target, "operators", "pipelines") or found.target.startswith("conf."))]
    assert not offenders, broken("lean_pool imports a room above it, or conf beyond its config loading", offenders)


def test_conf_imports_no_room_and_nothing_on_top() -> None:
    offenders = [found for found in IMPORTS if within(found.source, "conf")
                 and within(found.target, *ROOMS, "harness", TESTS, *BENCHMARK_MODULES)]
    assert not offenders, broken("conf imports code", offenders)


def reaches_up(found: Import) -> bool:
    """Whether `found` goes from below the top to what sits on it: a room or conf to the harness, the benchmarks or
    the tests; the harness to the benchmarks or the tests."""
    on_top = (TESTS, *TEST_MODULES, *BENCHMARK_MODULES)
    if within(found.source, *ROOMS, "conf"):
        return within(found.target, "harness", *on_top)
    return within(found.source, "harness") and within(found.target, *on_top)


def test_nothing_below_the_top_imports_the_harness_the_benchmarks_or_the_tests() -> None:
    offenders = [found for found in IMPORTS if reaches_up(found)]
    assert not offenders, broken("a room, conf or the harness imports what sits on top", offenders)


def test_benchmarks_import_nothing_from_the_tests_nor_touch_sys_path() -> None:
    offenders = [found for found in IMPORTS if found.source in BENCHMARK_MODULES
                 and within(found.target, TESTS, *TEST_MODULES)]
    assert not offenders, broken("a benchmark imports a test module", offenders)
    touching = [f"{FILES[source].relative_to(REPO)}:{node.lineno}" for source in sorted(BENCHMARK_MODULES)
                for node in ast.walk(ast.parse(FILES[source].read_text()))
                if isinstance(node, ast.Attribute) and node.attr == "path"
                and isinstance(node.value, ast.Name) and node.value.id == "sys"]
    assert not touching, f"a benchmark touches sys.path: {touching}"


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module, or of one importing itself (Tarjan's)."""
    index: dict[str, int] = {}
    lowest: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = lowest[module] = len(index)
        stack.append(module)
        for target in sorted(edges[module]):
            if target not in index:
                visit(target)
                lowest[module] = min(lowest[module], lowest[target])
            elif target in stack:
                lowest[module] = min(lowest[module], index[target])
        if lowest[module] == index[module]:
            component = []
            while not component or component[-1] != module:
                component.append(stack.pop())
            if len(component) > 1 or module in edges[module]:
                found.append(sorted(component))

    for module in sorted(edges):
        if module not in index:
            visit(module)
    return found


def test_no_import_cycle_among_the_rooms_modules() -> None:
    rooms = [module for module in FILES if within(module, *ROOMS)]
    edges = {module: set() for module in rooms}
    for found in IMPORTS:
        if found.source in edges and found.target in edges:
            edges[found.source].add(found.target)
    assert not cycles(edges), f"import cycles: {cycles(edges)}"
