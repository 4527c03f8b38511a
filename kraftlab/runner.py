"""The test lifecycle of `kraftlab test`: one run, from a lab to a verdict.

1. open the hosts (a fresh lab of the chosen backend, torn down after the run, or `--lab NAME`);
2. deploy the node (render server.properties, format, start, wait until healthy);
3. run the workload's generator with the nemesis schedule firing, streaming the history;
4. heal everything, wait for the cluster to recover, run the final reads on every broker;
5. collect every node's logs and journals;
6. check (`results.json`), render `report.html`, and return the exit code.

Every exit path heals the nemesis and stops what the run started (`--leave-running` keeps the
cluster and its lab up). A run killed outright leaves a history that `kraftlab analyze` checks
and leftovers that `kraftlab clean` removes.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import random
import secrets
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kraftlab.checking import check_run, exit_code
from kraftlab.config_swarm import draw_config
from kraftlab.control.lab import Lab
from kraftlab.control.labs import lab_down, lab_up, load_lab
from kraftlab.deploy import (
    BROKER_PORT,
    CONTROLLER_PORT,
    DEFAULT_PROPERTIES,
    DEFAULT_TOPOLOGY,
    METRICS_PORT,
    QUORUMS,
    SASL_PORT,
    TOPOLOGIES,
    Deployment,
)
from kraftlab.nemesis import schedule as nemesis_schedule
from kraftlab.nemesis.core import Nemesis
from kraftlab.nemesis.package import Timing
from kraftlab.nemesis.runner import guarded
from kraftlab.nemesis.session import history_recorder, prepare_run, quorum_for
from kraftlab.progress import ProgressDisplay, Snapshot
from kraftlab.recovery import RECOVERY_FILE, recovery_bound, wait_recovered
from kraftlab.report import render
from kraftlab.scrape import MetricsScraper
from kraftlab.store import DEFAULT_STORE, RunDir, new_run, write_json
from kraftlab.topology_swarm import draw_topology, topology_of
from kraftlab.workloads import catalog
from kraftlab.workloads.generator import TimeLimit
from kraftlab.workloads.history import HistoryWriter
from kraftlab.workloads.interpreter import PhaseStats, ProcessIds, run_phase

log = logging.getLogger(__name__)


@dataclass
class TestOptions:
    workload: str = "mixed"
    nemesis: str = "partition,kill,clock"
    time_limit: float = 60.0
    seed: int | None = None
    nodes: int = 5
    topology: str | None = DEFAULT_TOPOLOGY
    """None: drawn per seed among the shapes the lab's hosts allow (kraftlab.topology_swarm), or, for a
    replayed schedule, the shape it ran on."""
    concurrency: int | None = None  # default: 2 per node
    rate: float = 10.0  # ops/s per process
    nemesis_interval: float | None = None  # None: each package's own gap, from the node's timeouts
    swarm: bool = True
    availability: float | None = None
    """Opt-in: a client on the majority side must succeed within this many seconds of each fault
    starting (the `availability` checker); None: availability is not judged."""
    recovery_time: float | None = None  # None: derived from the node's timeouts (kraftlab.recovery)
    op_timeout: float = 5.0
    backend: str = "netns"
    lab: str | None = None
    nodes_file: str | None = None
    accept_new_host_keys: bool = False
    leave_running: bool = False
    replay_nemesis: str | None = None
    name: str | None = None
    store: Path = DEFAULT_STORE
    config: dict[str, str] = field(default_factory=dict)  # extra server.properties keys
    config_swarm: bool = False
    """Draw, per seed, the keys of kraftlab.config_swarm's table that `config` leaves open (the CLI's
    default; programmatic runs — the zoo's recipes, timed to the defaults — keep the node's defaults)."""
    diskfs: bool = False  # metadata directories on the disk-fault filesystem: a kill is a power loss
    quorum: str | None = None
    """`static` or `dynamic` (KIP-853); None: dynamic when the nemesis names `membership` (or the
    replayed schedule ran on a dynamic quorum), else static."""

    def test_name(self) -> str:
        return self.name or f"{self.workload}-{self.nemesis.replace(',', '+') or 'none'}"


def client_addresses(dep: Deployment) -> dict[str, dict[str, str | None]]:
    return {s.name: {"broker": f"{s.address}:{BROKER_PORT}" if s.broker else None,
                     "controller": f"{s.address}:{CONTROLLER_PORT}" if s.controller else None,
                     "sasl": f"{s.address}:{SASL_PORT}" if s.broker else None}
            for s in dep.state.specs}


DEPLOY_WAIT_S = 60.0
"""How long a fresh deploy may take to be healthy (a deploy that never is means the run cannot start)."""


class _Live:
    """What the progress display shows."""

    def __init__(self, limit: float) -> None:
        self.phase = "setup"
        self.started = time.monotonic()
        self.limit = limit
        self.stats = PhaseStats()
        self.nemesis: Nemesis | None = None

    def snapshot(self) -> Snapshot:
        faults: list[str] = []
        if self.nemesis is not None:
            with contextlib.suppress(Exception):
                faults = sorted(str(k) for k in self.nemesis.status())
        return Snapshot(self.phase, time.monotonic() - self.started, self.limit, self.stats.ok,
                        self.stats.fail, self.stats.info, faults)


def _open_lab(opts: TestOptions) -> tuple[Lab, bool]:
    """(lab, created here)."""
    if opts.lab:
        return load_lab(opts.lab), False
    name = f"kl{secrets.token_hex(3)}"
    options: dict[str, Any] = {}
    if opts.backend == "ssh":
        options = {"nodes_file": opts.nodes_file, "accept_new_host_keys": opts.accept_new_host_keys}
    elif opts.backend == "vagrant":
        options = {"accept_new_host_keys": opts.accept_new_host_keys}
    elif opts.backend == "docker" and opts.diskfs:  # holders that serve the disk-fault filesystem
        options = {"diskfs": True}
    return lab_up(name, opts.backend, opts.nodes, **options), True


class BadArguments(ValueError):
    """The test's arguments cannot work; nothing was started."""


