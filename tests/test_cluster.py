"""docs/cluster.md's cluster commands on a real three-node Ray cluster with the run directory on an S3-compatible store.

Run alone with `python -m pytest -m cluster`. The cluster is Ray's own multi-node test cluster (`tests/ray_nodes.py`):
a head with the job server and two worker nodes, each its own raylet; one carries the `lean` resource, so the Lean
pool's workers may run only there. The store is moto's S3 server (`tests/object_store.py`), reached through the AWS
variables every node inherits. The run is submitted; a second job on the same run directory while it runs is refused
with the lease's one line naming it; the first is stopped mid-run, resubmitted, and must end with the candidates and
statuses of the same preset run on one local Ray.
"""

from __future__ import annotations

import json
import re
import socket
import subprocess
import time
from pathlib import Path

import polars as pl
import pytest
from ray.job_submission import JobSubmissionClient
from ray.util.state import list_actors

from harness.object_store import ObjectStore
from harness.ray_nodes import RayNodes, running_cluster
from pipelines import export, mine, report
from pipelines.runtime.progress import lost_node_lines

pytestmark = [pytest.mark.ray, pytest.mark.cluster]

REPO = Path(__file__).resolve().parents[1]
CLUSTER_DOC = REPO / "docs" / "cluster.md"
MARKER = "<!-- cluster-commands:"
BUCKET = "folklore-night"
LEAN_NODE = "lean-node"
NODE_CPUS = 2
JOB_TIMEOUT_S = 600
POLL_S = 0.5
RUN_PREFIX = f"{BUCKET}/folklore/demo"
# A job submitted on the run directory while the first job holds it.
SECOND_JOB = "folklore-demo-meanwhile"
SETUP_FAILED_STATUS = "exit code 2"  # how Ray's job status message tells of an entrypoint that could not start


def documented_commands() -> list[str]:
    """The `ray job` lines of docs/cluster.md's cluster block, in order."""
    text = CLUSTER_DOC.read_text()
    block = text[text.index(MARKER):].split("```bash\n", 1)[1].split("```", 1)[0]
    return [line for line in block.splitlines() if line.startswith("ray job ")]


def table_rows(run_dir: str, store: ObjectStore | None = None) -> list[tuple[str, str]]:
    """(candidate_id, status) of every written candidate, sorted (duplicates kept, so they show)."""
    if store is None:
        frame = pl.read_parquet(f"{run_dir}/candidates/*.parquet", columns=["candidate_id", "status"])
    else:
        prefix = run_dir.removeprefix("s3://")
        files = [key for key in store.keys(f"{prefix}/candidates") if key.endswith(".parquet")]
        frame = pl.concat([pl.read_parquet(f"s3://{key}", columns=["candidate_id", "status"],
                                           storage_options={"endpoint_url": store.endpoint_url,
                                                            "aws_region": "us-east-1", "allow_http": "true"})
                           for key in files])
    return sorted(frame.iter_rows())


@pytest.fixture(scope="module")
def local_rows(tmp_path_factory) -> list[tuple[str, str]]:
    """The demo on one local Ray: what the cluster run must reproduce."""
    run_dir = tmp_path_factory.mktemp("local") / "run"
    assert mine.main(["preset=demo", f"run_dir={run_dir}"]) == 0
    return table_rows(str(run_dir))


@pytest.fixture(scope="module")
def cluster(local_rows, object_store):
    """Head (job server) and two worker nodes of NODE_CPUS each, one labelled `lean`; started after the store, so
    every node's processes have its AWS variables."""
    with running_cluster(NODE_CPUS, {LEAN_NODE: (NODE_CPUS, {"lean": 1}), "stage-node": (NODE_CPUS, {})}) as nodes:
        yield nodes


def run_command(command: str, environment: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", "-c", command], cwd=REPO, env=environment, capture_output=True, text=True,
                          timeout=JOB_TIMEOUT_S)


def wait_for_objects(store: ObjectStore, prefix: str, job_id: str, environment: dict[str, str]) -> None:
    """Until an object whose key starts with `prefix` exists (the run is under way); fail, with the job's log, if the
    job ends or nothing comes in JOB_TIMEOUT_S."""
    deadline = time.monotonic() + JOB_TIMEOUT_S
    while not any(key.startswith(prefix) for key in store.keys(prefix.rsplit("/", 1)[0])):
        status = job_status(job_id, environment)
        assert status in ("PENDING", "RUNNING"), run_command(f"ray job logs {job_id}", environment).stdout
        assert time.monotonic() < deadline, f"nothing written under {prefix} in {JOB_TIMEOUT_S} s"
        time.sleep(POLL_S)


