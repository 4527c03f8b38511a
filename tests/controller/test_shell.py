"""The metadata shell over an image built by a controller."""

from __future__ import annotations

import json

from controller_harness import Harness

from kraftlab.node.metadata.records import uuid_to_kafka
from kraftlab.node.metadata.shell import MetadataShell, image_tree


def test_shell_browses_the_image(h: Harness) -> None:
    h.start_brokers(1, 2)
    h.create("alpha", partitions=2, rf=2)
    img = h.active().committed_image
    sh = MetadataShell(image_tree(img))
    assert sh.run("ls").split("\n") == ["brokers", "configs", "delegationTokens", "features", "topicIds", "topics"]
    assert sh.run("ls brokers").split("\n") == ["1", "2"]
    assert sh.run("cd topics/alpha") == "" and sh.run("pwd") == "/topics/alpha"
    assert sh.run("ls").split("\n") == ["0", "1", "id", "name"]
    p0 = json.loads(sh.run("cat 0"))
    assert p0["isr"] == list(img.topic("alpha").partitions[0].isr) and p0["leaderEpoch"] == 0
    assert json.loads(sh.run("cat id")) == uuid_to_kafka(img.topic("alpha").topic_id)
    assert sh.run("cd ../..") == "" and sh.run("pwd") == "/"
    assert json.loads(sh.run("cat /features/metadata.version")) == 1
    assert json.loads(sh.run("cat /brokers/2/fenced")) is False
    found = sh.run("find /topics").split("\n")
    assert "/topics/alpha/1/isr" in found
    assert sh.run("cat /nope").startswith("error:")
    assert sh.run("cd /brokers/1/epoch").startswith("error:")
    assert sh.run("frobnicate").startswith("error: unknown command")
