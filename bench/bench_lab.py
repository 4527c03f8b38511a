"""Lab benchmarks: `lab up`/`lab down` of a five-host namespace lab, per-command latency over SSH on
a reused connection (sshd in namespaces), a namespace command for comparison, and lab up + deploy +
healthy per backend (netns, ssh; docker with --docker) with where the deploy time goes (prepare,
format, start, node start-up, first answer with a leader, all brokers unfenced). Prints medians.
Run as root: `.venv/bin/python bench/bench_lab.py [--docker] [--deploy-only --backends netns --rounds 5]`."""

from __future__ import annotations

import argparse
import datetime
import os
import re
import secrets
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from kraftlab.control import sshd_lab
from kraftlab.control.lab import Lab
from kraftlab.control.labs import clean, lab_down, lab_up
from kraftlab.deploy import Deployment


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.2f} ms"


def bench_netns(rounds: int) -> None:
    ups, downs = [], []
    for _ in range(rounds):
        name = "b" + secrets.token_hex(4)
        t = time.perf_counter()
        lab = lab_up(name, "netns", 5)
        ups.append(time.perf_counter() - t)
        lab.close()
        t = time.perf_counter()
        lab_down(name)
        downs.append(time.perf_counter() - t)
    print(f"netns lab up (5 hosts):   median {ms(statistics.median(ups))} over {rounds}")
    print(f"netns lab down (5 hosts): median {ms(statistics.median(downs))}")


def bench_commands(commands: int) -> None:
    name = "b" + secrets.token_hex(4)
    key_dir = Path("/run/kraftlab") / f"bench-ssh-{name}"
    lab = lab_up(name, "netns", 5)
    try:
        nodes_file = sshd_lab.start(lab, key_dir)
        ns = lab.host("n1")
        samples = []
        for _ in range(max(20, commands // 10)):
            t = time.perf_counter()
            ns.run("true", check=True)
            samples.append(time.perf_counter() - t)
        print(f"netns command (ip netns exec):      median {ms(statistics.median(samples))}")
        ssh = lab_up(name + "s", "ssh", nodes_file=str(nodes_file), accept_new_host_keys=True)
        try:
            h = ssh.host("n1")
            t = time.perf_counter()
            h.run("true", check=True)
            print(f"ssh first command (connect + auth):  {ms(time.perf_counter() - t)}")
            samples = []
            for _ in range(commands):
                t = time.perf_counter()
                h.run("true", check=True)
                samples.append(time.perf_counter() - t)
            samples.sort()
            print(f"ssh command, reused connection:      median {ms(statistics.median(samples))}, "
                  f"p95 {ms(samples[int(len(samples) * 0.95)])} over {commands} (target <= 10 ms)")
            t = time.perf_counter()
            for _ in range(20):
                ssh.run("true", check=True)
            print(f"ssh command on all 5 hosts (parallel): mean {ms((time.perf_counter() - t) / 20)}")
        finally:
            ssh.close()
            lab_down(name + "s")
    finally:
        lab.close()
        lab_down(name)
        shutil.rmtree(key_dir, ignore_errors=True)


# Deployment.timings in order, and "node start-up" (from the netns nodes' logs): spawned → every node's
# "started" line (imports, storage, listeners), which is part of "answer" (a controller names a leader)
PHASES = ("prepare", "format", "start", "node start-up", "answer", "leader", "unfenced")
STARTED = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) .*node \d+ started")


def deploy_once(lab: Lab) -> tuple[float, dict[str, float]]:
    """(seconds to a healthy cluster, seconds per deploy phase) on a lab; the cluster is killed after."""
    t = time.perf_counter()
    wall = time.time()
    d = Deployment.create(lab)
    try:
        d.deploy(wait=60)
        took, timings = time.perf_counter() - t, dict(d.timings)
        if lab.backend == "netns":
            spawned = wall + timings["prepare"] + timings["format"] + timings["start"]
            started = [started_at(d.paths(n).log) for n in d.nodes()]
            if all(x is not None for x in started):
                timings["node start-up"] = max(x for x in started if x is not None) - spawned
        return took, timings
    finally:
        d.stop_all(graceful=False)


def started_at(log: str) -> float | None:
    """The wall time of the node's "started" log line (local time, milliseconds), if it logged one."""
    for line in Path(log).read_text(errors="replace").splitlines():
        m = STARTED.match(line)
        if m:
            return datetime.datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp()
    return None


def bench_deploy(rounds: int, backends: list[str]) -> None:
    """lab up + deploy + healthy, per backend (SSH: sshd in namespaces, this machine's venv)."""
    for backend in backends:
        ups, healthy, phases = [], [], []
        for _ in range(rounds):
            name = "b" + secrets.token_hex(4)
            key_dir = Path("/run/kraftlab") / f"bench-ssh-{name}"
            t = time.perf_counter()
            base = lab_up(name, "docker" if backend == "docker" else "netns", 5)
            lab = base
            try:
                if backend == "ssh":
                    nodes = sshd_lab.start(base, key_dir, venv=sys.prefix)
                    t = time.perf_counter()  # the sshd servers stand in for VMs: not part of lab up
                    lab = lab_up(name + "s", "ssh", nodes_file=str(nodes), accept_new_host_keys=True)
                ups.append(time.perf_counter() - t)
                took, timings = deploy_once(lab)
                healthy.append(took)
                phases.append(timings)
            except Exception as exc:
                print(f"{backend}: deploy failed: {exc}")
                break
            finally:
                if lab is not base:
                    lab.close()
                    lab_down(name + "s")
                base.close()
                clean(name)
                shutil.rmtree(key_dir, ignore_errors=True)
        if healthy:
            total = [u + h for u, h in zip(ups, healthy, strict=False)]
            up, ready, both = (ms(statistics.median(x)) for x in (ups, healthy, total))
            print(f"{backend:6} lab up {up}, deploy + healthy {ready}, total median {both} "
                  f"over {len(healthy)} (5 hosts, 3 combined + 2 brokers)"
                  + (" (target <= 5 s)" if backend == "netns" else ""))
            print("       where deploy goes (medians): " + ", ".join(
                f"{p} {ms(statistics.median(t[p] for t in phases))}" for p in PHASES if all(p in t for t in phases)))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--commands", type=int, default=500)
    p.add_argument("--docker", action="store_true", help="also the Docker backend (starts dockerd if needed)")
    p.add_argument("--deploy-only", action="store_true", help="only lab up + deploy + healthy")
    p.add_argument("--backends", default="netns,ssh", help="backends to deploy on (docker is added by --docker)")
    args = p.parse_args()
    if os.geteuid() != 0:
        print("bench_lab needs root (network namespaces)", file=sys.stderr)
        return 1
    os.environ.setdefault("KRAFTLAB_STATE_DIR", tempfile.mkdtemp(prefix="kraftlab-bench-"))
    if not args.deploy_only:
        bench_netns(args.rounds)
        bench_commands(args.commands)
    engine = None
    if args.docker:
        from kraftlab.control.containers import start_engine

        engine = start_engine()
    try:
        backends = [b for b in args.backends.split(",") if b] + (["docker"] if args.docker else [])
        bench_deploy(args.rounds if args.deploy_only else max(1, args.rounds // 2), backends)
    finally:
        if engine is not None:
            from kraftlab.control.containers import stop_engine

            stop_engine(engine)
    return 0


if __name__ == "__main__":
    sys.exit(main())
