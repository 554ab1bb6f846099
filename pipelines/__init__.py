"""Hydra entry points, one per job (mine, autoformalize, evaluate, plan, index, report, export), each wiring a Ray
Data plan from the operators. Beside them, `runtime/` (what a job runs on) and `reporting/` (what turns a run into
tables, plots and summaries)."""
