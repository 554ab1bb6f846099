"""Starts the Kimina Lean Server (`python -m server`) inside its own virtual environment, with two shims that let
version 2.1.3 start on this machine. Run by harness/real_kimina.py with that environment's Python."""

import sys
import types
import typing

import typing_extensions

# kimina-ast-client's models (kimina_client/models.py) import `TypedDict` from `typing` on Python 3.11, and pydantic
# refuses `typing.TypedDict` before Python 3.12 when it builds the request and answer models the server imports.
# `typing_extensions.TypedDict` is the one pydantic takes; it must be in place before `server` is imported.
typing.TypedDict = typing_extensions.TypedDict


class NoDatabase:
    """Stands for the Prisma client the server builds at import: without LEAN_SERVER_DATABASE_URL the server never
    connects it, so nothing is called on it."""


# The server imports `prisma` at start-up and, finding no generated client, runs `prisma generate`, which downloads
# engine binaries (and fails offline). Its database is optional and off here, so a `prisma` module that holds only the
# class it imports is put in front of the real one.
no_prisma = types.ModuleType("prisma", "No Prisma: the Kimina server's database is off in these tests.")
no_prisma.Prisma = NoDatabase
sys.modules["prisma"] = no_prisma

from server.__main__ import main  # noqa: E402  (after the shims above)

main()
