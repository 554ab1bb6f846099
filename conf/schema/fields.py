"""How a setting is declared: its type is the field's annotation, and its help, range, and whether it decides a run's
rows sit on the same field (`setting(...)`), so nothing about a key is said in a second place.

A section is a frozen dataclass (`@section`); its fields are its keys. The defaults stay in the YAML files of conf/,
where the paper's values and their sources are written; the schema says what a value may be. An annotation is one
of `bool`, `int`, `float` (an amount: an integer will do), `str`, `Literal[...]` (the values a key may take),
`list[T]`, `dict[str, T]` (a mapping whose keys are the user's to choose), a section, `Any`, or one of these `| None`.
"""

from __future__ import annotations

import dataclasses
import functools
import operator
import types
import typing
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Literal, TypeVar

# The key of a field's metadata that holds its `Setting`.
SETTING = "setting"
# The attribute of a section class that holds its `SectionRule`.
SECTION_RULE = "__section_rule__"
# A path segment standing for every key of a mapping whose keys the user chooses (`llm.endpoints.*.concurrency`).
ANY_KEY = "*"
_Class = TypeVar("_Class", bound=type)


class Unset:
    """The `introduced` of a key that every recorded run has."""


UNSET = Unset()


@dataclasses.dataclass(frozen=True)
class Setting:
    """What a field says besides its type: one line of help, the range of a number (`unranged`: why a number has
    none), whether it changes only speed or placement, and the value runs recorded before the key existed were made
    under (a resume of such a run reads it as recorded)."""

    help: str
    at_least: float | None = None
    at_most: float | None = None
    speed: bool = False
    unranged: str | None = None
    introduced: Any = UNSET


@dataclasses.dataclass(frozen=True)
class SectionRule:
    """What a section says as a whole: every key in it changes only speed (`speed`), and it takes keys besides its
    fields (`open`: passed through to what reads it, which checks them)."""

    speed: bool = False
    open: bool = False


def setting(help: str, *, at_least: float | None = None, at_most: float | None = None, speed: bool = False,
            unranged: str | None = None, introduced: Any = UNSET) -> Any:
    """A field of a section: its help line and rules (`Setting`)."""
    return dataclasses.field(metadata={SETTING: Setting(help, at_least, at_most, speed, unranged, introduced)})


def section(cls: _Class | None = None, *, speed: bool = False, open: bool = False) -> Any:
    """A section of the config: `cls` as a frozen dataclass, with its `SectionRule`."""
    def wrap(target: _Class) -> _Class:
        dataclasses.dataclass(frozen=True, kw_only=True)(target)
        setattr(target, SECTION_RULE, SectionRule(speed, open))
        return target
    return wrap if cls is None else wrap(cls)


def is_section(annotation: Any) -> bool:
    """Whether `annotation` is a section class."""
    return isinstance(annotation, type) and hasattr(annotation, SECTION_RULE)


def rule(cls: type) -> SectionRule:
    """The `SectionRule` of a section class."""
    found: SectionRule = getattr(cls, SECTION_RULE)
    return found


@functools.cache
def fields(cls: type) -> dict[str, tuple[Any, Setting]]:
    """A section's keys: each one's annotation (resolved) and `Setting`."""
    hints = typing.get_type_hints(cls)
    return {field.name: (hints[field.name], field.metadata[SETTING]) for field in dataclasses.fields(cls)}


def optional(annotation: Any) -> tuple[Any, bool]:
    """`annotation` without its `| None`, and whether it had one."""
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        arguments = [argument for argument in typing.get_args(annotation) if argument is not type(None)]
        nullable = len(arguments) < len(typing.get_args(annotation))
        return (arguments[0] if len(arguments) == 1 else functools.reduce(operator.or_, arguments)), nullable
    return annotation, False


def mapped(annotation: Any) -> Any | None:
    """The value annotation of a `dict[str, T]`, None for any other annotation."""
    if typing.get_origin(annotation) is dict:
        return typing.get_args(annotation)[1]
    return None


def listed(annotation: Any) -> Any | None:
    """The item annotation of a `list[T]`, None for any other annotation."""
    if typing.get_origin(annotation) is list:
        return typing.get_args(annotation)[0]
    return None


def choices_of(annotation: Any) -> tuple[Any, ...]:
    """The values a `Literal[...]` annotation allows (with or without `| None`), empty for any other."""
    bare, _ = optional(annotation)
    return typing.get_args(bare) if typing.get_origin(bare) is Literal else ()


@dataclasses.dataclass(frozen=True)
class Key:
    """One key of a schema: its dotted path (`*` for a key the user names), its annotation and `Setting`, and
    whether it changes only speed (its own flag or a section's around it)."""

    path: str
    annotation: Any
    setting: Setting
    speed: bool


