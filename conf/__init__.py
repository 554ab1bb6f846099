"""Hydra configuration, shipped as package data; defaults are the MathlibLemma paper's values."""