def validate(opts: TestOptions) -> None:
    """Raise BadArguments saying what is wrong with `opts`, before anything starts."""
    if opts.workload not in catalog.WORKLOADS:
        raise BadArguments(f"unknown workload {opts.workload!r}; one of {', '.join(catalog.WORKLOADS)}")
    try:
        nemesis_schedule.parse_packages(opts.nemesis)
    except ValueError as exc:
        raise BadArguments(str(exc)) from None
    if opts.lab is None and opts.backend == "ssh" and not opts.nodes_file:
        raise BadArguments("--backend ssh needs --nodes-file (or --lab NAME of a lab made with `lab up`)")
    if opts.replay_nemesis and not (Path(opts.replay_nemesis) / "nemesis-schedule.json").is_file():
        raise BadArguments(f"--replay-nemesis: {opts.replay_nemesis} has no nemesis-schedule.json")
    if opts.quorum not in (None, *QUORUMS):
        raise BadArguments(f"unknown quorum {opts.quorum!r}; one of {', '.join(QUORUMS)}")
    if opts.quorum == "static" and quorum_for(opts.nemesis) == "dynamic":
        raise BadArguments("--nemesis membership changes voters: it needs a dynamic quorum (drop --quorum static)")
    if opts.topology is not None and opts.topology not in TOPOLOGIES:
        raise BadArguments(f"unknown topology {opts.topology!r}; one of {', '.join(TOPOLOGIES)}")
    if opts.nodes < 1 or (opts.concurrency is not None and opts.concurrency < 1):
        raise BadArguments("--nodes and --concurrency must be at least 1")


