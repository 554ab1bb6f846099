"""What a job runs on besides its plan: the command line and how a job ends (`cli`), Ray, backends and checks before
starting (`job`), seed files (`seed_files`), the declaration index's checks (`index_check`), work off the driver
(`off_driver`), the run directory and resuming (`run_dir`), live counts (`progress`), and how rows cross processes
(`arrow_wire`, `discoveries`)."""
