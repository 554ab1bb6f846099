"""Run a command as if on a machine whose cores are slower than this one's: same count, each `--speed` as fast.

Run (as root, on cgroup v1's cpu controller): `python benchmarks/slow_cores.py [--speed 0.5] -- COMMAND [ARGS...]`,
e.g. `python benchmarks/slow_cores.py -- python benchmarks/scale_bench.py`.

One CPU quota over the whole command would not do it: a single busy process still ran at full speed, only the total
would be capped. So the command runs in a cgroup capped at `speed` x the machine's cores, and each of its processes
(Ray's workers and actors, the Lean pool, the processes they start) is moved, as it appears, into a cgroup of its
own capped at `speed` of one core, with a short period so the cap slows it evenly rather than in long pauses. A
10-million-step Python loop then takes 1/speed as long inside as outside, alone or with every core busy. A process
runs uncapped for at most one poll (`POLL_S`) before it is moved; a process with several busy threads gets `speed` of
one core in all (a half-speed core's worth, not the cores' count of them). Against other work on the machine the
command's cgroup weighs as much as its processes would on their own (a default share each), so a loaded machine
slows it no more than it would slow it uncapped. The cgroups are removed afterwards.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

CPU_CGROUPS = Path("/sys/fs/cgroup/cpu")
PERIOD_US = 10_000  # short, so a capped process runs a few ms and waits a few ms rather than 50 ms on, 50 ms off
POLL_S = 0.02  # how often new processes are looked for and moved into a cgroup of their own
LEFT_BEHIND_S = 60  # how long processes the command left behind are waited for before its cgroups are left as they are
DEFAULT_SHARES = 1024  # cgroup v1's cpu.shares of a process on its own


def capped_cgroup(path: Path, cores: float) -> Path:
    """A cgroup at `path` whose processes share at most `cores` cores' worth of CPU time."""
    path.mkdir(exist_ok=True)
    (path / "cpu.cfs_period_us").write_text(str(PERIOD_US))
    (path / "cpu.cfs_quota_us").write_text(str(max(1000, round(PERIOD_US * cores))))
    return path


def processes_in(tree: Path) -> dict[int, Path]:
    """Every process in the cgroup `tree` or below it, with the cgroup it is in."""
    found = {}
    for folder, _, _ in os.walk(tree):
        try:
            pids = (Path(folder) / "cgroup.procs").read_text().split()
        except FileNotFoundError:
            continue
        found.update({int(pid): Path(folder) for pid in pids})
    return found


def give_each_its_own_core_share(tree: Path, speed: float) -> None:
    """Move every process under `tree` that is not yet alone in its own `p<pid>` cgroup into one capped at `speed`
    of a core; remove the cgroups of processes that have exited."""
    where = processes_in(tree)
    (tree / "cpu.shares").write_text(str(DEFAULT_SHARES * max(len(where), 1)))
    for pid, cgroup in where.items():
        own = tree / f"p{pid}"
        if cgroup != own:
            try:
                (capped_cgroup(own, speed) / "cgroup.procs").write_text(str(pid))
            except (ProcessLookupError, OSError):
                continue
    for child in tree.glob("p*"):
        if int(child.name[1:]) not in where:
            try:
                child.rmdir()
            except OSError:
                continue


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--speed", type=float, default=0.5, help="each core's speed as a share of this machine's "
                        "(%(default)s)")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="the command to run, after `--`")
    options = parser.parse_args()
    command = options.command[1:] if options.command[:1] == ["--"] else options.command
    if not command:
        parser.error("no command given (put it after `--`)")
    if not 0 < options.speed <= 1:
        parser.error(f"--speed {options.speed}: must be in (0, 1]")
    if not (CPU_CGROUPS / "cgroup.procs").is_file() or not os.access(CPU_CGROUPS, os.W_OK):
        sys.exit(f"error: {CPU_CGROUPS}: needs cgroup v1's cpu controller, writable (run as root)")
    tree = capped_cgroup(CPU_CGROUPS / f"slow-cores-{os.getpid()}", options.speed * os.cpu_count())
    child = subprocess.Popen(command, preexec_fn=lambda: (tree / "cgroup.procs").write_text(str(os.getpid())))
    try:
        while child.poll() is None:
            give_each_its_own_core_share(tree, options.speed)
            time.sleep(POLL_S)
        left_until = time.monotonic() + LEFT_BEHIND_S
        while processes_in(tree) and time.monotonic() < left_until:  # Ray's processes exit shortly after the command
            give_each_its_own_core_share(tree, options.speed)
            time.sleep(POLL_S)
    finally:
        for folder in sorted(tree.glob("p*")) + [tree]:
            try:
                folder.rmdir()
            except OSError:
                print(f"slow_cores: {folder} still holds processes; remove it once they exit", file=sys.stderr)
    sys.exit(child.returncode)


if __name__ == "__main__":
    main()