def run_test(opts: TestOptions) -> tuple[int, RunDir]:
    """Run one test; returns (exit code, run directory). Raises BadArguments before starting
    anything if the arguments cannot work."""
    validate(opts)
    seed = opts.seed if opts.seed is not None else random.randrange(2**31)
    drawn: dict[str, Any] = {}  # what the seed drew because the options left it open (test.json → drawn)
    if opts.config_swarm and (config := draw_config(_config_seed(opts, seed), opts.config)):
        drawn["config"] = config
    opts = dataclasses.replace(opts, seed=seed, config={**drawn.get("config", {}), **opts.config})
    run = new_run(opts.test_name(), {**{k: (str(v) if isinstance(v, Path) else v)
                                        for k, v in dataclasses.asdict(opts).items()}, "drawn": drawn},
                  store=opts.store)
    logging.basicConfig(filename=run.path / "runner.log", level=logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s", force=True)
    history = HistoryWriter(run.history)
    live = _Live(opts.time_limit)
    lab: Lab | None = None
    created = False
    dep: Deployment | None = None
    scraper: MetricsScraper | None = None
    crashed: BaseException | None = None
    try:
        with ProgressDisplay(live.snapshot) as progress:
            stop_ticker = threading.Event()

            def tick() -> None:
                while not stop_ticker.wait(0.25):
                    progress.refresh()

            ticker = threading.Thread(target=tick, daemon=True)
            ticker.start()
            try:
                live.phase = "lab"
                lab, created = _open_lab(opts)
                run.update_test(lab=lab.name, lab_created=created)
                live.phase = "deploy"
                quorum = opts.quorum or quorum_for(opts.nemesis, _replayed(opts))
                topology, by_seed = resolve_topology(opts, len(lab.addresses()))
                opts = dataclasses.replace(opts, topology=topology)
                if by_seed:
                    drawn["topology"] = topology
                run.update_test(topology=topology, drawn=drawn)
                dep = Deployment.create(lab, topology, opts.config, run_dir=run.path, diskfs=opts.diskfs,
                                        quorum=quorum)
                run.update_test(cluster_id=dep.state.cluster_id,
                                nodes_roles={s.name: list(s.roles) for s in dep.state.specs}, quorum=quorum,
                                spare_controllers=dep.spare_controllers(),
                                node_ids={s.name: s.node_id for s in dep.state.specs})
                dep.deploy(wait=opts.recovery_time or DEPLOY_WAIT_S)
                scraper = MetricsScraper({s.name: f"{s.address}:{METRICS_PORT}" for s in dep.state.specs},
                                         run.metrics, history.now).start()
                _run_phases(opts, run, history, dep, scraper, live)
            finally:
                stop_ticker.set()
                ticker.join()
    except BaseException as exc:  # recorded: the run still ends in a verdict and a report
        crashed = exc
        log.exception("run crashed")
    finally:
        if scraper is not None:
            scraper.stop()
        history.close()
        if dep is not None:
            with contextlib.suppress(Exception):
                dep.collect(run.nodes)
            if not opts.leave_running:
                with contextlib.suppress(Exception):
                    dep.stop_all(graceful=False)
                with contextlib.suppress(Exception):
                    dep.unmount_disks()
        if lab is not None and created and not opts.leave_running:
            with contextlib.suppress(Exception):
                lab_down(lab.name)
    results = check_run(run, session_timeout_ms=session_timeout_ms(opts.config))
    if crashed is not None:
        if results.get("valid") is not False:  # an invalid history is still a finding
            results["valid"] = "unknown"
        how = "was interrupted" if isinstance(crashed, KeyboardInterrupt) else "crashed"
        results.setdefault("notes", []).append(f"the run {how}: {type(crashed).__name__}: {crashed}")
        write_json(run.results, results)
    render(run)
    if isinstance(crashed, KeyboardInterrupt):  # Ctrl-C (or SIGTERM, see kraftlab.cli): stop the caller too
        raise RunInterrupted(run.path) from crashed
    if crashed is not None and results.get("valid") is not False:
        return 255, run
    return exit_code(results.get("valid")), run


class RunInterrupted(KeyboardInterrupt):
    """A run stopped by an interrupt: its partial history was still checked and reported (at
    `run_dir`), and the interrupt goes on to whatever loop called the run (zoo, matrix)."""

    def __init__(self, run_dir: Path) -> None:
        super().__init__(f"interrupted; the partial run's verdict and report are in {run_dir}")
        self.run_dir = run_dir


def resolve_topology(opts: TestOptions, hosts: int) -> tuple[str, bool]:
    """(the topology the run deploys on `hosts` hosts, whether its seed drew it): the one the options
    name; else the one a replayed schedule ran on; else the seed's draw (kraftlab.topology_swarm)."""
    if opts.topology is not None:
        return opts.topology, False
    if (replayed := _replayed(opts)) is not None:
        schedule = nemesis_schedule.load(replayed)
        if (shape := topology_of(schedule.nodes, schedule.controllers, schedule.brokers, schedule.quorum)) is not None:
            return shape, False
    assert opts.seed is not None
    return draw_topology(opts.seed, hosts), True


def _config_seed(opts: TestOptions, seed: int) -> int:
    """The seed the configuration is drawn from: a replayed schedule's own, so the replay runs on the
    timeouts its windows were sized to; else the run's."""
    if (replayed := _replayed(opts)) is None:
        return seed
    try:
        return nemesis_schedule.load(replayed).seed
    except nemesis_schedule.ScheduleError as exc:
        raise BadArguments(f"--replay-nemesis: {exc}") from None


def _replayed(opts: TestOptions) -> Path | None:
    return Path(opts.replay_nemesis) / "nemesis-schedule.json" if opts.replay_nemesis else None


def node_timing(config: dict[str, str]) -> Timing:
    """The deployed nodes' timeouts (their defaults, under the run's configuration, drawn keys included):
    what the nemesis sizes its windows to and the recovery watch its bound to."""
    return Timing.from_properties({**DEFAULT_PROPERTIES, **config})


def session_timeout_ms(config: dict[str, str]) -> float:
    return float(config.get("broker.session.timeout.ms", 9000))


def _run_phases(opts: TestOptions, run: RunDir, history: HistoryWriter, dep: Deployment,
                scraper: MetricsScraper, live: _Live) -> None:
    assert opts.seed is not None
    rng = random.Random(opts.seed)
    nem = prepare_run(dep.lab.name, dep, packages=opts.nemesis, interval=opts.nemesis_interval,
                      duration=opts.time_limit, seed=opts.seed, run_dir=run.path, swarm=opts.swarm,
                      timing=node_timing(opts.config),
                      recorder=history_recorder(history),
                      replay_from=_replayed(opts))
    live.nemesis = nem.nemesis
    concurrency = opts.concurrency or 2 * len(dep.nodes())
    workload = catalog.build(opts.workload, client_addresses(dep), rate=opts.rate * concurrency,
                             concurrency=concurrency, request_timeout=opts.op_timeout,
                             session_timeout=session_timeout_ms(opts.config) / 1000, config=opts.config)
    processes = ProcessIds()
    with guarded(nem.nemesis):
        live.phase = "run"
        nem.start()
        try:
            asyncio.run(run_phase(TimeLimit(workload.main, opts.time_limit), workload.factory, history,
                                  processes, nodes=workload.brokers, concurrency=concurrency, rng=rng,
                                  op_timeout=opts.op_timeout + 1, stats=live.stats))
        finally:
            live.phase = "heal"
            nem.stop()
    live.phase = "recover"
    # brokers serve reads from their own image: the final reads wait until every node has applied
    # everything committed by the heal, so they observe the final state, not a lag. A cluster that
    # does not get there within the bound is a finding (the `recovery` checker), not a crash: the
    # final reads still run, and what they cannot read ends `fail`/`info` like any other op.
    bound = opts.recovery_time if opts.recovery_time is not None else recovery_bound(node_timing(opts.config))
    recovery = wait_recovered(dep, scraper.scrape_once, bound, history_now=history.now)
    write_json(run.path / RECOVERY_FILE, recovery.to_json())
    live.phase = "final reads"
    asyncio.run(run_phase(workload.final, workload.factory, history, processes, nodes=workload.brokers,
                          concurrency=len(workload.brokers), rng=rng, op_timeout=opts.op_timeout + 1,
                          stats=live.stats))
    live.phase = "done"
