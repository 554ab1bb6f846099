"""The rows the steps read and write: seed files, evaluate's benchmark items, the candidate table."""
