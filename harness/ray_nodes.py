"""A real multi-node Ray cluster on this one machine, as Ray's own multi-node tests make one (`ray.cluster_utils`).

Each node is its own raylet with its own logical CPUs and custom resources; the head runs the dashboard, and with
it Ray's job server, so jobs are submitted with `ray job submit` exactly as on a cluster of machines. Nodes can be
removed mid-run (their raylet and workers killed) to test what a run does when a machine is lost.
"""

from __future__ import annotations

import os
import socket
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ray._common.utils import reset_ray_address
from ray.cluster_utils import Cluster
from ray.job_submission import JobSubmissionClient

HOST = "127.0.0.1"
# Every node's object store: the demo's blocks are small, and three nodes share one machine's memory.
OBJECT_STORE_BYTES = 150 * 1024 * 1024
NODE_START_TIMEOUT_S = 60.0
# Ray's directory for unpacked runtime environments (working dirs), under its session directory.
RUNTIME_ENV_DIR = "runtime_resources"
# What the job server answers a submission before the head's dashboard agent, which runs jobs, has registered with it.
NO_AGENT_YET = "No available agent"
PROBE_JOB = "harness-job-server-probe"
PROBE_POLL_S = 1.0


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind((HOST, 0))
        return probe.getsockname()[1]


@dataclass
class RayNodes:
    """A running cluster: its GCS address (for `ray.init(address=...)`), its job server, its worker nodes by name."""

    cluster: Cluster
    job_server: str
    workers: dict[str, Any] = field(default_factory=dict)

    @property
    def address(self) -> str:
        return self.cluster.address

    def add_worker(self, name: str, num_cpus: float, resources: Mapping[str, float] | None = None) -> None:
        """Start worker node `name` with `num_cpus` logical CPUs and `resources`; returns once it has joined."""
        # Each node unpacks a job's working directory into a directory of its own, as on its own disk: nodes sharing
        # one would unpack into it while another node's processes import from it.
        self.workers[name] = self.cluster.add_node(num_cpus=num_cpus, resources=dict(resources or {}),
                                                   object_store_memory=OBJECT_STORE_BYTES,
                                                   runtime_env_dir_name=f"{RUNTIME_ENV_DIR}-{name}")
        self.cluster.wait_for_nodes(timeout=NODE_START_TIMEOUT_S)

    def remove_worker(self, name: str) -> None:
        """Kill worker node `name` at once (its raylet and every process on it), as a lost machine."""
        self.cluster.remove_node(self.workers.pop(name), allow_graceful=False)

    def node_id(self, name: str) -> str:
        return self.workers[name].node_id

    def environment(self) -> dict[str, str]:
        """What the `ray` CLI needs to reach this cluster's job server (`ray job submit` reads RAY_ADDRESS)."""
        return {**os.environ, "RAY_ADDRESS": self.job_server}


def interpreter_path() -> str:
    """PATH with this interpreter's directory first, so `python` and `ray` in a job's entrypoint are this venv's."""
    return os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])


def wait_for_job_server(job_server: str) -> None:
    """Return once the job server runs jobs: a probe job submitted (again while the server says it has no agent yet)
    and ended. On a loaded machine the head's agent registers seconds after the node is up, and a test's first
    `ray job submit` would otherwise be refused for want of it."""
    client = JobSubmissionClient(job_server)
    deadline = time.monotonic() + NODE_START_TIMEOUT_S
    while True:
        try:
            client.submit_job(entrypoint="python -c pass", submission_id=PROBE_JOB)
            break
        except RuntimeError as error:
            if NO_AGENT_YET not in str(error) or time.monotonic() > deadline:
                raise
            time.sleep(PROBE_POLL_S)
    while not client.get_job_status(PROBE_JOB).is_terminal():
        if time.monotonic() > deadline:
            raise TimeoutError(f"the cluster's probe job did not end within {NODE_START_TIMEOUT_S} s")
        time.sleep(PROBE_POLL_S)


@contextmanager
def running_cluster(head_cpus: float, workers: Mapping[str, tuple[float, Mapping[str, float]]]
                    ) -> Iterator[RayNodes]:
    """A head with `head_cpus` CPUs and the job server, and a worker node per entry of `workers` (name: (CPUs,
    custom resources)); everything stopped afterwards. The head's address is not left in Ray's address file, so a
    job started meanwhile without `ray.address` starts its own local Ray as it would on a laptop."""
    saved_path = os.environ.get("PATH")
    os.environ["PATH"] = interpreter_path()  # the nodes' workers and the job supervisor start `python` from PATH
    cluster = Cluster(initialize_head=True, head_node_args={
        "num_cpus": head_cpus, "include_dashboard": True, "dashboard_host": HOST, "dashboard_port": free_port(),
        "object_store_memory": OBJECT_STORE_BYTES})
    try:
        nodes = RayNodes(cluster, f"http://{cluster.webui_url}")
        for name, (num_cpus, resources) in workers.items():
            nodes.add_worker(name, num_cpus, resources)
        reset_ray_address()
        wait_for_job_server(nodes.job_server)
        yield nodes
    finally:
        cluster.shutdown()
        if saved_path is None:
            os.environ.pop("PATH", None)
        else:
            os.environ["PATH"] = saved_path
