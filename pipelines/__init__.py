"""The jobs: one Hydra entry point each, and `command` (the `folklore` command, whose `JOBS` is the one list of
them and runs any of them by name). Beside them, `jobs/` (each job's class and plan), `runtime/` (what a job runs
on), `reporting/` (what turns a run into tables, plots and summaries) and `planning/` (the capacity model `plan`
prints)."""
