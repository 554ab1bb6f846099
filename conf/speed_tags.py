"""Which settings change only a run's speed or placement, read off the tags they carry where they are defined.

A key (or a whole section) whose line in a conf/ file ends in a comment starting with `speed` is not deciding: a
restart may change it without being refused (`pipelines.runtime.run_identity`). Tagging the key where it is
defined keeps the rule beside the setting, so a new speed knob never makes every resume refuse for want of an entry
in a distant list. Keys under an open mapping whose entries the user names (`llm.serve.engines.<model>`) are tagged
for every entry.
"""

from __future__ import annotations

import functools
from importlib.resources import files
from pathlib import Path

import yaml

from conf import value_rules

TAG = "speed"
PACKAGE_HEADER = "# @package "
GLOBAL_PACKAGE = "_global_"


def file_package(path: Path, root: Path) -> str:
    """Where a conf file's keys land in a composed config: its `# @package` header, else its group's path (Hydra's
    default); the top level for a job's own file and for `_global_`."""
    first = path.read_text(encoding="utf-8").split("\n", 1)[0]
    if first.startswith(PACKAGE_HEADER):
        package = first[len(PACKAGE_HEADER):].strip()
        return "" if package == GLOBAL_PACKAGE else package
    return ".".join(path.relative_to(root).parent.parts)


def is_tagged(line: str, column: int) -> bool:
    """Whether `line` carries the speed tag in a comment after `column` (the end of its key or value)."""
    comment = line[column:].strip()
    return comment.startswith("#") and comment.lstrip("#").strip().split(":")[0].split()[:1] == [TAG]


def tagged_paths(text: str) -> list[str]:
    """The dotted paths of the keys tagged in one YAML file, relative to its package; a tagged section stands for
    all it holds."""
    lines = text.splitlines()
    found: list[str] = []

    def walk(node: yaml.Node, prefix: str) -> None:
        for key, value in node.value:
            path = f"{prefix}{key.value}"
            line = key.start_mark.line
            end = value.end_mark.column if value.end_mark.line == line else key.end_mark.column + 1
            if is_tagged(lines[line], end):
                found.append(path)
            elif isinstance(value, yaml.MappingNode):
                walk(value, f"{path}.")

    root = yaml.compose(text)
    if isinstance(root, yaml.MappingNode):
        walk(root, "")
    return found


def named_entries(path: str) -> str:
    """`path` with the entry name under each open mapping of named entries (a pattern without `*` in
    conf/value_rules.yaml `open_mappings`) replaced by `*`, so a tag holds for every entry a user adds."""
    segments = path.split(".")
    for mapping in (pattern for pattern in value_rules()["open_mappings"] if "*" not in pattern):
        depth = mapping.count(".") + 1
        if len(segments) > depth and ".".join(segments[:depth]) == mapping:
            segments[depth] = "*"
    return ".".join(segments)


def speed_keys_under(root: Path) -> tuple[str, ...]:
    """Every speed-tagged key of the conf files under `root`, as dotted patterns of a composed config."""
    keys = set()
    for path in sorted(root.rglob("*.yaml")):
        package = file_package(path, root)
        for tagged in tagged_paths(path.read_text(encoding="utf-8")):
            keys.add(named_entries(f"{package}.{tagged}" if package else tagged))
    return tuple(sorted(keys))


@functools.cache
def speed_keys() -> tuple[str, ...]:
    """The speed-tagged keys of the shipped config."""
    return speed_keys_under(Path(str(files("conf"))))
