"""Hydra configuration, shipped as package data; defaults are the MathlibLemma paper's values.

`compose_config` is how every command line reads it: a mistake in an override becomes one `ConfigError` line, never
a traceback or a setting silently ignored. Hydra's own mistakes (a choice that does not exist, a missing `=`) keep
its hint; a key the config does not have, with or without `+`, names the nearest key there is (or the key an old
spelling is now called, conf/renamed.yaml). Everything else is the schema's (`conf.schema`): a value of another type
than its key declares, or not among its choices, says what the key expects; a number outside its key's range, given
or default, names the key and the range; a mandatory value left out (`???`) names the key and what it is for.
"""

from __future__ import annotations

import difflib
import functools
import re
from collections.abc import Iterator, Mapping, Sequence
from importlib.resources import files
from typing import Any

import yaml
from hydra import compose, initialize_config_module
from hydra.core.config_loader import ConfigLoader
from hydra.core.global_hydra import GlobalHydra
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import Override
from hydra.errors import HydraException
from omegaconf import Container, DictConfig, DictKeyType, ListConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from conf import schema
from conf.schema.fields import (
    accepts,
    choices_of,
    described,
    is_section,
    listed,
    mapped,
    optional,
    out_of_range,
    range_text,
    takes_any_key,
)

# Where Hydra's composition errors stop saying what is wrong and start listing its search path.
_SEARCH_PATH = "Config search path:"
# Old spellings of keys and what they are called now; no job composes this file.
RENAMED = "renamed.yaml"
# Hydra's own settings (`hydra.job.chdir=...`): Hydra checks overrides of them.
HYDRA_KEY = "hydra"
# A default longer than this is left out of an error line, which stays one readable line.
MAX_SHOWN_CHARS = 60
# Reference configs kept per process: a job, a test run or `plan` composes the same few again and again.
REFERENCES_KEPT = 16
# An item of a list or mapping value as the command line writes it (`[a, bü]`, `{name: bü}`): what comes before it
# (the bracket or comma, a mapping's key and the space after its colon), then the item itself, which holds no bracket,
# comma or quote (a colon without a space, as in a URI or `C:\`, is the item's).
_ITEM = re.compile(r"(?P<before>[\[{,]\s*(?:[^\[\]{},'\"\s:]+:\s+)?)"
                   r"(?P<item>[^\[\]{},'\"\s](?:[^\[\]{},'\"]*[^\[\]{},'\"\s])?)")
# A value that says nothing about a type: ??? (to be given), or a default's interpolation that needs such a value.
_ANY = object()


class ConfigError(ValueError):
    """The command line's config does not compose; the message is one line saying why and what would."""


def package_dir(relative: str) -> str:
    """Absolute path of a directory shipped inside an installed package (`${package_dir:pipelines/demo_seeds}`)."""
    package, _, rest = relative.partition("/")
    return str(files(package).joinpath(rest))


def composition_error_text(message: str) -> str:
    """Hydra's multi-line composition error as one line: the search path dropped, the listed choices joined."""
    parts: list[str] = []
    for line in message.split(_SEARCH_PATH, 1)[0].splitlines():
        if line.startswith("\t") and parts:
            parts[-1] += (" " if parts[-1].endswith(":") else ", ") + line.strip()
        elif line.strip():
            parts.append(line.strip().rstrip("."))
    return "; ".join(parts)


@functools.cache
def renamed() -> dict[str, str]:
    """conf/renamed.yaml: old spellings of keys -> what they are called now, read once."""
    loaded: dict[str, str] = yaml.safe_load(files("conf").joinpath(RENAMED).read_text(encoding="utf-8"))
    return loaded


def choices(key: str) -> tuple[Any, ...]:
    """The values `key` (a dotted path) may take as its schema declares them, so code that branches on them can read
    their names here; empty when any value of the key's type will do."""
    return schema.choices(key)


def shown_value(value: Any) -> str:
    """A config value as the command line spells it (interpolations as written): what error lines and `--help`
    show."""
    if isinstance(value, (DictConfig, ListConfig)):
        value = OmegaConf.to_container(value, resolve=False)
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{key}: {shown_value(item)}" for key, item in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(shown_value(item) for item in value) + "]"
    return str(value)


