"""File corruption of one node's metadata directory, by KRaft zone (Jepsen's jepsen.nemesis.file).

A standalone script (standard library only): the disk fault sends its source to the node's host and
runs it there with `python3 -c`, so a host needs no copy of the project; it prints, as JSON, exactly
what it did. Also runnable by hand:

    python3 corruption_script.py MODE ZONE METADATA_DIR STASH_DIR SEED REGION_INDEX REGIONS AMOUNT

Zones (files of `<metadata.log.dir>`): `active-segment` (the last `.log`), `older-segment` (any other
`.log`), `snapshot` (a `.checkpoint`), `quorum-state`, `hw-checkpoint`, `meta.properties`.
Modes: `flip-bits` (AMOUNT bits), `truncate` (cut the file inside the region), `zero` (AMOUNT bytes
set to zero), `copy-chunk` (AMOUNT bytes copied from elsewhere in the file or a sibling of its
zone), `snapshot` (keep a copy of every file of the zone in STASH_DIR, changing nothing) and
`rollback` (put the kept copies back: a disk rolled back in time).

Region `REGION_INDEX` of `REGIONS` limits the damage to that slice of each file, so that damage on
several nodes can be placed in disjoint regions (Jepsen's "helix": every node damaged, never two in
the same place, so each byte still has an intact copy on a majority).
"""

from __future__ import annotations

import glob
import json
import os
import random
import shutil
import sys

PARTITION = "__cluster_metadata-0"
ZONES = ("active-segment", "older-segment", "snapshot", "quorum-state", "hw-checkpoint", "meta.properties")
MODES = ("flip-bits", "truncate", "zero", "copy-chunk", "snapshot", "rollback")


def zone_files(zone: str, meta: str) -> list[str]:
    part = os.path.join(meta, PARTITION)
    segments = sorted(glob.glob(os.path.join(part, "*.log")))
    if zone == "active-segment":
        return segments[-1:]
    if zone == "older-segment":
        return segments[:-1]
    if zone == "snapshot":
        return sorted(glob.glob(os.path.join(part, "*.checkpoint")))
    if zone in ("quorum-state", "hw-checkpoint"):
        path = os.path.join(part, zone)
        return [path] if os.path.exists(path) else []
    if zone == "meta.properties":
        path = os.path.join(meta, "meta.properties")
        return [path] if os.path.exists(path) else []
    raise ValueError(f"unknown zone {zone!r}; known: {', '.join(ZONES)}")


def region(size: int, index: int, count: int) -> tuple[int, int]:
    """The byte range [start, end) of slice `index` of `count` of a file of `size` bytes."""
    return size * index // count, size * (index + 1) // count


def damage(mode: str, zone: str, meta: str, stash: str, seed: int, index: int, count: int,
           amount: int) -> dict[str, object]:
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}; known: {', '.join(MODES)}")
    if not 0 <= index < count:
        raise ValueError(f"region {index} of {count} does not exist")
    rng = random.Random(seed)
    out: dict[str, object] = {"mode": mode, "zone": zone, "region": [index, count]}
    if mode == "rollback":
        kept = os.path.join(stash, zone)
        if not os.path.isdir(kept):
            raise ValueError(f"no snapshot of zone {zone} was taken (mode snapshot) in {stash}")
        restored = []
        for name in sorted(os.listdir(kept)):
            rel = name.replace("%", "/")
            target = os.path.join(meta, rel)
            shutil.copyfile(os.path.join(kept, name), target)
            fd = os.open(target, os.O_RDONLY)
            try:
                os.fsync(fd)  # the rolled-back content is what the disk now holds
            finally:
                os.close(fd)
            restored.append(rel)
        out["files"] = restored
        return out
    files = zone_files(zone, meta)
    if not files:
        raise ValueError(f"no file in zone {zone} under {meta}")
    if mode == "snapshot":
        kept = os.path.join(stash, zone)
        shutil.rmtree(kept, ignore_errors=True)
        os.makedirs(kept)
        for f in files:
            shutil.copyfile(f, os.path.join(kept, os.path.relpath(f, meta).replace("/", "%")))
        out["files"] = [os.path.relpath(f, meta) for f in files]
        return out
    path = rng.choice([f for f in files if os.path.getsize(f) > 0] or files)
    size = os.path.getsize(path)
    start, end = region(size, index, count)
    out.update(file=os.path.relpath(path, meta), size=size, range=[start, end])
    if end <= start:
        out["changed"] = False  # the region of an empty (or tiny) file is empty: nothing to damage
        return out
    with open(path, "r+b") as h:
        if mode == "flip-bits":
            flips = []
            for _ in range(amount):
                pos, bit = rng.randrange(start, end), rng.randrange(8)
                h.seek(pos)
                b = h.read(1)[0]
                h.seek(pos)
                h.write(bytes([b ^ (1 << bit)]))
                flips.append([pos, bit])
            out["flips"] = flips
        elif mode == "truncate":
            cut = rng.randrange(start, end)
            h.truncate(cut)
            out["new_size"] = cut
        elif mode == "zero":
            n = min(amount, end - start)
            pos = rng.randrange(start, end - n + 1)
            h.seek(pos)
            h.write(b"\0" * n)
            out["zeroed"] = [pos, pos + n]
        else:  # copy-chunk: bytes from elsewhere (this file outside the region, or a sibling of the zone)
            n = min(amount, end - start)
            sources = [f for f in files if f != path and os.path.getsize(f) >= n] or [path]
            source = rng.choice(sources)
            with open(source, "rb") as s:
                src_size = os.path.getsize(source)
                outside = [p for p in range(0, max(1, src_size - n + 1))
                           if source != path or p + n <= start or p >= end]  # not from the region itself
                src_pos = rng.choice(outside) if outside else 0
                s.seek(src_pos)
                chunk = s.read(n)
            pos = rng.randrange(start, end - len(chunk) + 1)
            h.seek(pos)
            h.write(chunk)
            out["copied"] = {"from": os.path.relpath(source, meta), "from_offset": src_pos, "to_offset": pos,
                             "bytes": len(chunk)}
        h.flush()
        os.fsync(h.fileno())  # the damage itself is durable: it is the disk's, not a lost write
    out["changed"] = True
    return out


def main(argv: list[str]) -> int:
    try:
        mode, zone, meta, stash = argv[:4]
        seed, index, count, amount = (int(a) for a in argv[4:8])
        print(json.dumps(damage(mode, zone, meta, stash, seed, index, count, amount)))
    except (ValueError, OSError) as exc:
        print(f"corruption: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
