"""What every `python -m pipelines.X key=value ...` entry point shares: composing its Hydra config from `conf/`.

The mining pipeline composes `conf/mine.yaml`; evaluate, report and export compose their own file the
same way, with the same `${package_dir:...}` resolver, so overrides read alike on every command line.
"""

from __future__ import annotations

from collections.abc import Sequence

from hydra import compose, initialize_config_module
from omegaconf import DictConfig, OmegaConf

from pipelines.job import package_dir


def compose_config(name: str, overrides: Sequence[str]) -> DictConfig:
    """`conf/<name>.yaml` composed with command-line overrides (`run_dir=...`, `format=jsonl`)."""
    if not OmegaConf.has_resolver("package_dir"):
        OmegaConf.register_new_resolver("package_dir", package_dir)
    with initialize_config_module(config_module="conf", version_base=None):
        return compose(config_name=name, overrides=list(overrides))
