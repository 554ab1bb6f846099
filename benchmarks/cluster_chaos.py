"""`chaos_bench.py --cluster`: the chaos bench's run on a real multi-node Ray cluster, losing worker nodes mid-run.

The cluster is Ray's own multi-node test cluster on this machine (`harness/ray_nodes.py`): a head without CPUs (it runs
the job server and Ray's own services), a Lean node (the `lean` resource, so the Lean pool's workers run only there)
and two stage nodes, each its own raylet. The run directory is on an S3-compatible store (moto's server,
`harness/object_store.py`), so nothing a lost node kept on its disk can help the run. The driver joins the cluster
(`ray.address=`). Like the local chaos bench, which kills one driver per run, each of the first `--kills` runs loses
one worker node at its first LLM request, when every stage's actors and the Lean pool are up: the node holding most
live actors (stage actors go to whichever node has room, the Lean node included), removed with everything on it
(raylet, stage actors, Lean workers and their REPLs) while a new node of the same kind joins, as an autoscaler would
replace a lost machine. A kill lands when the node held at least one live actor. Each run ends by itself (once its
Lean workers are lost, its checks end `error_infra` at once) and the next resumes it; after the kills the run is
started again with the same command until no `error_infra` row is left, and its table is compared with the same
preset run undisturbed on one local Ray.
"""

from __future__ import annotations

import argparse
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from chaos_runs import (
    RUN_TIMEOUT_S,
    QuietSimServer,
    Side,
    compare,
    driver_process,
    infra_rows,
    overrides,
    readable_rows,
    reap,
    resume_until_clean,
    sim_config,
    unfinished_rows,
    wait_until,
)
from ray.util.state import list_actors

from harness.object_store import running_object_store
from harness.ray_nodes import RayNodes, running_cluster

BUCKET = "chaos-bench"
LEAN = "lean"
STAGE = "stage"
# Node kinds: logical CPUs and custom resources. The Lean node holds the pool (2 REPLs and a replay slot at the demo's
# 0.5 CPU each); the two stage nodes hold the stages' actors and writers (the demo reserves 5 CPUs in all).
NODE_KINDS = {LEAN: (2.0, {LEAN: 1.0}), STAGE: (2.0, {})}
STAGE_NODES = 2
HEAD_CPUS = 0
POLL_S = 0.5                   # how often the bench looks for a run's first LLM request
ACTORS_LISTED = 10_000         # more than a demo run ever holds at once


@dataclass
class NodeKill:
    """What one node removal caught."""

    moment: str                # what the kill waited for
    after_s: float             # since the driver started
    kind: str                  # lean or stage
    actors: int                # live actors the node held (0: the kill did not land)
    in_flight: int             # LLM requests received by the sim and not answered yet
    unfinished_rows: int       # candidates of written discoveries not yet written finished


def live_actors_by_node(nodes: RayNodes) -> Counter[str]:
    """The cluster's live actors per node id."""
    alive = list_actors(address=nodes.job_server, filters=[("state", "=", "ALIVE")], limit=ACTORS_LISTED)
    return Counter(actor["node_id"] for actor in alive)


def victim(nodes: RayNodes) -> tuple[str, int]:
    """The worker node holding most live actors, and how many it holds."""
    held = live_actors_by_node(nodes)
    name = max(nodes.workers, key=lambda candidate: held[nodes.node_id(candidate)])
    return name, held[nodes.node_id(name)]


def replace_node(nodes: RayNodes, kind: str, serial: int) -> None:
    num_cpus, resources = NODE_KINDS[kind]
    nodes.add_worker(f"{kind}-{serial}", num_cpus, resources)


def run_with_a_node_kill(side: Side, args: list[str], logs: Path, nodes: RayNodes, serial: int) -> NodeKill | None:
    """One driver run on the cluster, the worker node holding most live actors removed (and replaced) at the run's
    first LLM request, when every stage's actors and the Lean pool are up; the run then ends by itself. What the
    kill caught, or None when the run ended before asking anything (all its answers cached)."""
    side.runs += 1
    started = time.monotonic()
    received = side.received()
    caught = None
    with driver_process(args, logs / f"{side.name}-{side.runs:02d}.log") as driver:
        if wait_until(driver, started, lambda: side.received() > received, POLL_S):
            at_kill = side.server.stats.snapshot()  # before anything slower: what a kill now would cut off
            name, actors = victim(nodes)
            kind = name.split("-", 1)[0]
            in_flight = at_kill["in_flight"]
            rows_in_flight = unfinished_rows(side.run_dir)
            nodes.remove_worker(name)
            caught = NodeKill(f"run {side.runs}'s first LLM request", time.monotonic() - started, kind, actors,
                              in_flight, rows_in_flight)
            replace_node(nodes, kind, serial)
        driver.wait(timeout=max(POLL_S, RUN_TIMEOUT_S - (time.monotonic() - started)))
        reap(driver, [])
    side.seconds += time.monotonic() - started
    side.failed_runs += driver.returncode != 0
    side.infra_left.append(infra_rows(side.run_dir))
    return caught


