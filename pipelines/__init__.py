"""Hydra entry points, one per job (mine, autoformalize, evaluate, plan, index, report, export), each wiring a Ray
Data plan from the operators, and `command` (the `folklore` command, which runs any of them). Beside them, `jobs/`
(each job's class and plan), `runtime/` (what a job runs on) and `reporting/` (what turns a run into tables, plots and
summaries)."""
