"""Why a Ray cluster refused this process for want of its token, as one line naming what to set: a cluster run with
token authentication refuses a client that sends no token, or the wrong one, and Ray says so only in a traceback or in
the text of a connection error. `lean_pool.ray_start` asks it when `ray.init` fails.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import ray

# How a client takes part in Ray's token authentication (ray/_private/authentication): it sends a token only with
# the mode set to `token`, and reads the token from the variable, else from the file the path variable names, else
# from Ray's default file.
AUTH_MODE_VARIABLE = "RAY_AUTH_MODE"
AUTH_TOKEN_MODE = "token"
AUTH_TOKEN_VARIABLE = "RAY_AUTH_TOKEN"
AUTH_TOKEN_PATH_VARIABLE = "RAY_AUTH_TOKEN_PATH"
DEFAULT_AUTH_TOKEN_FILE = Path("~/.ray/auth_token")
# How a refused token reads in what `ray.init` raises: Ray's `AuthenticationError` itself (the mode is `token` here
# and no token is found), or the GCS client's, only as text inside the `ConnectionError` Ray raises after it gave up.
_TOKEN_REFUSED = re.compile(r"AuthenticationError|InvalidAuthToken")


def refused_for_token(error: BaseException) -> bool:
    """Whether `error`, raised by `ray.init`, says the cluster's token authentication refused this process: Ray's
    `AuthenticationError` anywhere in its chain, or its words in the chain's text (Ray keeps the GCS client's refusal
    only as text in the cause of the `ConnectionError` it raises)."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, ray.exceptions.AuthenticationError) or _TOKEN_REFUSED.search(str(current)):
            return True
        current = current.__cause__ or current.__context__
    return False


def token_refused_line(address: str | None) -> str:
    """What to set when the Ray cluster at `address` refused this process for lack of its token, from what Ray reads
    here: the mode (no token is sent without `RAY_AUTH_MODE=token`) and where a token would come from."""
    where = f"the Ray cluster at {address} (ray.address)" if address else "Ray"
    refused = f"{where} refused the connection for lack of a token (the cluster runs with token authentication)"
    mode = os.environ.get(AUTH_MODE_VARIABLE)
    source = auth_token_source()
    token = f"{AUTH_TOKEN_VARIABLE} to the cluster's token (or {AUTH_TOKEN_PATH_VARIABLE} to a file holding it)"
    if (mode or "").lower() != AUTH_TOKEN_MODE:
        held = f", though {source} holds one" if source else ""
        return (f"{refused}: this process sends no token unless {AUTH_MODE_VARIABLE}={AUTH_TOKEN_MODE} (here it is "
                f"{mode or 'unset'}{held}): set {AUTH_MODE_VARIABLE}={AUTH_TOKEN_MODE} and {token}")
    if source is None:
        return (f"{refused}: this process has none ({AUTH_TOKEN_VARIABLE} is unset, and neither "
                f"{AUTH_TOKEN_PATH_VARIABLE} nor {DEFAULT_AUTH_TOKEN_FILE} names a file): set {token}")
    return (f"{where} refused the connection: it did not accept the token from {source} (the cluster runs with token "
            f"authentication): set {token}")


def auth_token_source() -> str | None:
    """Where Ray would read this process's token from (the variable, the file the path variable names, Ray's default
    file), or None when none of them holds one."""
    if os.environ.get(AUTH_TOKEN_VARIABLE):
        return AUTH_TOKEN_VARIABLE
    named = os.environ.get(AUTH_TOKEN_PATH_VARIABLE)
    if named and Path(named).expanduser().is_file():
        return f"{AUTH_TOKEN_PATH_VARIABLE}={named}"
    if DEFAULT_AUTH_TOKEN_FILE.expanduser().is_file():
        return str(DEFAULT_AUTH_TOKEN_FILE)
    return None
