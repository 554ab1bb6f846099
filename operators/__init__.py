"""The pipeline steps, one per file: pure text logic in plain functions, wrapped by thin Ray Data operators."""
