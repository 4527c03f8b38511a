"""meta.properties v1: format, read back, and the errors `kraft-node format/start` turn into messages."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from kraftlab.node.storage.errors import CorruptStateFile
from kraftlab.node.storage.meta_properties import (
    AlreadyFormatted,
    MetaProperties,
    MetaPropertiesMismatch,
    NotFormatted,
    format_dirs,
    load_and_validate,
    parse_properties,
    random_cluster_id,
    read_meta_properties,
    validate_cluster_id,
    write_meta_properties,
)

CLUSTER = "MkU3OEVBNTcwNTJENDM2Qg"  # the example id of Kafka's quickstart


def test_format_then_validate(tmp_path: Path) -> None:
    dirs = [tmp_path / "meta", tmp_path / "data1", tmp_path / "data2"]
    assert format_dirs(dirs, CLUSTER, 3) == dirs
    found = [parse_properties((d / "meta.properties").read_text()) for d in dirs]
    for props in found:
        assert {k: v for k, v in props.items() if k != "directory.id"} == {
            "version": "1",
            "cluster.id": CLUSTER,
            "node.id": "3",
        }
    # every directory gets its own directory id (a disk's identity, KIP-858), in Kafka's base64 form
    ids = [props["directory.id"] for props in found]
    assert len(set(ids)) == 3 and all(len(i) == 22 for i in ids)
    meta = load_and_validate(dirs, node_id=3, cluster_id=CLUSTER)
    assert (meta.cluster_id, meta.node_id) == (CLUSTER, 3)
    assert meta.directory_id == read_meta_properties(dirs[0]).directory_id != read_meta_properties(dirs[1]).directory_id


def test_directory_id_given_and_absent(tmp_path: Path) -> None:
    chosen = uuid.UUID(int=12345)
    format_dirs([tmp_path / "meta"], CLUSTER, 1, directory_ids={tmp_path / "meta": chosen})
    assert read_meta_properties(tmp_path / "meta").directory_id == chosen
    old = tmp_path / "old"  # formatted before directory ids existed
    old.mkdir()
    (old / "meta.properties").write_text(f"version=1\ncluster.id={CLUSTER}\nnode.id=1\n")
    assert read_meta_properties(old) == MetaProperties(CLUSTER, 1)
    (old / "meta.properties").write_text(f"version=1\ncluster.id={CLUSTER}\nnode.id=1\ndirectory.id=nope\n")
    with pytest.raises(CorruptStateFile, match=r"directory\.id"):
        read_meta_properties(old)


def test_format_twice_needs_ignore_formatted(tmp_path: Path) -> None:
    d = tmp_path / "meta"
    format_dirs([d], CLUSTER, 1)
    with pytest.raises(AlreadyFormatted, match="--ignore-formatted"):
        format_dirs([d], CLUSTER, 1)
    assert format_dirs([d, tmp_path / "new"], CLUSTER, 1, ignore_formatted=True) == [tmp_path / "new"]


def test_missing_and_unformatted_directories(tmp_path: Path) -> None:
    with pytest.raises(NotFormatted, match="does not exist"):
        read_meta_properties(tmp_path / "nope")
    (tmp_path / "empty").mkdir()
    with pytest.raises(NotFormatted, match="kraft-node format"):
        load_and_validate([tmp_path / "empty"], node_id=1)


def test_mismatched_node_or_cluster(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    format_dirs([a], CLUSTER, 1)
    format_dirs([b], random_cluster_id(), 1)
    with pytest.raises(MetaPropertiesMismatch, match=r"belongs to node 1 but node\.id is 2"):
        load_and_validate([a], node_id=2)
    with pytest.raises(MetaPropertiesMismatch, match="different clusters"):
        load_and_validate([a, b], node_id=1)
    with pytest.raises(MetaPropertiesMismatch, match="expected"):
        load_and_validate([a], node_id=1, cluster_id=random_cluster_id())


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("cluster.id=" + CLUSTER + "\nnode.id=1\n", "unsupported version"),
        ("version=0\ncluster.id=" + CLUSTER + "\nnode.id=1\n", "unsupported version"),
        ("version=1\nnode.id=1\n", "cluster.id is missing"),
        ("version=1\ncluster.id=" + CLUSTER + "\n", "node.id is missing"),
        ("version=1\ncluster.id=" + CLUSTER + "\nnode.id=one\n", "invalid literal"),
        ("version=1\ncluster.id=not-a-uuid\nnode.id=1\n", "invalid cluster id"),
    ],
)
def test_invalid_files(tmp_path: Path, content: str, message: str) -> None:
    (tmp_path / "meta.properties").write_text(content)
    with pytest.raises(CorruptStateFile, match=message):
        read_meta_properties(tmp_path)


def test_cluster_ids() -> None:
    for _ in range(50):
        cid = random_cluster_id()
        validate_cluster_id(cid)
        assert len(cid) == 22 and not cid.startswith("-")
    for bad in ["", "abc", CLUSTER + "A", CLUSTER[:-1] + "!", "=" * 22]:
        with pytest.raises(ValueError):
            validate_cluster_id(bad)
    with pytest.raises(ValueError):
        write_meta_properties(Path("/nonexistent-never-written"), MetaProperties("bad", 1))


def test_java_properties_subset() -> None:
    text = "# comment\n! also\n\n  a = 1\nb:2\nc=x=y\nflag\n"
    assert parse_properties(text) == {"a": "1", "b": "2", "c": "x=y", "flag": ""}
