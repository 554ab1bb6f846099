"""The arithmetic of a capacity plan: seed files, a mining config and per-call costs in; LLM calls and tokens per
stage, Lean checks, GPU- and CPU-hours, RAM per node and wall time out.

Costs are either stated (`plan.assumed` in conf/plan.yaml, in the funnel's words: accept shares, mean repairs) or
measured from an earlier run's tables; both become one `Costs`, so the same arithmetic serves both. Every function
here is pure (no Ray, no I/O), so `pipelines.plan` stays a thin wrapper and each figure can be checked by hand.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from lean_pool.kimina import KIMINA
from lean_pool.replay import OFF as REPLAY_OFF
from operators import discover, formalize, judge, prove, trivial
from operators.autoformalize import faithfulness
from operators.decontaminate import STAGE as DECONTAMINATE
from operators.decontaminate import benchmarks_named
from operators.pipeline import call_roles, call_stage, listed
from operators.split import SEED_DISCOVERED
from operators.stage import Stage

SECONDS_PER_HOUR = 3600.0
SIM = "sim"
VLLM = "vllm"
AFFINITY = "affinity"
# The call labels whose requests for one row repeat one prompt: a seed's discover samples, a statement's judge votes.
REPEATED_PROMPT_CALLS = (discover.STAGE, judge.STAGE)
# The call labels whose calls for one row form repair chains, each hop's prompt extending the one before
# (operators/llm/prompts.py): formalize's repairs, and each prover's proof attempts.
CHAIN_CALLS = (formalize.STAGE, prove.STAGE)


@dataclass(frozen=True)
class CallCost:
    """One LLM call stage's cost: calls per row of the stage it serves, and per call its tokens and latency."""

    calls_per_row: float
    prompt_tokens: float
    completion_tokens: float
    latency_s: float


@dataclass(frozen=True)
class Costs:
    """What a mining run costs per unit of work, whatever it was learned from (`source`): candidates per discover
    call, the share of candidates each stage after discover takes in, each call's cost (discover's prompt leaves
    out the seed text), Lean checks per row of each Lean stage, replays per candidate, seconds per check and replay;
    and the two times no amount of hardware shortens: the start-up before the first LLM request, and the longest
    path one candidate takes through its calls and checks, one after another (the run's last candidate ends it); and
    the sub-goal candidates each candidate's failed proofs give (`subgoals`), which go through the same funnel; and the
    header imports per check a run measured (`imports_per_check`; None when not measured): REPLs switch headers as
    seeds with other imports come, and each switch costs an import."""

    source: str
    candidates_per_unit: float
    row_shares: Mapping[str, float]
    calls: Mapping[str, CallCost]
    checks_per_row: Mapping[str, float]
    replays_per_candidate: float
    lean_check_s: float
    replay_s: float
    startup_s: float
    path_s: float
    subgoals_per_candidate: float = 0.0
    imports_per_check: float | None = None


@dataclass(frozen=True)
class MiningShape:
    """What the plan reads from the mining config: the method's budgets and switches, the Lean pool's shape, how
    many rows each stage keeps in flight (its actors' concurrency, capped by its endpoints' concurrency), and what
    the simulators state of themselves: the LLM sim's capacity (requests served at once) and mean service seconds
    per call stage, the Lean sim's seconds per check and per header import (None for real backends, whose speed
    the plan takes from conf/plan.yaml or an earlier run); which stage's rows each LLM call label serves, the stages
    that take candidates and those that check Lean, in pipeline order (all from the stages' declarations); the
    discover rounds, and the sub-goal levels mined (0: off) with the goals mined per failed candidate; and per call
    label, over how many engine replicas the requests of one cache key spread (`key_spread`, `replicas_per_key`; a
    label not named: 1)."""

    samples_per_seed: int
    min_lemmas: int
    judge_samples: int
    formalize_max_repairs: int
    diagnose: bool
    dedup: bool
    decontaminate: bool
    faithfulness: bool
    include_trivial: bool
    prove_max_repairs: int
    provers: int
    replay: bool
    lean_workers: int
    repls_per_worker: int
    repl_num_cpus: float
    repl_memory_gb: float
    repl_max_uses: int
    replay_slots_per_worker: int
    llm_on_cluster: bool
    stage_slots: Mapping[str, int]
    row_stage_of_call: Mapping[str, str]
    candidate_stages: tuple[str, ...]
    lean_stages: tuple[str, ...]
    endpoint_capacity: int | None
    service_s: Mapping[str, float]
    lean_sim_costs: tuple[float, float] | None
    rounds: int = 1
    subgoal_levels: int = 0
    subgoal_max_per_candidate: int = 0
    key_spread: Mapping[str, int] = field(default_factory=dict)

    @property
    def passes(self) -> int:
        """The passes a run makes one after another, each ending with its slowest candidate's path: per round, its
        seeds' candidates and then each sub-goal level."""
        return self.rounds * (1 + self.subgoal_levels)

    @property
    def processes_per_worker(self) -> int:
        """Lean processes a pool worker reserves for: its REPLs, and its replay slots when replaying."""
        return self.repls_per_worker + (self.replay_slots_per_worker if self.replay else 0)


