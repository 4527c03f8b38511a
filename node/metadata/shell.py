"""The metadata shell of KIP-631 (`kraft-node shell`): the image as a tree of nodes, browsed with
ls / cd / cat / find / pwd / help.

`image_tree(image)` lays the image out like Kafka's metadata shell::

    /brokers/<id>/{id,epoch,incarnationId,fenced,inControlledShutdown,rack,endpoints}
    /topics/<name>/{id,name}  /topics/<name>/<partition>/{replicas,isr,leader,leaderEpoch,...}
    /topicIds/<base64 id> -> name
    /configs/<resource type>/<resource name>/<key>
    /features/<name>
    /delegationTokens/<token id>/{owner,requester,renewers,issueTimestamp,maxTimestamp,expirationTimestamp}

`MetadataShell(tree).run(line)` executes one command and returns its output text (no I/O: the
CLI reads lines, prints results, and builds the image from a snapshot file or a live quorum).
"""

from __future__ import annotations

import json
import posixpath
import shlex
from typing import Any

from kraftlab.node.metadata.image import MetadataImage
from kraftlab.node.metadata.records import RESOURCE_BROKER, RESOURCE_TOPIC, uuid_to_kafka

_RESOURCE_NAMES = {RESOURCE_TOPIC: "topic", RESOURCE_BROKER: "broker"}
Tree = dict[str, Any]


def image_tree(image: MetadataImage) -> Tree:
    brokers = {
        str(b.id): {
            "id": b.id,
            "epoch": b.epoch,
            "incarnationId": str(b.incarnation_id),
            "fenced": b.fenced,
            "inControlledShutdown": b.in_controlled_shutdown,
            "rack": b.rack,
            "endpoints": [f"{e.name}://{e.host}:{e.port}" for e in b.endpoints],
        }
        for b in sorted(image.brokers.values(), key=lambda b: b.id)
    }
    topics: Tree = {}
    for name in sorted(image.topic_ids):
        t = image.topics[image.topic_ids[name]]
        node: Tree = {"id": uuid_to_kafka(t.topic_id), "name": t.name}
        for pid in sorted(t.partitions):
            p = t.partitions[pid]
            node[str(pid)] = {
                "replicas": list(p.replicas),
                "isr": list(p.isr),
                "leader": p.leader,
                "leaderEpoch": p.leader_epoch,
                "partitionEpoch": p.partition_epoch,
                "addingReplicas": list(p.adding),
                "removingReplicas": list(p.removing),
                "lastKnownElr": list(p.last_known_elr),
            }
        topics[name] = node
    configs: Tree = {}
    for (rtype, rname), entries in sorted(image.configs.items()):
        configs.setdefault(_RESOURCE_NAMES.get(rtype, str(rtype)), {})[rname or "<default>"] = dict(
            sorted(entries.items())
        )
    return {
        "brokers": brokers,
        "topics": topics,
        "topicIds": {uuid_to_kafka(tid): t.name for tid, t in sorted(image.topics.items(), key=lambda kv: kv[1].name)},
        "configs": configs,
        "features": dict(sorted(image.features.items())),
        "delegationTokens": {tid: {
            "owner": t.owner, "requester": t.requester, "renewers": list(t.renewers),
            "issueTimestamp": t.issue_timestamp, "maxTimestamp": t.max_timestamp,
            "expirationTimestamp": t.expiration_timestamp,
        } for tid, t in sorted(image.delegation_tokens.items())},
    }


class ShellError(Exception):
    pass


class MetadataShell:
    HELP = "commands: ls [path] | cd [path] | cat path... | find [path] | pwd | help"

    def __init__(self, tree: Tree) -> None:
        self.tree = tree
        self.cwd = "/"

    def _resolve(self, path: str | None) -> tuple[str, Any]:
        full = posixpath.normpath(posixpath.join(self.cwd, path or "."))
        node: Any = self.tree
        for part in [p for p in full.split("/") if p]:
            if not isinstance(node, dict) or part not in node:
                raise ShellError(f"{full}: no such node")
            node = node[part]
        return ("/" if full in ("", "//") else full), node

    def run(self, line: str) -> str:
        """Run one command; errors come back as text too (the shell goes on)."""
        try:
            args = shlex.split(line)
        except ValueError as exc:
            return f"error: {exc}"
        if not args:
            return ""
        cmd, rest = args[0], args[1:]
        try:
            if cmd == "pwd":
                return self.cwd
            if cmd == "help":
                return self.HELP
            if cmd == "cd":
                path, node = self._resolve(rest[0] if rest else "/")
                if not isinstance(node, dict):
                    raise ShellError(f"{path}: not a directory")
                self.cwd = path
                return ""
            if cmd == "ls":
                path, node = self._resolve(rest[0] if rest else None)
                return "\n".join(sorted(node, key=_natural)) if isinstance(node, dict) else posixpath.basename(path)
            if cmd == "cat":
                out = []
                paths: list[str | None] = list(rest) or [None]
                for p in paths:
                    _, node = self._resolve(p)
                    out.append(json.dumps(node, indent=2) if isinstance(node, dict | list) else json.dumps(node))
                return "\n".join(out)
            if cmd == "find":
                path, node = self._resolve(rest[0] if rest else None)
                return "\n".join(_walk(path, node))
        except ShellError as exc:
            return f"error: {exc}"
        return f"error: unknown command {cmd!r}; {self.HELP}"


def _natural(key: str) -> tuple[int, int | str]:
    return (0, int(key)) if key.isdigit() else (1, key)


def _walk(path: str, node: Any) -> list[str]:
    out = [path]
    if isinstance(node, dict):
        for k in sorted(node, key=_natural):
            out.extend(_walk(posixpath.join(path, k), node[k]))
    return out