def _child(container: Container, key: DictKeyType, strict: bool, path: str) -> Any:
    """The value under `key`, `_ANY` for ???. An interpolation that cannot be resolved is `_ANY` too (a default may
    need a value the command line gives), or with `strict` (a value the command line gave) a `ConfigError`."""
    if OmegaConf.is_missing(container, key):
        return _ANY
    try:
        return container[key]
    except OmegaConfBaseException as error:
        if not strict:
            return _ANY
        raise ConfigError(f"{path}: {str(error).splitlines()[0]}") from None


def _key_of(container: Any, segment: str) -> str | int | None:
    """`segment` as a key of `container` (an index for a list), None when it holds no such key."""
    # keys(), not `in`: a key holding ??? is a key, and `in` leaves it out.
    if isinstance(container, DictConfig) and segment in container.keys():  # noqa: SIM118
        return segment
    if isinstance(container, ListConfig) and segment.isdigit() and int(segment) < len(container):
        return int(segment)
    return None


def _walk(cfg: DictConfig, path: str, strict: bool = False) -> tuple[int, Any]:
    """How many of `path`'s dotted segments are keys in `cfg`, and the value the last of them holds (`strict`: an
    interpolation on the way that cannot be resolved is a `ConfigError`)."""
    node: Any = cfg
    segments = path.split(".")
    for depth, segment in enumerate(segments):
        key = _key_of(node, segment)
        if key is None:
            return depth, node
        node = _child(node, key, strict, path)
    return len(segments), node


def _paths(node: Any, prefix: str = "") -> Iterator[str]:
    """Every dotted key under a mapping, inner mappings included (list items are not keys)."""
    if not isinstance(node, DictConfig):
        return
    for key in node:
        path = f"{prefix}{key!s}"
        yield path
        yield from _paths(_child(node, key, False, path), f"{path}.")


def renamed_key(path: str) -> str | None:
    """The key `path` is called now, when it is an old spelling (conf/renamed.yaml), else None."""
    for old, new in renamed().items():
        if path == old or path.startswith(f"{old}."):
            return new + path[len(old):]
    return None


def _unknown_key(path: str, reference: DictConfig, groups: Sequence[str]) -> ConfigError:
    """`path` is no key of the config: the error names the key an old spelling was renamed to, else the nearest key
    or group there is, else the keys beside it."""
    renamed = renamed_key(path)
    if renamed is not None:
        return ConfigError(f"{path} is now called {renamed}; write {renamed}=...")
    nearest = difflib.get_close_matches(path, [*_paths(reference), *groups], n=1)
    if nearest:
        return ConfigError(f"{path}: no such key; did you mean {nearest[0]}?")
    depth, parent = _walk(reference, path)
    if not isinstance(parent, DictConfig):
        return ConfigError(f"{path}: no such key")
    where = ".".join(path.split(".")[:depth]) or "the top level"
    return ConfigError(f"{path}: no such key; {where} has {', '.join(map(str, parent))}")


def _quoted(text: str) -> str:
    """`text` in Hydra's single quotes; a backslash before the closing quote is doubled, as Hydra asks."""
    trailing = len(text) - len(text.rstrip("\\"))
    return "'" + text + "\\" * trailing + "'"


def quoted_for_hydra(override: str) -> str:
    """`override` with a value holding characters other than ASCII quoted (`run_dir=rün` -> `run_dir='rün'`, in a
    list or mapping each such item: `benchmarks=[bü, x]` -> `benchmarks=['bü', x]`): Hydra's grammar reads only ASCII
    unquoted, and a user types a path or a name as it is. An override that quotes already is left as given."""
    key, equals, value = override.partition("=")
    if not equals or value.isascii() or not key.isascii() or "'" in value or '"' in value:
        return override
    if not value.startswith(("[", "{")):
        return f"{key}={_quoted(value)}"
    return f"{key}=" + _ITEM.sub(lambda m: m["before"] + (m["item"] if m["item"].isascii() else _quoted(m["item"])),
                                 value)


def _unquoted_hint(given: Sequence[str]) -> str:
    """What to add to Hydra's error when a value with characters other than ASCII does not parse even as
    `quoted_for_hydra` quotes it (it quotes some of its items itself): quote it by hand; empty otherwise."""
    parser = OverridesParser.create()
    for override in given:
        key, _, value = override.partition("=")
        if key.isascii() and not value.isascii():
            try:
                parser.parse_override(quoted_for_hydra(override))
            except HydraException:
                quote = '"' if "'" in value else "'"
                quoted = "each item with such characters, e.g. ['bü']" if value.startswith(("[", "{")) else \
                    f"it: {key}={quote}{value}{quote}"
                return f"; Hydra reads characters other than ASCII only in quotes: quote {quoted}"
    return ""