@dataclass(frozen=True)
class Cluster:
    """The machines a run is planned for, and what they serve: tokens per second per GPU, the header import's
    seconds, and the RAM a node needs besides its REPLs. `nodes` are those the Lean pool spreads over (the ones
    labelled with `lean.node_resource` on a cluster that labels them), with any GPUs of their own; `gpu_nodes` hold
    only LLM engines, so a cluster of Lean nodes and GPU nodes is planned as it runs."""

    nodes: int
    cpus_per_node: int
    gpus_per_node: int
    memory_gb_per_node: float
    gpu_nodes: int
    gpus_per_gpu_node: int
    prompt_tokens_per_s: float
    completion_tokens_per_s: float
    lean_import_s: float
    node_overhead_gb: float

    @property
    def gpus(self) -> int:
        """Every GPU the LLM engines can use: the Lean nodes' and the GPU nodes'."""
        return self.nodes * self.gpus_per_node + self.gpu_nodes * self.gpus_per_gpu_node


@dataclass(frozen=True)
class StageLoad:
    """One LLM call stage's total: calls, tokens sent and written, the prompt tokens the engines compute (`prefill`:
    those sent less those a replica's prefix cache already holds) and the seconds its calls take (summed latency)."""

    calls: float
    prompt_tokens: float
    completion_tokens: float
    llm_seconds: float
    prefill_tokens: float


@dataclass(frozen=True)
class Workload:
    """The work a run will do: discover calls, candidates, rows entering each stage after discover, LLM calls
    per call, Lean checks per Lean stage and replays."""

    units: int
    candidates: float
    rows: Mapping[str, float]
    calls: Mapping[str, StageLoad]
    checks: Mapping[str, float]
    replays: float

    @property
    def lean_checks(self) -> float:
        """Every Lean check: the stages' checks and the replays (as the candidates' `lean_checks` count them)."""
        return sum(self.checks.values()) + self.replays


@dataclass(frozen=True)
class Resources:
    """What the workload needs of a cluster: GPU- and CPU-hours, RAM and CPUs reserved per node, how many REPLs a
    node could hold, the wall-time bound each resource or stage sets (seconds; the largest sets the wall time), and
    the start-up and last path around them."""

    gpu_hours: float
    cpu_hours: float
    ram_gb_per_node: float
    cpus_reserved_per_node: float
    repls_that_fit_per_node: int
    bounds_s: Mapping[str, float]
    startup_s: float
    path_s: float

    @property
    def wall_s(self) -> float:
        """The run's wall time if every stage streams into the next: its start-up, the slowest bound, and the last
        candidate's path, which runs after everything else is done."""
        return self.startup_s + max(self.bounds_s.values()) + self.path_s

    @property
    def bottleneck(self) -> str:
        """The resource or stage that sets the wall time."""
        return max(self.bounds_s, key=self.bounds_s.__getitem__)


def running_stages(cfg: Mapping[str, Any]) -> tuple[Stage, ...]:
    """The stages a mining run of `cfg` executes, in pipeline order (their declarations; the order is checked when
    the run starts)."""
    return tuple(stage for stage in listed(cfg) if stage.runs(cfg))


