"""Stages declared outside Folklore, listed in `pipeline:` as `examples.stages.MODULE:STAGE` (docs/extending.md)."""