def _check_keys(override: Override, reference: DictConfig, groups: Sequence[str], job: type) -> None:
    """A `ConfigError` when `override` names a key the config does not have (with or without `+`, or inside the
    mapping it gives) outside a mapping whose keys the user chooses, or deletes (`~key`) a key that is not such a
    mapping's: the job reads it."""
    path = override.key_or_group
    segments = path.split(".")
    depth, default = _walk(reference, path)
    if depth < len(segments):
        if not takes_any_key(job, ".".join(segments[:depth])):
            raise _unknown_key(path, reference, groups)
    elif override.is_delete():
        if not takes_any_key(job, ".".join(segments[:-1])):
            raise ConfigError(f"~{path}: the job reads {path}; give it another value instead of deleting it")
    elif isinstance(value := override.value(), Mapping):
        _check_mapping_keys(path, value, default, reference, groups, job)


def _check_mapping_keys(path: str, given: Mapping[str, Any], default: Any, reference: DictConfig,
                        groups: Sequence[str], job: type) -> None:
    """A `ConfigError` when the mapping given for `path` holds a key its default does not have, at any depth, outside
    a mapping whose keys the user chooses."""
    if not isinstance(default, DictConfig):
        return
    for key, item in given.items():
        inner = f"{path}.{key}"
        if _key_of(default, str(key)) is not None:
            if isinstance(item, Mapping):
                _check_mapping_keys(inner, item, _child(default, key, False, inner), reference, groups, job)
        elif not takes_any_key(job, path):
            raise _unknown_key(inner, reference, groups)


def _expected(annotation: Any, default: Any) -> str:
    """What a key of `annotation` expects, in words, with its default (`default`) when that is short."""
    if isinstance(default, DictConfig):
        return f"a mapping of {', '.join(map(str, default))}"
    words = described(annotation)
    if choices_of(annotation) or default is _ANY:
        return words
    shown = shown_value(default)
    return words if len(shown) > MAX_SHOWN_CHARS or "\n" in shown else f"{words} (default {shown})"


def _wrong(path: str, value: Any, annotation: Any, reference: DictConfig) -> ConfigError:
    """The error for `value`, which is not of the type `annotation` that its key at `path` declares."""
    known, default = _walk(reference, path)
    if known < len(path.split(".")):
        default = _ANY
    bare, _ = optional(annotation)
    quotable = bare is str and isinstance(value, (bool, int, float))
    hint = f"; quote it to give text: {path}='{shown_value(value)}'" if quotable else ""
    return ConfigError(f"{path}={shown_value(value)}: expects {_expected(annotation, default)}{hint}")


def _check_value(job: str, segments: Sequence[str], value: Any, reference: DictConfig) -> None:
    """A `ConfigError` when `value` at the key `segments` name is not of the type its key declares, not among its
    choices, or a number outside its range; a mapping is checked key by key."""
    path = ".".join(segments)
    key = schema.key_at(job, segments)
    if key is None:
        raise ConfigError(f"{path}: no such key in the {job} schema (conf/schema)")
    if value is _ANY:
        return
    bare, nullable = optional(key.annotation)
    if bare is Any:
        return
    if isinstance(value, DictConfig):
        if not (is_section(bare) or mapped(bare) is not None):
            raise _wrong(path, value, key.annotation, reference)
        _check_node(job, value, segments, reference)
    elif isinstance(value, ListConfig):
        if listed(bare) is None:
            raise _wrong(path, value, key.annotation, reference)
    elif is_section(bare) or mapped(bare) is not None or listed(bare) is not None:
        if not (value is None and nullable):
            raise _wrong(path, value, key.annotation, reference)
    elif not accepts(key.annotation, value):
        raise _wrong(path, value, key.annotation, reference)
    elif out_of_range(key.setting, value):
        raise ConfigError(f"{path}={shown_value(value)}: out of range, expects {range_text(key.setting)}")