def mining_shape(cfg: Mapping[str, Any]) -> MiningShape:
    """The plan's view of a composed mining config (`conf/mine.yaml` with its overrides)."""
    llm, lean = cfg["llm"], cfg["lean"]
    provers = tuple(llm["provers"])
    stages = running_stages(cfg)

    def slots(stage: Stage) -> int:
        resources = stage.resources_of(cfg)
        in_flight = resources.rows_in_flight if resources else 1
        asked = {role for roles in call_roles([stage], provers).values() for role in roles}
        endpoints = [llm["endpoints"][llm["models"][role]["endpoint"]] for role in sorted(asked)]
        return min([in_flight, *(int(endpoint["concurrency"]) for endpoint in endpoints)])

    candidate_stages = tuple(stage.name for stage in stages if not stage.takes & {SEED_DISCOVERED}
                             and stage.name != discover.STAGE)
    return MiningShape(
        samples_per_seed=int(cfg["discover"]["samples_per_seed"]),
        min_lemmas=int(cfg["discover"]["min_lemmas"]),
        judge_samples=int(cfg["judge"]["samples"]),
        formalize_max_repairs=int(cfg["formalize"]["max_repairs"]),
        diagnose=bool(cfg["formalize"]["diagnose"]),
        dedup=bool(cfg["dedup"]["enabled"]),
        decontaminate=benchmarks_named(cfg),
        faithfulness=bool(cfg["faithfulness"]["enabled"]),
        include_trivial=bool(cfg["prove"]["include_trivial"]),
        prove_max_repairs=int(cfg["prove"]["max_repairs"]),
        provers=len(provers),
        replay=cfg["verify"]["replay"] != REPLAY_OFF,
        lean_workers=int(lean["workers"]),
        repls_per_worker=int(lean["repls_per_worker"]),
        repl_num_cpus=float(lean["resources_per_repl"]["num_cpus"]),
        repl_memory_gb=float(lean["resources_per_repl"]["memory_gb"]),
        repl_max_uses=int(lean["max_uses"]),
        replay_slots_per_worker=int(cfg["verify"]["slots_per_worker"]),
        llm_on_cluster=llm["backend"] == "vllm",
        stage_slots={stage.name: slots(stage) for stage in stages if stage.calls_llm or stage.checks_lean},
        row_stage_of_call=call_stage(stages),
        candidate_stages=candidate_stages,
        lean_stages=tuple(stage.name for stage in stages if stage.checks_lean),
        endpoint_capacity=int(llm["sim"]["capacity"]) if llm["backend"] == SIM else None,
        service_s=sim_service_s(llm["sim"]["latency"], call_stage(stages)) if llm["backend"] == SIM else {},
        lean_sim_costs=(float(lean["sim"]["check_s"]), float(lean["sim"]["import_s"])) if lean["backend"] == SIM
        else None,
        rounds=int(cfg["rounds"]),
        subgoal_levels=int(cfg["subgoals"]["max_depth"]) if cfg["subgoals"]["enabled"] else 0,
        subgoal_max_per_candidate=int(cfg["subgoals"]["max_per_candidate"]),
        key_spread={label: max(replicas_per_key(llm, role) for role in roles)
                    for label, roles in call_roles(stages, provers).items() if roles},
    )


def replicas_per_key(llm: Mapping[str, Any], role: str) -> int:
    """Over how many replicas the requests of one cache key to `role`'s model spread: 1 when they stay on one (affinity
    routing, or one replica), else every replica (round robin). llm=vllm: the model's engine's `replicas.max` and
    `llm.serve.router.routing`; another backend: the endpoint's `base_urls` and `routing`."""
    model = llm["models"][role]
    if llm["backend"] == VLLM:
        replicas, routing = int(llm["serve"]["engines"][model["model"]]["replicas"]["max"]), llm["serve"]["router"]
    else:
        endpoint = llm["endpoints"][model["endpoint"]]
        replicas, routing = len(endpoint["base_urls"] or [None]), endpoint
    return 1 if routing["routing"] == AFFINITY else replicas


def stated_subgoals(shape: MiningShape, proved_rows: float, proved_share: float, per_failed_proof: float) -> float:
    """Sub-goal candidates per candidate when sub-goals are mined: each candidate that reached the provers
    (`proved_rows` of them) and failed gives `per_failed_proof` goals, at most `subgoals.max_per_candidate`."""
    if not shape.subgoal_levels:
        return 0.0
    return proved_rows * (1.0 - proved_share) * min(per_failed_proof, shape.subgoal_max_per_candidate)


def sim_service_s(latency: Mapping[str, Any], labels: Iterable[str]) -> dict[str, float]:
    """The LLM sim's mean service seconds per call label of `labels`: the mean of its log-normal latency around each
    label's median."""
    spread = math.exp(float(latency["sigma"]) ** 2 / 2)
    return {label: float(latency["by_call"].get(label, latency["median_s"])) * spread for label in labels}


