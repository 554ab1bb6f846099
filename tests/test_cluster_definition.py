"""The example cluster definition (examples/cluster/rayjob.yaml) read as Ray would see its pods: each group's Ray
resources are held against what the project asks for, so an edit of the example or of the config that would leave
Lean workers or vLLM replicas pending on the cluster fails here instead of overnight."""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

import pytest
import yaml
from omegaconf import OmegaConf

from lean_pool.pool import unplaceable_worker, worker_resources
from lean_pool.replay import ReplaySettings
from pipelines.jobs.mining import load_config

MANIFEST = Path(__file__).resolve().parent.parent / "examples" / "cluster" / "rayjob.yaml"
MINE_COMMAND = ["python", "-m", "pipelines.mine"]
LEAN_GROUP, GPU_GROUP = "lean", "gpu"
# Kubernetes quantities: binary suffixes for memory, `m` for thousandths of a CPU.
BINARY_SUFFIXES = {"Ki": 1024, "Mi": 1024**2, "Gi": 1024**3, "Ti": 1024**4}
MILLI_SUFFIX, MILLI = "m", 1000
AWS_SECRET_VARIABLES = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")


def quantity(value: Any) -> float:
    """A Kubernetes resource quantity (`224Gi`, `500m`, `8`) as a number of bytes or CPUs."""
    text = str(value)
    for suffix, factor in BINARY_SUFFIXES.items():
        if text.endswith(suffix):
            return float(text.removesuffix(suffix)) * factor
    if text.endswith(MILLI_SUFFIX):
        return float(text.removesuffix(MILLI_SUFFIX)) / MILLI
    return float(text)


def ray_node(group: dict[str, Any]) -> dict[str, float]:
    """The `Resources` Ray would list (`ray.nodes()[i]["Resources"]`) for a pod of `group`: KubeRay starts Ray with
    the container's CPU, GPU and memory limits unless rayStartParams give num-cpus / num-gpus / memory, and the
    custom resources of `resources` (a JSON object inside a JSON string, KubeRay's quoting)."""
    params = group["rayStartParams"]
    limits = group["template"]["spec"]["containers"][0]["resources"]["limits"]
    node = {"CPU": quantity(params.get("num-cpus", limits["cpu"])),
            "memory": quantity(params.get("memory", limits["memory"]))}
    gpus = quantity(params.get("num-gpus", limits.get("nvidia.com/gpu", 0)))
    if gpus:
        node["GPU"] = gpus
    if "resources" in params:
        node.update(json.loads(json.loads(params["resources"])))
    return node


def fits(node: dict[str, float], wanted: dict[str, Any]) -> int:
    """How many Lean pool workers asking for `wanted` one pod holds, by its CPUs and memory."""
    return int(min(node["CPU"] // wanted["num_cpus"], node["memory"] // wanted["memory"]))


@pytest.fixture(scope="module")
def manifest() -> dict[str, Any]:
    return yaml.safe_load(MANIFEST.read_text())


@pytest.fixture(scope="module")
def groups(manifest) -> dict[str, dict[str, Any]]:
    return {group["groupName"]: group for group in manifest["spec"]["rayClusterSpec"]["workerGroupSpecs"]}


@pytest.fixture(scope="module")
def cfg(manifest):
    """The mining config the entrypoint composes (Hydra refuses keys the project does not have)."""
    command = shlex.split(manifest["spec"]["entrypoint"])
    assert command[:len(MINE_COMMAND)] == MINE_COMMAND
    return load_config(command[len(MINE_COMMAND):])


@pytest.fixture(scope="module")
def wanted(cfg) -> dict[str, Any]:
    """What one Lean pool worker of the entrypoint's config asks Ray for. The replay's tools live in the image, so
    the settings are built from `verify` directly: only the mode and the slots size a worker."""
    replay = ReplaySettings(mode=str(cfg.verify.replay), timeout_s=float(cfg.lean.timeout_s),
                            slots_per_worker=int(cfg.verify.slots_per_worker))
    return worker_resources(OmegaConf.to_container(cfg.lean, resolve=True), replay)


def test_the_entrypoint_is_an_overnight_mining_run_with_every_required_value_set(manifest, cfg):
    assert (manifest["apiVersion"], manifest["kind"]) == ("ray.io/v1", "RayJob")
    assert OmegaConf.missing_keys(cfg) == set()  # seeds.root and lean.project_dir given
    assert (cfg.lean.backend, cfg.llm.backend, cfg.ray.address) == ("repl", "vllm", "auto")
    assert str(cfg.run_dir).startswith("s3://")


def test_lean_workers_land_on_the_lean_pods_and_all_of_them_fit(manifest, groups, cfg, wanted):
    label, lean = cfg.lean.node_resource, groups[LEAN_GROUP]
    assert label and label in ray_node(lean)
    assert unplaceable_worker(wanted, [ray_node(lean)]) is None
    assert fits(ray_node(lean), wanted) * lean["replicas"] >= cfg.lean.workers
    head = manifest["spec"]["rayClusterSpec"]["headGroupSpec"]
    elsewhere = unplaceable_worker(wanted, [ray_node(head), ray_node(groups[GPU_GROUP])])
    assert elsewhere is not None and elsewhere.startswith(f"no Ray node has the custom resource `{label}`")
    unlabelled = {**lean, "rayStartParams": {}}
    assert unplaceable_worker(wanted, [ray_node(unlabelled)]) is not None


def test_the_head_holds_no_work(manifest):
    head = manifest["spec"]["rayClusterSpec"]["headGroupSpec"]
    assert ray_node(head)["CPU"] == 0 and "GPU" not in ray_node(head)


def test_the_gpu_pods_hold_every_engine_replica(groups, cfg):
    """Each replica takes tensor x pipeline parallel GPUs on one pod (Ray Serve LLM's placement group); the pods
    hold every engine at its most replicas, placed largest first."""
    gpu = groups[GPU_GROUP]
    free = [ray_node(gpu)["GPU"]] * gpu["replicas"]
    replicas = sorted((int(engine.tensor_parallel_size) * int(engine.engine_kwargs.get("pipeline_parallel_size", 1))
                       for engine in cfg.llm.serve.engines.values()
                       for _ in range(int(engine.replicas.max))), reverse=True)
    for size in replicas:
        pod = next((index for index, gpus in enumerate(free) if gpus >= size), None)
        assert pod is not None, f"no GPU pod has {size} GPUs left for a replica ({free})"
        free[pod] -= size


def test_every_pod_reads_the_aws_credentials_from_a_secret(manifest, groups):
    cluster = manifest["spec"]["rayClusterSpec"]
    for group in [cluster["headGroupSpec"], *groups.values()]:
        for container in group["template"]["spec"]["containers"]:
            env = {variable["name"]: variable for variable in container["env"]}
            assert all("secretKeyRef" in env[name]["valueFrom"] for name in AWS_SECRET_VARIABLES), container["name"]
