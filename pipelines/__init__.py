"""Hydra entry points (mine, evaluate, report, export, index) that wire Ray Data plans from the operators."""
