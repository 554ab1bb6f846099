"""What turns a written run into what people read: the numbers (`stats`, `formalization_stats`), the
closing block every job prints (`summary`), the Markdown tables more than one job prints (`markdown`), plots, corpora
and per-seed Lean files, and the run loaded for analysis (`run_data`)."""
