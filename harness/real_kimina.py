"""The real Kimina Lean Server (package `kimina-ast-server` on the package index) on 127.0.0.1, with Folklore's Lean
simulator as its REPL binary, for the `lean=kimina` tests and benchmark.

The server is installed into a virtual environment of its own, once per machine: under the user's cache directory,
keyed by the pins in harness/kimina_server_env/requirements.txt and the Python version, so its dependencies stay out of
the project's and a second test session reuses it (a fresh install took 23 s here). It is started the way an operator
starts it (`python -m server`, configured by `LEAN_SERVER_*` variables), through harness/kimina_server_env/launch.py,
which holds the two shims version 2.1.3 needs on this machine; its REPLs are `lake env REPL_PATH`, answered by the
`lake` and `repl` scripts beside it. A server that cannot be installed or started raises: CI has the package index,
so the tests fail there instead of skipping.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import psutil
import yaml

from harness.ray_nodes import HOST, free_port

REPO = Path(__file__).resolve().parents[1]
ENV_FILES = REPO / "harness" / "kimina_server_env"
REQUIREMENTS = ENV_FILES / "requirements.txt"
INSTALLED_MARK = "folklore-installed"  # written last: a directory without it is a broken install, redone
INSTALL_TIMEOUT_S = 900
START_TIMEOUT_S = 60
STOP_TIMEOUT_S = 15
POLL_S = 0.1
# The server's log: its access line for a `POST /api/check` it answered with results (HTTP 200; not a refused key,
# nor the key probe's empty request).
CHECK_ANSWERED_LOGGED = '"POST /api/check HTTP/1.1" 200'
# What the server logs when a REPL starts running a snippet (its header or its body).
SNIPPET_LOGGED = "Running snippet"
# Terminal width the server's log is printed at: wide enough that no line of it is wrapped.
LOG_COLUMNS = "1000"


class KiminaServerUnavailable(RuntimeError):
    """The server could not be installed or did not start; the message holds the tail of pip's or the server's
    output."""


def sim_config(**overrides: Any) -> dict[str, Any]:
    """The `sim:` block of conf/lean/sim.yaml, fast and idle (no CPU burnt), with `overrides`."""
    sim = yaml.safe_load((REPO / "conf" / "lean" / "sim.yaml").read_text())["sim"]
    return {**sim, "import_s": 0.0, "check_s": 0.0, "burn_cpu": False, **overrides}


def server_environment_dir() -> Path:
    """Where the server's virtual environment lives: the user's cache, one directory per set of pins and Python."""
    key = hashlib.sha256(REQUIREMENTS.read_bytes() + sys.version.encode()).hexdigest()[:16]
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "folklore" / f"kimina-server-{key}"


def server_python() -> Path:
    """The Python of the server's virtual environment, installed first when absent (under a file lock, so two
    sessions at once install it once)."""
    venv = server_environment_dir()
    python = venv / "bin" / "python"
    venv.parent.mkdir(parents=True, exist_ok=True)
    with open(venv.parent / f"{venv.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (venv / INSTALLED_MARK).exists():
            return python
        shutil.rmtree(venv, ignore_errors=True)
        for command in ([sys.executable, "-m", "venv", str(venv)],
                        [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                         "-r", str(REQUIREMENTS)]):
            done = subprocess.run(command, capture_output=True, text=True, timeout=INSTALL_TIMEOUT_S)
            if done.returncode != 0:
                raise KiminaServerUnavailable(f"installing the Kimina server failed ({' '.join(command)}): "
                                              f"{(done.stdout + done.stderr)[-3000:]}")
        (venv / INSTALLED_MARK).write_text(REQUIREMENTS.read_text())
    return python


class RealKiminaServer:
    """`python -m server` on a free port of 127.0.0.1, its REPLs the simulator with `sim`; a context manager that
    stops it and every REPL it started. `kill()` ends them at once, as a crashed or killed server would."""

    def __init__(self, sim: dict[str, Any], log_path: Path, api_key: str | None = None, max_repls: int = 2) -> None:
        self.sim, self.log_path, self.api_key, self.max_repls = sim, log_path, api_key, max_repls
        self.port = free_port()
        self.process: subprocess.Popen | None = None
        self._repls: dict[int, psutil.Process] = {}

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}"

    def environment(self) -> dict[str, str]:
        """The server's settings (`LEAN_SERVER_*`, read by server/settings.py), and what the `lake` and `repl`
        scripts need."""
        env = {name: value for name, value in os.environ.items()
               if not name.startswith("LEAN_SERVER_") and name != "VIRTUAL_ENV"}
        env.update({
            "LEAN_SERVER_HOST": HOST, "LEAN_SERVER_PORT": str(self.port),
            "LEAN_SERVER_MAX_REPLS": str(self.max_repls),
            "LEAN_SERVER_PROJECT_DIR": str(REPO), "LEAN_SERVER_REPL_PATH": str(ENV_FILES / "repl"),
            "LEAN_SERVER_SKIP_VALIDATION": "1",  # no Lean workspace (repl, ast_export, mathlib4) to check for
            "PATH": f"{ENV_FILES / 'bin'}{os.pathsep}{env.get('PATH', '')}",
            "FOLKLORE_SIM_PYTHON": sys.executable, "FOLKLORE_SIM_CONFIG": json.dumps(self.sim),
            "PYTHONUNBUFFERED": "1", "COLUMNS": LOG_COLUMNS,
        })
        if self.api_key is not None:
            env["LEAN_SERVER_API_KEY"] = self.api_key
        return env

    def __enter__(self) -> RealKiminaServer:
        python = server_python()
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            # Started in the log's directory: the server also reads a `.env` file from its working directory.
            self.process = subprocess.Popen([str(python), str(ENV_FILES / "launch.py")], env=self.environment(),
                                            cwd=self.log_path.parent, stdout=log, stderr=subprocess.STDOUT,
                                            stdin=subprocess.DEVNULL)
        try:
            self._wait_until_healthy()
        except BaseException:
            self.kill()
            raise
        return self

    def _wait_until_healthy(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise KiminaServerUnavailable(f"the Kimina server exited with status {self.process.returncode}: "
                                              f"{self.log()[-3000:]}")
            try:
                with urllib.request.urlopen(urllib.request.Request(self.url + "/health", headers=headers),
                                            timeout=1) as reply:
                    if json.loads(reply.read()) == {"status": "ok"}:
                        return
            except (OSError, urllib.error.URLError, ValueError):
                time.sleep(POLL_S)
        raise KiminaServerUnavailable(f"the Kimina server did not answer /health within {START_TIMEOUT_S} s: "
                                      f"{self.log()[-3000:]}")

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def checks_answered(self) -> int:
        """How many `POST /api/check` the server has answered with results so far."""
        return self.log().count(CHECK_ANSWERED_LOGGED)

    def snippets_run(self) -> int:
        """How many snippets (headers and bodies) the server's REPLs have started running so far."""
        return self.log().count(SNIPPET_LOGGED)

    def _note_repls(self) -> None:
        """Remember the server's REPL processes (they start sessions of their own, so a signal to the server alone
        never reaches them)."""
        if self.process is not None and self.process.poll() is None:
            try:
                for child in psutil.Process(self.process.pid).children(recursive=True):
                    self._repls[child.pid] = child
            except psutil.NoSuchProcess:
                pass

    def kill(self) -> None:
        """End the server and its REPLs at once (SIGKILL), as a crash or an operator's `kill -9` would."""
        self._note_repls()
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        self._end_repls()

    def _end_repls(self) -> None:
        for repl in self._repls.values():
            try:
                repl.kill()
            except psutil.NoSuchProcess:
                pass
        psutil.wait_procs(list(self._repls.values()), timeout=STOP_TIMEOUT_S)

    def __exit__(self, *exc: object) -> None:
        self._note_repls()
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)  # the server's own shutdown closes its REPLs
            try:
                self.process.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._end_repls()
