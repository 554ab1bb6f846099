"""One module per job, each holding its job class (on `pipelines.runtime.job.Job`: the run's lifecycle), its config,
the inputs it reads and the plan it runs: `mining`, `evaluation`, `autoformalization`, `contribution`. The entry
points (`pipelines.mine`, ...) parse the command line and call into them."""