def cluster_lines(reference: Side, chaos: Side, caught: list[NodeKill], figures: dict[str, Any]) -> list[str]:
    """The human part of the output."""
    lines = [
        f"cluster: head ({HEAD_CPUS} CPUs, job server), {LEAN} node {NODE_KINDS[LEAN]}, {STAGE_NODES} {STAGE} nodes "
        f"{NODE_KINDS[STAGE]}; run directory on an S3-compatible store (moto)",
        f"workload: {figures['rows']} candidates "
        f"({', '.join(f'{s}={n}' for s, n in sorted(figures['statuses'].items()))})",
        f"reference (one local Ray): {reference.runs} run(s), {reference.seconds:.0f}s, "
        f"{reference.paid()} LLM calls paid",
        f"cluster: {chaos.runs} runs ({chaos.failed_runs} ended non-zero), {chaos.seconds:.0f}s, {chaos.paid()} LLM "
        f"calls paid; error_infra rows left by each run (retried by the next): {chaos.infra_left}",
    ]
    for number, kill in enumerate(caught, start=1):
        lines.append(f"  kill {number} at {kill.moment}: {kill.after_s:4.1f}s into the run, a {kill.kind} node holding "
                     f"{kill.actors} live actors, {kill.unfinished_rows} rows and {kill.in_flight} LLM requests in "
                     f"flight; replaced by a new {kill.kind} node")
    reasons = {row["candidate_id"]: row["error"]
               for row in readable_rows(chaos.run_dir, "candidates", ["candidate_id", "error"])}
    for cid, expected, actual in figures["status_mismatch"]:
        lines.append(f"  status mismatch: {cid}: reference {expected}, cluster {actual} ({reasons.get(cid)})")
    lines += [f"  lost: {cid}" for cid in figures["lost"]] + [f"  duplicated: {i}" for i in figures["duplicated"]]
    return lines


def run_cluster_chaos(options: argparse.Namespace, work: Path, seeds: list[str], logs: Path) -> str:
    """The reference on one local Ray, then the cluster run with node kills; the human lines are printed, the last
    line returned."""
    with QuietSimServer(sim_config(0.0)) as clean, QuietSimServer(sim_config(options.llm_fault_rate)) as faulty:
        reference = Side("reference", str(work / "reference"), clean)
        resume_until_clean(reference, overrides(reference, work / "seeds", seeds, 0.0), logs)
        with running_object_store() as store, running_cluster(HEAD_CPUS, {
                f"{LEAN}-0": NODE_KINDS[LEAN], **{f"{STAGE}-{n}": NODE_KINDS[STAGE] for n in range(1, STAGE_NODES + 1)},
        }) as nodes:
            chaos = Side("cluster", f"{store.create_bucket(BUCKET)}/run", faulty)
            args = [*overrides(chaos, work / "seeds", seeds, options.repl_fault_rate),
                    f"ray.address={nodes.address}", f"lean.node_resource={LEAN}"]
            caught = []
            for serial in range(STAGE_NODES + 1, STAGE_NODES + 1 + options.kills):
                kill = run_with_a_node_kill(chaos, args, logs, nodes, serial)
                if kill is None:
                    break
                caught.append(kill)
            if infra_rows(chaos.run_dir) or chaos.failed_runs:
                resume_until_clean(chaos, args, logs)
            figures = compare(reference, chaos)
            print("\n".join(cluster_lines(reference, chaos, caught, figures)))
    landed = sum(kill.actors > 0 for kill in caught)
    return (f"lost={len(figures['lost'])} duplicated={len(figures['duplicated'])} "
            f"status_mismatch={len(figures['status_mismatch'])} llm_calls_redone={figures['llm_calls_redone']} "
            f"node_kills={landed} llm_in_flight_at_kills={sum(kill.in_flight for kill in caught)}")
