"""End to end: `kraft-node shell --bootstrap-controller` reads the committed image of a live quorum (a
real broker+controller process whose log starts past a snapshot, so the shell loads the snapshot
with FetchSnapshot and then fetches the log after it)."""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import json
import signal
import subprocess
import time
from pathlib import Path

import pytest

from kraftlab.node.cli import CommandFailed, describe_cluster, main
from kraftlab.node.config import config_from_properties, render_properties
from kraftlab.node.protocol.client import ProtocolClient
from kraftlab.node.storage.meta_properties import format_dirs, random_cluster_id
from kraftlab.testing.kraftnode import KRAFT_NODE, free_ports, node_properties

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]


async def _create(port: int, name: str) -> None:
    from kio.schema.create_topics.v7 import request as ct

    topic = ct.CreatableTopic(name=name, num_partitions=2, replication_factor=1, assignments=(), configs=())  # type: ignore[arg-type]
    request = ct.CreateTopicsRequest(topics=(topic,), timeout=datetime.timedelta(seconds=10))  # type: ignore[arg-type]
    async with ProtocolClient("127.0.0.1", port, request_timeout=15) as client:
        response = await client.send(request)
    assert int(response.topics[0].error_code) == 0, response


def _shell(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    capsys.readouterr()
    code = main(["shell", *args])
    return code, capsys.readouterr().out


def test_shell_over_a_live_quorum(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    broker_port, controller_port, dead_port = free_ports(3)
    props = node_properties(
        1,
        tmp_path,
        {1: controller_port},
        **{
            "process.roles": "broker,controller",
            "listeners": f"PLAINTEXT://127.0.0.1:{broker_port},CONTROLLER://127.0.0.1:{controller_port}",
            "metadata.snapshot.max.new.record.bytes": "200",  # a snapshot every few records
            "metadata.log.segment.bytes": "400",  # small segments: the log start moves past snapshots
            "metadata.max.retention.bytes": "0",  # as soon as a snapshot covers them
        },
    )
    config_path = tmp_path / "server.properties"
    config_path.write_text(render_properties(props))
    config = config_from_properties(props)
    format_dirs(config.all_log_dirs, random_cluster_id(), 1)
    with open(tmp_path / "node.log", "wb") as log:
        proc = subprocess.Popen(
            [KRAFT_NODE, "start", "--config", str(config_path)],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + 60
        while True:
            with contextlib.suppress(CommandFailed):
                if [b["id"] for b in asyncio.run(describe_cluster(("127.0.0.1", broker_port), 2.0))["brokers"]] == [1]:
                    break
            assert time.monotonic() < deadline, "broker not unfenced"
            time.sleep(0.1)
        names = [f"live-{i}" for i in range(6)]
        for name in names:
            asyncio.run(_create(controller_port, name))
        meta = Path(config.metadata_log_dir) / "__cluster_metadata-0"
        deadline = time.monotonic() + 30
        while not list(meta.glob("*.checkpoint")):
            assert time.monotonic() < deadline, "no snapshot written"
            time.sleep(0.1)
        asyncio.run(_create(controller_port, "after-snapshot"))

        # a dead address first: the shell finds the leader among the given controllers
        where = f"127.0.0.1:{dead_port},127.0.0.1:{controller_port}"
        code, out = _shell(capsys, "--bootstrap-controller", where, "ls", "/topics")
        assert code == 0 and out.split() == sorted([*names, "after-snapshot"])
        code, out = _shell(capsys, "--bootstrap-controller", where, "cat", "/brokers/1")
        broker = json.loads(out)
        assert code == 0 and broker["fenced"] is False and broker["endpoints"] == [f"PLAINTEXT://127.0.0.1:{broker_port}"]
        code, out = _shell(capsys, "--bootstrap-controller", where, "cat", "/topics/live-3/1/replicas")
        assert code == 0 and json.loads(out) == [1]
        assert _shell(capsys, "--bootstrap-controller", where, "cat", "/topics/nope")[0] == 1
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
    # the log the shell read did start past a snapshot (FetchSnapshot was needed)
    assert min(int(f.stem) for f in meta.glob("*.log")) > 0
    # nobody listening: a clear failure, not a hang
    code = main(["shell", "--bootstrap-controller", f"127.0.0.1:{dead_port}", "--timeout", "1", "ls"])
    assert code == 1 and "no complete image" in capsys.readouterr().err