def stated_funnel(assumed: Mapping[str, Any], shape: MiningShape) -> tuple[dict[str, float], float]:
    """The share of candidates each candidate stage takes in, by the assumed shares of the stages before it, and
    the share that reaches the provers. A stage the funnel does not know (one a pipeline adds) is assumed to keep
    every row: it takes in what the next known stage takes in."""
    running = set(shape.candidate_stages)
    judged = 1.0 - float(assumed["duplicate_share"]) if shape.dedup else 1.0
    formalized = judged * float(assumed["judge_accept_share"]) if judge.STAGE in running else judged
    compiled = formalized * float(assumed["compiled_share"])
    kept = compiled * float(assumed["faithful_share"]) if faithfulness.STAGE in running else compiled
    trivial_kept = shape.include_trivial or trivial.STAGE not in running
    proved_rows = kept if trivial_kept else kept * (1.0 - float(assumed["trivial_share"]))
    known = {DECONTAMINATE: judged, judge.STAGE: judged, formalize.STAGE: formalized, faithfulness.STAGE: compiled,
             trivial.STAGE: kept, prove.STAGE: proved_rows}
    shares: dict[str, float] = {}
    following = proved_rows
    for stage in reversed(shape.candidate_stages):
        following = known.get(stage, following)
        shares[stage] = following
    return {stage: shares[stage] for stage in shape.candidate_stages}, proved_rows


def stated_costs(assumed: Mapping[str, Any], shape: MiningShape) -> Costs:
    """Costs from the assumed costs (`plan.assumed`) and the config's budgets: repairs and proof attempts are
    capped at T and K + 1, judge calls are `judge.samples`, stages the pipeline does not run take no rows, and a
    stage it adds makes one call per label (`plan.assumed.llm.other` unless named) and one Lean check per row."""
    repairs = min(float(assumed["repairs_per_statement"]), shape.formalize_max_repairs)
    attempts = shape.provers * min(float(assumed["proof_attempts_per_statement"]), shape.prove_max_repairs + 1)
    row_shares, proved_rows = stated_funnel(assumed, shape)
    method = {discover.STAGE: 1.0, judge.STAGE: float(shape.judge_samples), formalize.STAGE: repairs,
              formalize.DIAGNOSE_CALL: repairs if shape.diagnose else 0.0,
              faithfulness.DECOMPOSE_CALL: 1.0, faithfulness.STAGE: 1.0, prove.STAGE: attempts}
    per_row = {label: method.get(label, 1.0) for label in shape.row_stage_of_call}
    llm = assumed["llm"]
    stated = {label: llm[label] if label in llm else llm["other"] for label in per_row}
    latency = {label: shape.service_s.get(label, float(stated[label]["latency_s"])) for label in per_row}
    check_s = shape.lean_sim_costs[0] if shape.lean_sim_costs else float(assumed["lean_check_s"])
    longest_attempts = shape.prove_max_repairs + 1
    path_calls = (shape.judge_samples * latency.get(judge.STAGE, 0.0)
                  + shape.formalize_max_repairs * (latency.get(formalize.STAGE, 0.0)
                                                   + (latency.get(formalize.DIAGNOSE_CALL, 0.0) if shape.diagnose
                                                      else 0.0))
                  + longest_attempts * latency.get(prove.STAGE, 0.0))
    checks = {formalize.STAGE: 1.0 + repairs, trivial.STAGE: 1.0, prove.STAGE: attempts}
    path_checks = sum({formalize.STAGE: 1 + shape.formalize_max_repairs, prove.STAGE: longest_attempts}.get(stage, 1)
                      for stage in shape.lean_stages)
    return Costs(
        source="assumed costs (conf/plan.yaml plan.assumed)",
        candidates_per_unit=shape.min_lemmas * float(assumed["candidates_per_lemma_asked"]),
        row_shares={stage: share if stage != DECONTAMINATE or shape.decontaminate else 0.0
                    for stage, share in row_shares.items()},
        calls={label: CallCost(per_row[label], float(stated[label]["prompt_tokens"]),
                               float(stated[label]["completion_tokens"]), float(stated[label]["latency_s"]))
               for label in per_row},
        checks_per_row={stage: checks.get(stage, 1.0) for stage in shape.lean_stages},
        replays_per_candidate=proved_rows * shape.provers * float(assumed["proved_share"]) if shape.replay else 0.0,
        lean_check_s=float(assumed["lean_check_s"]),
        replay_s=float(assumed["replay_s"]),
        startup_s=float(assumed["startup_s"]),
        path_s=path_calls + path_checks * check_s,
        subgoals_per_candidate=stated_subgoals(shape, proved_rows, float(assumed["proved_share"]),
                                               float(assumed["subgoals_per_failed_proof"])),
    )


