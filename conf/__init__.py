"""Hydra configuration, shipped as package data; defaults are the MathlibLemma paper's values.

`compose_config` is how every command line reads it: a mistake in an override (a typo in a key, a choice that
does not exist, a missing `=`) becomes one `ConfigError` line with the hint Hydra gives (the valid choices,
`+key=` to add a key), never a traceback.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from importlib.resources import files
from typing import Any

from hydra import compose, initialize_config_module
from hydra.errors import HydraException
from omegaconf import DictConfig, OmegaConf

# Where Hydra's composition errors stop saying what is wrong and start listing its search path.
_SEARCH_PATH = "Config search path:"


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


def compose_config(name: str, overrides: Sequence[str]) -> DictConfig:
    """`conf/<name>.yaml` composed with command-line overrides; a `ConfigError` when they do not compose."""
    if not OmegaConf.has_resolver("package_dir"):
        OmegaConf.register_new_resolver("package_dir", package_dir)
    try:
        with initialize_config_module(config_module="conf", version_base=None):
            return compose(config_name=name, overrides=list(overrides))
    except HydraException as error:
        raise ConfigError(composition_error_text(str(error))) from None


def ray_init_options(ray_cfg: Mapping[str, Any]) -> tuple[dict[str, Any], str | None]:
    """`ray.init` keyword arguments from a job's `ray:` section, and a note for the user when a setting was left out.

    `ray.num_cpus` sizes a Ray the job starts itself; a cluster's nodes declare their own CPUs, and Ray refuses the
    argument when joining one. So a preset that sets it (the demo) still runs on a cluster, and says so."""
    address, num_cpus = ray_cfg.get("address"), ray_cfg.get("num_cpus")
    if address is None:
        return {"num_cpus": num_cpus}, None
    note = None if num_cpus is None else (f"note: ray.num_cpus={num_cpus} is ignored: joining the Ray cluster at "
                                          f"{address}, whose nodes declare their own CPUs")
    return {"address": address}, note