def job_status(job_id: str, environment: dict[str, str]) -> str:
    return str(JobSubmissionClient(environment["RAY_ADDRESS"]).get_job_status(job_id).value)


def with_submission_id(command: str, job_id: str) -> str:
    """A documented `ray job submit` line submitting under `job_id` instead."""
    return re.sub(r"--submission-id \S+", f"--submission-id {job_id}", command)


def lease_holder(store: ObjectStore) -> dict[str, object]:
    """What the run's lease object says of the job holding it."""
    with store.filesystem().open_input_stream(f"{RUN_PREFIX}/lease.json") as stream:
        return json.loads(stream.read())


@pytest.mark.timeout(1200)
def test_submitted_stopped_and_resubmitted_run_matches_a_local_run(cluster: RayNodes, object_store: ObjectStore,
                                                                    local_rows, capsys):
    submit_first, logs, stop, submit_again = documented_commands()
    run_dir = f"{object_store.create_bucket(BUCKET)}/folklore/demo"
    environment = {**cluster.environment(), "RUN_DIR": run_dir}

    started = run_command(submit_first, environment)
    assert started.returncode == 0, started.stderr
    wait_for_objects(object_store, f"{RUN_PREFIX}/lease.json", "folklore-demo-1", environment)
    holder = lease_holder(object_store)
    assert (holder["job_id"], holder["host"]) == ("folklore-demo-1", socket.gethostname())

    # A second job on the run directory while the first holds it: refused before Ray starts, with one line.
    refused = run_command(with_submission_id(submit_again, SECOND_JOB), environment)
    assert refused.returncode != 0 and job_status(SECOND_JOB, environment) == "FAILED", refused.stdout
    assert SETUP_FAILED_STATUS in str(JobSubmissionClient(environment["RAY_ADDRESS"]).get_job_info(SECOND_JOB).message)
    [line] = [line for line in run_command(f"ray job logs {SECOND_JOB}", environment).stdout.splitlines()
              if line.startswith("error:")]
    assert line.startswith(f"error: run_dir={run_dir} is held by another run: host {holder['host']}, "
                           f"pid {holder['pid']}, ray job folklore-demo-1, since {holder['started_at']}"), line
    assert job_status("folklore-demo-1", environment) == "RUNNING", "the first job goes on"

    wait_for_objects(object_store, f"{RUN_PREFIX}/discoveries", "folklore-demo-1", environment)
    shown = run_command(logs, environment)
    assert "joining the Ray cluster at auto" in shown.stdout
    stopped = run_command(stop, environment)
    assert stopped.returncode == 0, stopped.stderr
    assert job_status("folklore-demo-1", environment) == "STOPPED"

    resumed = run_command(submit_again, environment)
    assert resumed.returncode == 0, resumed.stderr
    assert re.search(r"resume: [1-9]\d* discoveries", resumed.stdout), resumed.stdout
    assert "succeeded" in resumed.stdout + resumed.stderr
    assert table_rows(run_dir, object_store) == local_rows

    workers = list_actors(address=cluster.job_server, filters=[("class_name", "=", "LeanWorker")], detail=True)
    assert workers and {actor["node_id"] for actor in workers} == {cluster.node_id(LEAN_NODE)}

    # Report and export read and write the same run directory from this machine.
    assert report.main([f"run_dir={run_dir}"]) == 0
    assert export.main([f"run_dir={run_dir}", "format=parquet", "allow_sim=true"]) == 0
    capsys.readouterr()
    written = object_store.keys(RUN_PREFIX)
    for expected in ("run.json", "logs/ray.log", "report/report.md", "export/README.md", "seeds/seeds.parquet"):
        assert f"{RUN_PREFIX}/{expected}" in written, expected
    assert any(key.startswith(f"{RUN_PREFIX}/llm_cache/") for key in written)
    assert f"{RUN_PREFIX}/lease.json" not in written, "the lease goes with the job that held it"


def test_each_lost_node_gets_one_line_saying_what_it_costs():
    before = {"a" * 56: "10.0.0.1 (aaaaaaaaaaaa)", "b" * 56: "10.0.0.2 (bbbbbbbbbbbb)"}
    lines = lost_node_lines(before, {"b" * 56: before["b" * 56], "c" * 56: "10.0.0.3 (cccccccccccc)"})
    assert len(lines) == 1 and lines[0].startswith("[cluster] lost node 10.0.0.1 (aaaaaaaaaaaa): ")
    assert "error_infra" in lines[0] and "cache" in lines[0]
    assert lost_node_lines(before, before) == []
