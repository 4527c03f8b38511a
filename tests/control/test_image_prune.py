"""Node-image pruning against an in-memory image store (no Docker needed)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import docker  # a dependency of the project

from kraftlab.control.containers import BASE_IMAGE, BASE_REPO, NODE_REPO, _created_at, prune_node_images

NOW = _created_at("2026-11-22T12:00:00Z")


@dataclass
class Image:
    id: str
    tags: list[str]
    attrs: dict[str, Any]


@dataclass
class Images:
    """The slice of docker's ImageCollection prune uses: list by repository, remove by id."""

    images: list[Image]
    in_use: set[str] = field(default_factory=set)

    def list(self, name: str) -> list[Image]:
        return [i for i in self.images if any(t.startswith(f"{name}:") for t in i.tags)]

    def remove(self, image_id: str) -> None:
        if image_id in self.in_use:
            raise docker.errors.APIError("conflict: image is being used by running container")
        self.images = [i for i in self.images if i.id != image_id]


@dataclass
class Client:
    images: Images


def image(digest: str, created: str, repo: str = NODE_REPO) -> Image:
    return Image(id=f"sha256:{digest}", tags=[f"{repo}:{digest}"], attrs={"Created": created})


def test_removes_old_unused_node_images_only() -> None:
    store = Images([
        image("current", "2026-11-01T00:00:00.123456789Z"),  # old, but the one just built: kept
        image("old", "2026-11-20T08:00:00.5Z"),  # two days old: removed
        image("busy", "2026-11-19T00:00:00Z"),  # old but a container uses it: kept
        image("young", "2026-11-22T09:30:00Z"),  # another checkout may be starting with it: kept
        image("other", "2026-01-01T00:00:00Z", repo="kraftlab-base"),  # not a node image: never listed
        image("odd", "yesterday"),  # unparsable date: kept
    ], in_use={"sha256:busy"})
    removed = prune_node_images(Client(store), keep=f"{NODE_REPO}:current", now=NOW)
    assert removed == [f"{NODE_REPO}:old"]
    assert sorted(i.id for i in store.images) == sorted(
        f"sha256:{d}" for d in ("current", "busy", "young", "other", "odd"))


def test_removes_base_images_of_other_packages_once_no_node_image_needs_them() -> None:
    store = Images([
        image("bookworm-new", "2026-11-22T11:59:00Z", repo=BASE_REPO),  # the current base: kept
        image("bookworm-old", "2026-11-22T11:00:00Z", repo=BASE_REPO),  # unused: removed at once
        image("bookworm-parent", "2026-11-01T00:00:00Z", repo=BASE_REPO),  # a node image's parent: refused
        image("n1", "2026-11-22T11:00:00Z"),  # a node image: not a base
    ], in_use={"sha256:bookworm-parent"})
    removed = prune_node_images(Client(store), keep=f"{BASE_REPO}:bookworm-new", older_than_s=0.0, now=NOW,
                                repo=BASE_REPO)
    assert removed == [f"{BASE_REPO}:bookworm-old"]
    assert sorted(i.id for i in store.images) == sorted(
        f"sha256:{d}" for d in ("bookworm-new", "bookworm-parent", "n1"))
    assert BASE_IMAGE.startswith(f"{BASE_REPO}:bookworm-")


def test_created_at_reads_docker_timestamps() -> None:
    assert _created_at("2026-11-22T11:00:00Z") == NOW - 3600
    assert _created_at("2026-11-22T13:00:00.250+01:00") == NOW + 0.25
    assert _created_at("") == float("inf")