def workload(seed_tokens: Sequence[int], shape: MiningShape, costs: Costs) -> Workload:
    """The work of mining seeds whose estimated token counts are `seed_tokens` (the seeds that fit the model):
    `samples_per_seed` discover calls each per round, the candidates they give and the sub-goals of each level (each
    level `subgoals_per_candidate` times the one before), then each stage's rows, calls and checks at the given
    costs. Later rounds are counted as the first, though their dedup drops more."""
    units = len(seed_tokens) * shape.samples_per_seed * shape.rounds
    levels = sum(costs.subgoals_per_candidate ** level for level in range(1, shape.subgoal_levels + 1))
    candidates = units * costs.candidates_per_unit * (1.0 + levels)
    rows = {discover.STAGE: float(units), **{stage: candidates * share for stage, share in costs.row_shares.items()}}
    seed_prompt = float(sum(seed_tokens) * shape.samples_per_seed * shape.rounds)
    loads = {}
    for stage, cost in costs.calls.items():
        calls = rows.get(shape.row_stage_of_call[stage], 0.0) * cost.calls_per_row
        prompt_tokens = calls * cost.prompt_tokens + (seed_prompt if stage == discover.STAGE else 0.0)
        loads[stage] = StageLoad(calls, prompt_tokens, calls * cost.completion_tokens, calls * cost.latency_s,
                                 prompt_tokens * computed_share(stage, cost, shape))
    checks = {stage: rows[stage] * per_row for stage, per_row in costs.checks_per_row.items()}
    return Workload(units, candidates, rows, loads, checks, candidates * costs.replays_per_candidate)


def computed_share(label: str, cost: CallCost, shape: MiningShape) -> float:
    """The share of a call label's prompt tokens the engines compute (prefill), the rest read from a replica's
    prefix cache. A prompt repeated for one row (a seed's samples, a statement's votes) is computed once on each
    replica its cache key reaches. A repair chain's hops each extend the one before: on one replica the chain's
    tokens are computed once, as long as its last hop's prompt; the plan takes the hops to grow evenly, each by about
    the first's length (a failed attempt and its errors), so h hops of mean prompt p end at 2hp/(h+1) of the hp
    sent; spread over replicas, each hop is computed whole. Any other call is computed whole."""
    spread = shape.key_spread.get(label, 1)
    if label in REPEATED_PROMPT_CALLS:
        repeats = shape.samples_per_seed if label == discover.STAGE else cost.calls_per_row
        return min(repeats, spread) / repeats if repeats > 1 else 1.0
    if label in CHAIN_CALLS and spread == 1:
        hops = cost.calls_per_row / (shape.provers if label == prove.STAGE else 1)
        return 2.0 / (hops + 1.0) if hops > 1 else 1.0
    return 1.0


def lean_speeds(shape: MiningShape, costs: Costs, cluster: Cluster) -> tuple[float, float]:
    """Seconds of one Lean check and of one header import: the Lean sim's own, else the costs' and the cluster's."""
    return shape.lean_sim_costs or (costs.lean_check_s, cluster.lean_import_s)


def resources(work: Workload, costs: Costs, shape: MiningShape, cluster: Cluster) -> Resources:
    """What `work` needs of `cluster`. Wall time assumes every stage streams into the next, so the slowest of
    these bounds sets it: the Lean pool (check seconds over its REPLs, after one header import; with the Lean sim's
    stated seconds, also the header switches the run measured, which a real backend's measured seconds per check
    hold already), the replay slots, the GPUs (only when the LLM engines run on the cluster), the LLM sim's capacity
    (its service seconds over the requests it serves at once), and each stage (its LLM and Lean seconds over the rows
    it keeps in flight). The GPUs' time counts the prompt tokens they compute (prefill) and those they write. The Lean
    sim's own check and import seconds replace the measured or stated ones."""
    prefill_tokens = sum(load.prefill_tokens for load in work.calls.values())
    completion_tokens = sum(load.completion_tokens for load in work.calls.values())
    gpu_seconds = prefill_tokens / cluster.prompt_tokens_per_s + completion_tokens / cluster.completion_tokens_per_s
    check_s, import_s = lean_speeds(shape, costs, cluster)
    repls = shape.lean_workers * shape.repls_per_worker
    checks = sum(work.checks.values())
    imports = repls + checks / shape.repl_max_uses
    if shape.lean_sim_costs and costs.imports_per_check is not None:
        imports = max(imports, checks * costs.imports_per_check)
    check_seconds = checks * check_s
    replay_seconds = work.replays * costs.replay_s
    workers_per_node = math.ceil(shape.lean_workers / cluster.nodes)
    replay_slots = shape.replay_slots_per_worker if shape.replay else 0
    repls_per_node = workers_per_node * shape.processes_per_worker
    bounds = {"lean pool": (check_seconds + (imports - repls) * import_s) / repls + import_s}
    if shape.replay:
        bounds["replay"] = replay_seconds / (shape.lean_workers * replay_slots)
    if shape.llm_on_cluster and cluster.gpus > 0:
        bounds["GPUs"] = gpu_seconds / cluster.gpus
    if shape.endpoint_capacity:
        bounds["LLM sim"] = sum(load.calls * shape.service_s[stage] for stage, load in work.calls.items()
                                ) / shape.endpoint_capacity
    for stage, slots in shape.stage_slots.items():
        llm_seconds = sum(load.llm_seconds for call, load in work.calls.items()
                          if shape.row_stage_of_call[call] == stage)
        busy = llm_seconds + work.checks.get(stage, 0.0) * check_s
        if busy > 0:
            bounds[f"stage {stage}"] = busy / slots
    return Resources(
        gpu_hours=gpu_seconds / SECONDS_PER_HOUR,
        cpu_hours=(check_seconds + replay_seconds + imports * import_s) / SECONDS_PER_HOUR,
        ram_gb_per_node=repls_per_node * shape.repl_memory_gb + cluster.node_overhead_gb,
        cpus_reserved_per_node=repls_per_node * shape.repl_num_cpus,
        repls_that_fit_per_node=int(min(cluster.cpus_per_node / shape.repl_num_cpus,
                                        (cluster.memory_gb_per_node - cluster.node_overhead_gb)
                                        / shape.repl_memory_gb)),
        bounds_s=bounds,
        startup_s=costs.startup_s,
        path_s=costs.path_s * shape.passes,
    )


def streaming_cpus(cfg: Mapping[str, Any], waves: int) -> dict[str, float]:
    """The logical CPUs Ray must hold at once for a run of `waves` mining waves to stream, by part: each stage's
    actors and a writer, once per wave running at once (`ray.waves_in_flight`, at most `waves`), and the Lean pool's
    workers they share (their
    REPLs, and their replay slots when replaying; nothing with `lean=kimina`, whose server is not on Ray). Ray Data
    starts every stage's actors when a wave starts; those that do not fit wait until an earlier stage has finished
    and let its actors go, so stages run one after another."""
    at_once = min(int(cfg["ray"]["waves_in_flight"]), waves)
    needs = {}
    for stage in running_stages(cfg):
        resources = stage.resources_of(cfg)
        if resources is not None:
            needs[stage.name] = at_once * resources.actors * resources.num_cpus
    needs["writer"] = at_once * float(cfg["output"]["writer_num_cpus"])
    if cfg["lean"]["backend"] != KIMINA:
        shape = mining_shape(cfg)
        needs["lean pool"] = shape.lean_workers * shape.processes_per_worker * shape.repl_num_cpus
    return needs


def streaming_shortfall(needs: Mapping[str, float], cluster_cpus: float) -> str | None:
    """What to tell the user when a cluster of `cluster_cpus` logical CPUs cannot hold the plan's `needs`
    (`streaming_cpus`) at once, or None when it can."""
    total = sum(needs.values())
    if total <= cluster_cpus:
        return None
    parts = ", ".join(f"{name} {cpus:g}" for name, cpus in needs.items())
    return (f"the mining waves reserve {total:g} logical CPUs at once ({parts}) but Ray has {cluster_cpus:g}: Ray Data "
            f"would start a stage's actors only as others leave, and such a run can stall for good; start Ray with "
            f"more logical CPUs (ray.num_cpus=N: the stages mostly wait on the network) or lower the stages' "
            f"resources.num_cpus, ray.waves_in_flight or lean.resources_per_repl.num_cpus")
