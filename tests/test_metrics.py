"""A demo mine watched as a night's run is watched: Ray's metrics endpoint scraped while it runs (the run's own Ray,
started with `ray.metrics_export_port`) and `folklore status` asked from another process. At the end the scraped
totals are the closing block's, and status says finished with its candidate count."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections import Counter
from pathlib import Path

import pytest

from harness.ray_nodes import free_port
from pipelines.runtime.metrics import status_label
from tests.mine_support import FAST_LEAN

pytestmark = pytest.mark.ray

REPO = Path(__file__).resolve().parents[1]
RUN_TIMEOUT_S = 600
POLL_S = 0.3
# Ray's workers hand their metrics to the node's agent this often (ms): sooner than Ray's 10 s, for a short run.
REPORT_INTERVAL_MS = "500"
SERIES = re.compile(r'^ray_(folklore_\w+?)(?:_total)?\{(.*)\} (\S+)$')
LABEL = re.compile(r'(\w+)="([^"]*)"')
# The labels Folklore's series carry (Ray adds its own: the session, the node, the worker).
FOLKLORE_LABELS = {"stage", "status", "role", "kind", "mode", "result", "state", "resource", "le"}


def scrape(port: int) -> dict[str, Counter[tuple[tuple[str, str], ...]]]:
    """The folklore series the metrics endpoint serves now: name -> labels (Ray's own left out) -> value; empty when
    it does not answer."""
    try:
        text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    except (urllib.error.URLError, OSError):
        return {}
    series: dict[str, Counter[tuple[tuple[str, str], ...]]] = {}
    for line in text.splitlines():
        found = SERIES.match(line)
        if found:
            labels = tuple(sorted((key, value) for key, value in LABEL.findall(found[2])
                                  if key in FOLKLORE_LABELS))
            series.setdefault(found[1], Counter())[labels] += float(found[3])
    return series


def total(series: Counter[tuple[tuple[str, str], ...]], **wanted: str) -> float:
    return sum(value for labels, value in series.items() if set(wanted.items()) <= set(labels))


def status_of(run_dir: Path) -> list[str]:
    return subprocess.run([sys.executable, "-m", "pipelines.status", f"run_dir={run_dir}"], cwd=REPO,
                          capture_output=True, text=True, check=True).stdout.splitlines()


def test_a_demo_mine_exports_its_metrics_and_status_follows_it(tmp_path: Path) -> None:
    port, run_dir = free_port(), tmp_path / "run"
    log = tmp_path / "mine.log"
    environment = {**os.environ, "RAY_metrics_report_interval_ms": REPORT_INTERVAL_MS}
    with log.open("wb") as out:
        driver = subprocess.Popen([sys.executable, "-m", "pipelines.mine", "preset=demo", f"run_dir={run_dir}",
                                   f"ray.metrics_export_port={port}", *FAST_LEAN], cwd=REPO, stdout=out,
                                  stderr=subprocess.STDOUT, env=environment)
    last: dict[str, Counter[tuple[tuple[str, str], ...]]] = {}
    running: list[str] = []
    deadline = time.monotonic() + RUN_TIMEOUT_S
    while driver.poll() is None:
        assert time.monotonic() < deadline, log.read_text()[-2000:]
        scraped = scrape(port)
        if scraped:
            last.update(scraped)  # each series as last served (the driver's gauges go first when its Ray stops)
            if not running and (run_dir / "lease.json").exists():
                running = status_of(run_dir)
        time.sleep(POLL_S)
    printed = log.read_text()
    assert driver.returncode == 0, printed[-2000:]

    assert running[1].startswith("running: host ") and f"pid {driver.pid}," in running[1], running
    finished = status_of(run_dir)
    assert finished[1].startswith("finished: at ")
    [candidates] = re.findall(r"^candidates: (\d+)$", printed, re.MULTILINE)
    assert f"candidates: {candidates}" in finished

    block = printed[printed.index(f"candidates: {candidates}\n"):]
    by_status = {status: int(count) for status, count in re.findall(r"^  (\w+) +(\d+)$",
                                                                     block.split("\nseeds:")[0], re.MULTILINE)}
    written = last["folklore_candidates"]
    assert {status: total(written, stage="candidates", status=status_label(status))
            for status in by_status} == by_status
    [started, failed, cached] = re.findall(r"this start: (\d+) \((\d+) failed, (\d+) answered from the run's cache",
                                           printed)[0]
    calls = last["folklore_llm_calls"]
    assert (total(calls, kind="sent"), total(calls, kind="failed"), total(calls, kind="cached")) == \
        (int(started), int(failed), int(cached))
    assert total(last["folklore_llm_tokens"], kind="prompt") > 0
    [checks] = re.findall(r"^lean checks: (\d+)", printed, re.MULTILINE)
    assert total(last["folklore_lean_checks"]) == int(checks)
    assert total(last["folklore_lean_check_seconds_count"]) == int(checks)
    assert total(last["folklore_waves"], state="done") == total(last["folklore_waves"], state="planned") > 0
    assert set(dict(labels)["resource"] for labels in last["folklore_busy_fraction"]) == {"llm_endpoint", "lean_pool"}