def _check_node(job: str, node: DictConfig, segments: Sequence[str], reference: DictConfig) -> None:
    """`_check_value` for every key of a composed mapping (at the key `segments` name): the command line's values and
    the defaults alike, so a count of 0 or a negative budget fails here and not deep in a run."""
    for key in node.keys():
        inner = [*segments, str(key)]
        _check_value(job, inner, _child(node, key, False, ".".join(inner)), reference)


def _mandatory(job: str, node: DictConfig, unused: Sequence[str], prefix: str = "") -> None:
    """A `ConfigError` naming the first key left at ??? that the job reads (not under `resume.unused`)."""
    for key in node.keys():
        path = f"{prefix}{key!s}"
        if any(path == section or path.startswith(f"{section}.") for section in unused):
            continue
        if OmegaConf.is_missing(node, key):
            purpose = schema.help_line(job, path)
            raise ConfigError(f"{path} has no value: give {path}=...{f' ({purpose})' if purpose else ''}")
        value = _child(node, key, False, path)
        if isinstance(value, DictConfig):
            _mandatory(job, value, unused, f"{path}.")


def _selects_group(override: Override, groups: Sequence[str]) -> bool:
    """Whether `override` chooses a config group's option (`preset=demo`, `llm=sim`) rather than setting a key."""
    return override.package is not None or "/" in override.key_or_group or override.key_or_group in groups


def _check_selection(override: Override, loader: ConfigLoader) -> None:
    """A `ConfigError` when a group is given something else than an option's name (`dedup=true`), which Hydra
    answers with a traceback."""
    value = override.value()
    if override.is_delete() or isinstance(value, (str, list)):
        return
    options = loader.get_group_options(override.key_or_group)
    raise ConfigError(f"{override.key_or_group}={shown_value(value)}: expects one of {', '.join(options)}")


@functools.lru_cache(maxsize=REFERENCES_KEPT)
def _reference(name: str, selections: tuple[str, ...]) -> DictConfig:
    """`conf/<name>.yaml` with only the command line's group choices: the keys a command line may set and their
    defaults (read only). Called inside `initialize_config_module`."""
    return compose(config_name=name, overrides=list(selections))


def compose_config(name: str, overrides: Sequence[str], complete: bool = True) -> DictConfig:
    """`conf/<name>.yaml` composed with command-line overrides; a `ConfigError` when they do not compose, name a key
    the config does not have, or leave a value its schema refuses (`conf.schema`); with `complete`, also when a
    mandatory value the job reads is not given (`--help` and `--cfg` show a config before it is complete).

    The keys set are compared with the config composed with only the command line's group choices (`preset=demo`,
    `llm=sim`, `lean=repl`), so the keys those choices bring are known and their defaults show in errors."""
    if not OmegaConf.has_resolver("package_dir"):
        OmegaConf.register_new_resolver("package_dir", package_dir)
    job = schema.JOBS[name]
    for flag in (override for override in overrides if override.startswith("-")):
        raise ConfigError(f"{flag}: the job takes KEY=VALUE; `folklore {name} --help` lists its keys and "
                          f"`folklore {name} --cfg` prints its config")
    given, overrides = overrides, [quoted_for_hydra(override) for override in overrides]
    try:
        with initialize_config_module(config_module="conf", version_base=None):
            loader = GlobalHydra.instance().config_loader()
            # A folder of conf/ with no option in it (schema/, the schema's modules) is no group a user chooses.
            groups = [group for group in loader.list_groups("")
                      if group != HYDRA_KEY and loader.get_group_options(group)]
            selections, settings = [], []
            for override in OverridesParser.create().parse_overrides(list(overrides)):
                if _selects_group(override, groups):
                    _check_selection(override, loader)
                    selections.append(override.input_line)
                elif override.key_or_group.split(".", 1)[0] != HYDRA_KEY:
                    settings.append(override)
            reference = _reference(name, tuple(selections))
            for override in settings:
                _check_keys(override, reference, groups, job)
            cfg = compose(config_name=name, overrides=list(overrides))
            for override in settings:
                if not override.is_delete():
                    _walk(cfg, override.key_or_group, strict=True)
            _check_node(name, cfg, [], reference)
            if complete:
                _mandatory(name, cfg, OmegaConf.select(cfg, "resume.unused", default=None) or [])
    except HydraException as error:
        raise ConfigError(composition_error_text(str(error)) + _unquoted_hint(given)) from None
    return cfg