def keys(cls: type, prefix: str = "", speed: bool = False) -> Iterator[Key]:
    """Every key of a section, depth first, inner sections and the entries of user-named mappings included."""
    speed = speed or rule(cls).speed
    for name, (annotation, declared) in fields(cls).items():
        path = f"{prefix}{name}"
        bare, _ = optional(annotation)
        fast = speed or declared.speed or (is_section(bare) and rule(bare).speed)
        yield Key(path, annotation, declared, fast)
        yield from _inner_keys(annotation, path, fast)


def _inner_keys(annotation: Any, path: str, speed: bool) -> Iterator[Key]:
    """The keys inside a value of `annotation` at `path`: a section's, or those of a mapping's entries."""
    bare, _ = optional(annotation)
    if is_section(bare):
        yield from keys(bare, f"{path}.", speed)
    elif (entry := mapped(bare)) is not None:
        yield from _inner_keys(entry, f"{path}.{ANY_KEY}", speed)


def key_at(cls: type, path: str | Sequence[str]) -> Key | None:
    """The key at `path`, dotted or as its segments (a user-named key may hold dots: `Mathlib.Logic`), through
    sections and user-named mappings (whose entries take the mapping's `Setting`); None when the schema has no such
    key; `Any` inside an open section or an `Any` value."""
    segments = path.split(".") if isinstance(path, str) else list(path)
    annotation: Any = cls
    declared = Setting("")
    speed = rule(cls).speed
    for segment in segments:
        bare, _ = optional(annotation)
        if is_section(bare):
            found = fields(bare).get(segment)
            if found is None:
                if not rule(bare).open:
                    return None
                annotation = Any
            else:
                annotation, declared = found
                inner, _ = optional(annotation)
                speed = speed or declared.speed or (is_section(inner) and rule(inner).speed)
        elif (entry := mapped(bare)) is not None:
            annotation = entry
        elif bare is not Any:
            return None
    return Key(".".join(segments), annotation, declared, speed)


def annotation_at(cls: type, path: str) -> Any | None:
    """The annotation of the key at dotted `path`, None when the schema has no such key."""
    found = key_at(cls, path)
    return None if found is None else found.annotation


def takes_any_key(cls: type, path: str) -> bool:
    """Whether the mapping at `path` takes keys of the user's choosing: a `dict[str, T]`, an open section, `Any`."""
    annotation = annotation_at(cls, path) if path else cls
    bare, _ = optional(annotation)
    return bare is Any or mapped(bare) is not None or (is_section(bare) and rule(bare).open)


def described(annotation: Any) -> str:
    """What a value of `annotation` is, in words (`an integer`, `one of a, b`, `a mapping of x, y`)."""
    bare, nullable = optional(annotation)
    words = _words(bare)
    return f"{words} or null" if nullable else words


def _words(bare: Any) -> str:
    """`described` of an annotation without `| None`."""
    simple: dict[Any, str] = {bool: "true or false", int: "an integer", float: "a number", str: "a string",
                              Any: "any value"}
    if bare in simple:
        return simple[bare]
    if typing.get_origin(bare) is Literal:
        return "one of " + ", ".join(map(str, typing.get_args(bare)))
    if listed(bare) is not None:
        return "a list"
    if is_section(bare):
        return "a mapping of " + ", ".join(fields(bare))
    return "a mapping"


def accepts(annotation: Any, value: Any) -> bool:
    """Whether a plain value (bool, number, string, None; mappings and lists are checked by their parts) is of
    `annotation`: an integer is a number, a string is no number, and true is neither."""
    bare, nullable = optional(annotation)
    if value is None:
        return nullable or bare is Any
    if bare is Any:
        return True
    if typing.get_origin(bare) is Literal:
        return value in typing.get_args(bare)
    if bare is bool or isinstance(value, bool):
        return bare is bool and isinstance(value, bool)
    if bare is int:
        return isinstance(value, int)
    if bare is float:
        return isinstance(value, (int, float))
    if bare is str:
        return isinstance(value, str)
    return False


def out_of_range(declared: Setting, value: Any) -> bool:
    """Whether a number lies outside the range `declared` gives it."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    return ((declared.at_least is not None and value < declared.at_least)
            or (declared.at_most is not None and value > declared.at_most))


def range_text(declared: Setting) -> str:
    """A declared range in words: `at least 1`, `from 0 to 1`."""
    if declared.at_most is None:
        return f"at least {declared.at_least:g}"
    return f"from {declared.at_least:g} to {declared.at_most:g}"


def walk_sections(cls: type, visit: Callable[[type], None]) -> None:
    """Call `visit` on `cls` and every section reachable from it, each once."""
    seen: set[type] = set()

    def go(annotation: Any) -> None:
        bare, _ = optional(annotation)
        if is_section(bare) and bare not in seen:
            seen.add(bare)
            visit(bare)
            for inner, _declared in fields(bare).values():
                go(inner)
        elif (entry := mapped(bare)) is not None:
            go(entry)
        elif (item := listed(bare)) is not None:
            go(item)

    go(cls)
