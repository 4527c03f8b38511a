"""kraft-node: random-uuid, format, info, start refusing bad storage, and the query commands' JSON."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from kraftlab.node.cli import cluster_json, main, quorum_json
from kraftlab.node.storage.meta_properties import random_cluster_id, read_meta_properties
from kraftlab.testing.kraftnode import free_ports, node_properties

VOTERS = {1: 19093, 2: 19094, 3: 19095}


def test_random_uuid(capsys: pytest.CaptureFixture[str]) -> None:
    seen = set()
    for _ in range(20):
        assert main(["random-uuid"]) == 0
        out = capsys.readouterr().out.strip()
        assert len(out) == 22 and not out.startswith("-")
        assert len(base64.urlsafe_b64decode(out + "==")) == 16
        seen.add(out)
    assert len(seen) == 20


def test_format_and_info(tmp_path: Path, write_config: Callable[..., Path], capsys: pytest.CaptureFixture[str]) -> None:
    props = node_properties(1, tmp_path, VOTERS, **{"log.dirs": f"{tmp_path}/d1,{tmp_path}/d2"})
    cfg = str(write_config(props))
    cid = random_cluster_id()
    assert main(["info", "--config", cfg]) == 1
    err = capsys.readouterr().err
    assert "Found problems" in err and "run `kraft-node format` first" in err
    assert main(["format", "--config", cfg, "--cluster-id", cid]) == 0
    for d in (props["metadata.log.dir"], f"{tmp_path}/d1", f"{tmp_path}/d2"):
        meta = read_meta_properties(d)
        assert (meta.cluster_id, meta.node_id, meta.version) == (cid, 1, 1)
    capsys.readouterr()
    assert main(["info", "--config", cfg]) == 0
    assert capsys.readouterr().out.count(f"cluster.id={cid}") == 3
    # formatting again is refused unless --ignore-formatted
    assert main(["format", "--config", cfg, "--cluster-id", cid]) == 1
    assert "already formatted" in capsys.readouterr().err
    assert main(["format", "--config", cfg, "--cluster-id", random_cluster_id(), "--ignore-formatted"]) == 0
    assert read_meta_properties(f"{tmp_path}/d1").cluster_id == cid  # skipped, not rewritten


def test_info_reports_mismatch(
    tmp_path: Path, write_config: Callable[..., Path], capsys: pytest.CaptureFixture[str]
) -> None:
    cfg1 = str(write_config(node_properties(1, tmp_path, VOTERS), "one.properties"))
    assert main(["format", "--config", cfg1, "--cluster-id", random_cluster_id()]) == 0
    props2 = node_properties(2, tmp_path, VOTERS, **{"metadata.log.dir": str(tmp_path / "n1" / "meta")})
    cfg2 = str(write_config(props2, "two.properties"))
    capsys.readouterr()
    assert main(["info", "--config", cfg2]) == 1
    assert "does not match the configuration's 2" in capsys.readouterr().err


@pytest.mark.parametrize("cluster_id", ["short", "!!!!!!!!!!!!!!!!!!!!!!", ""])
def test_format_bad_cluster_id(
    cluster_id: str, tmp_path: Path, write_config: Callable[..., Path], capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = str(write_config(node_properties(1, tmp_path, VOTERS)))
    assert main(["format", "--config", cfg, "--cluster-id", cluster_id]) == 1
    assert "invalid cluster id" in capsys.readouterr().err
    assert not (tmp_path / "n1" / "meta" / "meta.properties").exists()


def test_config_errors_are_one_line(
    tmp_path: Path, write_config: Callable[..., Path], capsys: pytest.CaptureFixture[str]
) -> None:
    props = node_properties(1, tmp_path, VOTERS, **{"process.roles": "controler"})
    assert main(["info", "--config", str(write_config(props))]) == 1
    err = capsys.readouterr().err
    assert "unknown role 'controler'" in err and "Traceback" not in err
    assert main(["format", "--config", str(tmp_path / "missing"), "--cluster-id", random_cluster_id()]) == 1
    assert "cannot read" in capsys.readouterr().err


def test_start_refuses_unformatted_and_mismatched(tmp_path: Path, write_config: Callable[..., Path]) -> None:
    props = node_properties(1, tmp_path, VOTERS)
    cfg = str(write_config(props))
    run = [sys.executable, "-m", "kraftlab.node.cli", "start", "--config", cfg]
    proc = subprocess.run(run, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1
    assert "not formatted" in proc.stderr or "does not exist" in proc.stderr
    # formatted for another node id
    other = node_properties(
        2, tmp_path, VOTERS, **{"metadata.log.dir": props["metadata.log.dir"], "log.dirs": props["log.dirs"]}
    )
    assert (
        main(["format", "--config", str(write_config(other, "other.properties")), "--cluster-id", random_cluster_id()])
        == 0
    )
    proc = subprocess.run(run, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1 and "belongs to node 2" in proc.stderr


def test_bad_arguments_exit_2() -> None:
    with pytest.raises(SystemExit) as e:
        main(["describe-quorum", "--bootstrap-controller", "nohostport"])
    assert e.value.code == 2


def test_describe_quorum_unreachable(capsys: pytest.CaptureFixture[str]) -> None:
    (port,) = free_ports(1)
    assert main(["describe-quorum", "--bootstrap-controller", f"127.0.0.1:{port}", "--timeout", "1"]) == 1
    assert "ConnectFailed" in capsys.readouterr().err


def test_quorum_and_cluster_json() -> None:
    from kio.schema.describe_cluster.v1 import response as dc
    from kio.schema.describe_quorum.v2 import response as dq
    from kio.schema.errors import ErrorCode
    from kio.static.primitive import i32, i64

    def replica(i: int, leo: int) -> dq.ReplicaState:
        return dq.ReplicaState(replica_id=i32(i), replica_directory_id=None, log_end_offset=i64(leo))

    part = dq.PartitionData(
        partition_index=i32(0),
        error_code=ErrorCode.none,
        error_message=None,
        leader_id=i32(2),
        leader_epoch=i32(5),
        high_watermark=i64(40),
        current_voters=(replica(1, 40), replica(2, 41)),
        observers=(replica(7, 12),),
    )
    resp = dq.DescribeQuorumResponse(
        error_code=ErrorCode.none,
        error_message=None,
        topics=(dq.TopicData(topic_name="__cluster_metadata", partitions=(part,)),),
        nodes=(),
    )
    out = quorum_json(resp)
    assert out["leader"] == 2 and out["epoch"] == 5 and out["high_watermark"] == 40
    assert [v["id"] for v in out["voters"]] == [1, 2] and out["observers"][0]["log_end_offset"] == 12
    broker = dc.DescribeClusterBroker(broker_id=i32(4), host="h", port=i32(9092))
    cl = dc.DescribeClusterResponse(
        throttle_time=i32(0), error_code=ErrorCode.none, cluster_id="abc", controller_id=i32(-1), brokers=(broker,)
    )  # type: ignore[arg-type]
    assert cluster_json(cl) == {
        "cluster_id": "abc",
        "controller": None,
        "brokers": [{"id": 4, "host": "h", "port": 9092, "rack": None}],
    }


def test_dump_log_decodes_and_reports_damage(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from kraftlab.node.metadata.records import NoOpRecord, to_log_record
    from kraftlab.node.raft.ports import Batch, Record
    from kraftlab.node.storage.layout import partition_dir
    from kraftlab.node.storage.log import DiskLog

    meta = tmp_path / "meta"
    with DiskLog.open(meta) as disk:
        disk.append([Batch(0, 1, (to_log_record(NoOpRecord()), Record(b"tag", None)))])
        disk.append([Batch(2, 1, (to_log_record(NoOpRecord()),))])
        disk.flush()
    assert main(["dump-log", str(meta)]) == 0
    out = capsys.readouterr().out
    assert out.count('payload: {"type":"NO_OP_RECORD"') == 2 and "| offset: 1 keySize: 3 valueSize: -1" in out
    segment = next(partition_dir(meta).glob("*.log"))
    data = bytearray(segment.read_bytes())
    data[-3] ^= 0xFF
    segment.write_bytes(bytes(data))
    assert main(["dump-log", str(segment)]) == 1
    out = capsys.readouterr().out
    assert "CORRUPT:" in out and out.count("NO_OP_RECORD") == 1
    assert main(["dump-log", str(tmp_path / "nothing-here.log")]) == 1


def test_shell_over_snapshot_and_log(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import uuid

    from kraftlab.node.cli import load_image
    from kraftlab.node.metadata.records import PartitionRecord, TopicRecord, to_log_record
    from kraftlab.node.raft.ports import Batch, OffsetAndEpoch
    from kraftlab.node.storage.log import DiskLog
    from kraftlab.node.storage.snapshots import DiskSnapshotStore

    meta = tmp_path / "meta"
    t1, t2 = uuid.uuid4(), uuid.uuid4()
    snap = [
        TopicRecord(name="alpha", topic_id=t1),
        PartitionRecord(partition_id=0, topic_id=t1, replicas=(1, 2), isr=(1, 2), leader=1),
    ]
    store = DiskSnapshotStore.in_log_dir(meta)
    store.write(OffsetAndEpoch(2, 1), [to_log_record(r) for r in snap], 0)
    with DiskLog.open(meta, snapshot_id=OffsetAndEpoch(2, 1)) as disk:
        disk.reset_to_snapshot(OffsetAndEpoch(2, 1))
        disk.append(
            [
                Batch(
                    2,
                    1,
                    (
                        to_log_record(TopicRecord(name="beta", topic_id=t2)),
                        to_log_record(PartitionRecord(partition_id=0, topic_id=t2, replicas=(3,), isr=(3,), leader=3)),
                    ),
                )
            ]
        )
        disk.flush()
    image, end = load_image(str(meta))
    assert end == 4 and sorted(t.name for t in image.topics.values()) == ["alpha", "beta"]
    only_snapshot, _ = load_image(str(next(store.directory.glob("*.checkpoint"))))
    assert [t.name for t in only_snapshot.topics.values()] == ["alpha"]

    capsys.readouterr()
    assert main(["shell", "--directory", str(meta), "ls"]) == 0
    listing = ["brokers", "configs", "delegationTokens", "features", "topicIds", "topics"]
    assert capsys.readouterr().out.split() == listing
    assert main(["shell", "--directory", str(meta), "ls", "/topics"]) == 0
    assert capsys.readouterr().out.split() == ["alpha", "beta"]
    assert main(["shell", "--directory", str(meta), "cat", "/topics/beta/0"]) == 0
    assert json.loads(capsys.readouterr().out)["leader"] == 3
    assert main(["shell", "--snapshot", str(next(store.directory.glob("*.checkpoint"))), "ls", "/topics"]) == 0
    assert capsys.readouterr().out.split() == ["alpha"]
    assert main(["shell", "--directory", str(meta), "cat", "/topics/gamma"]) == 1
    assert "no such node" in capsys.readouterr().err


def test_start_unsafe_bug_flag_is_refused_without_test_mode(
    tmp_path: Path, write_config: Callable[..., Path], capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = str(write_config(node_properties(1, tmp_path, VOTERS)))
    assert main(["start", "--config", cfg, "--unsafe-bug", "ack-before-fsync"]) == 1
    err = capsys.readouterr().err
    assert "kraftlab.unsafe" in err and "test" in err
    # with test mode the config accepts it (an unknown name is still refused: it never runs correct
    # code by mistake); the node then stops at the unformatted storage, past config validation
    assert main(["start", "--config", cfg, "--unsafe-test-mode", "--unsafe-bug", "no-such-bug"]) == 1
    assert "no-such-bug" in capsys.readouterr().err
    assert main(["start", "--config", cfg, "--unsafe-test-mode", "--unsafe-bug", "ack-before-fsync"]) == 1
    err = capsys.readouterr().err
    assert "kraftlab.unsafe" not in err and ("formatted" in err or "does not exist" in err), err


def test_kraft_node_process_loads_kio_without_hypothesis() -> None:
    """A fresh process loads kio with hypothesis reported absent (start-up cost), then hypothesis is
    importable again; a process that already loaded kio is left alone."""
    code = (
        "import sys\n"
        "from node.cli import load_kio_without_hypothesis as load\n"
        "assert load()\n"
        "import node.server\n"
        "assert 'hypothesis' not in sys.modules, 'hypothesis imported'\n"
        "import hypothesis.strategies\n"
        "assert not load()\n"
        "print('ok')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr
