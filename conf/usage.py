"""What `folklore JOB --help` and `folklore JOB --cfg` print: a job's purpose, usage, config groups and keys (each with
its default and the help its schema gives it), or its composed config; both before anything starts.

The keys listed are those the command line's group choices bring (`folklore mine llm=vllm --help` lists the engine's
keys), so the listing is the config the job would read, not a union of every option's.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from hydra import compose, initialize_config_module
from hydra.core.global_hydra import GlobalHydra
from omegaconf import OmegaConf

from conf import HYDRA_KEY, compose_config, schema, shown_value
from conf.schema.fields import mapped, optional

# The flags every job answers itself, before its command line is composed.
HELP_FLAGS = ("-h", "--help")
CONFIG_FLAG = "--cfg"
# A default shown longer than this is cut (a prompt's text, a long list); its key's line stays one line.
SHOWN_CHARS = 48
# Column at which the help of a key starts, when the key and its default are shorter.
HELP_COLUMN = 44


def wants_help(args: Sequence[str]) -> bool:
    """Whether a job's command line asks for its help."""
    return any(arg in HELP_FLAGS for arg in args)


def wants_config(args: Sequence[str]) -> bool:
    """Whether a job's command line asks for its composed config."""
    return CONFIG_FLAG in args


def _overrides(args: Sequence[str]) -> list[str]:
    """The key=value and group=option arguments of a command line, its flags and file arguments left out."""
    return [arg for arg in args if "=" in arg and not arg.startswith("-")]


def composed_config(name: str, args: Sequence[str]) -> str:
    """`conf/<name>.yaml` composed with the command line's overrides, as YAML, interpolations as written; mandatory
    values not given show as ???."""
    return OmegaConf.to_yaml(compose_config(name, _overrides(args), complete=False))


def group_choices(name: str, overrides: Sequence[str]) -> dict[str, tuple[str, list[str]]]:
    """Each config group the job reads -> the option the command line (or the job's default) chooses, and all its
    options as `group=OPTION` takes them."""
    with initialize_config_module(config_module="conf", version_base=None):
        composed = compose(config_name=name, overrides=list(overrides), return_hydra_config=True)
        loader = GlobalHydra.instance().config_loader()
        return {group: (str(option), sorted(loader.get_group_options(group)))
                for group, option in composed[HYDRA_KEY].runtime.choices.items()
                if not group.startswith(f"{HYDRA_KEY}/") and option is not None}


def shown(value: object) -> str:
    """A default as the command line writes it (`conf.shown_value`), a text of several lines as its count of lines,
    cut to one short line."""
    if isinstance(value, str) and "\n" in value:
        return f"<text, {value.count(chr(10)) + 1} lines>"
    text = " ".join(shown_value(value).split("\n"))
    return text if len(text) <= SHOWN_CHARS else f"{text[:SHOWN_CHARS - 1]}…"


def key_lines(name: str, config: Mapping[Any, Any], segments: tuple[str, ...] = ()) -> Iterator[str]:
    """One line per key of a composed config (as a plain mapping, interpolations and ??? as written): `key=default`
    and its help. A mapping whose keys the user chooses (`seeds.domains`, `llm.endpoints`) is one line holding its
    entries; a section's keys follow each other."""
    for key, value in config.items():
        inner = (*segments, str(key))
        found = schema.key_at(name, inner)
        if isinstance(value, dict) and not (found and mapped(optional(found.annotation)[0]) is not None):
            yield from key_lines(name, value, inner)
            continue
        entry = f"  {'.'.join(inner)}={shown(value)}"
        help_text = found.setting.help if found else ""
        yield f"{entry:<{HELP_COLUMN}} {help_text}" if help_text else entry


def job_help(name: str, usage: str, args: Sequence[str]) -> str:
    """The help of job `name`: its purpose (its schema's docstring), its usage as the README gives it, its config
    groups with their options (the chosen one marked *), and its keys with defaults and help."""
    overrides = _overrides(args)
    cfg = compose_config(name, overrides, complete=False)
    purpose = " ".join((schema.JOBS[name].__doc__ or "").split())
    lines = [purpose, "", f"usage: {usage}", "",
             "Config groups (GROUP=OPTION; * the one chosen now):"]
    for group, (chosen, options) in sorted(group_choices(name, overrides).items()):
        listed = " | ".join(f"{option}*" if option == chosen else option for option in options)
        lines.append(f"  {group:<22} {listed}")
    config = OmegaConf.to_container(cfg, resolve=False)
    assert isinstance(config, dict)
    lines += ["", f"Keys (KEY=VALUE, the default shown, ??? to be given; `folklore {name} --cfg` prints the whole "
              "config):", *key_lines(name, config)]
    return "\n".join(lines) + "\n"
