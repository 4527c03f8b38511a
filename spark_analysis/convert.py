"""History → Parquet: the paired client ops (spark_analysis.table), converted on every core.

A JSON Lines history is cut into chunks of about `chunk_bytes` at line starts; worker processes
parse, pair and write one chunk each (spark_analysis.chunks) while this process stitches the ops
that cross chunk boundaries (spark_analysis.stitch). Then workers gather each key bucket's rows
from every chunk file into one file (spark_analysis.layout), and the chunk files are deleted.
Memory: a chunk, or a bucket, per worker, whatever the history's size. EDN and etcd logs (small,
external) are one chunk, read whole with `checker.formats.read_history`.

Layout of the output directory:
- `ops/bucket-BBBBB.parquet`: the rows of the keys of bucket BBBBB (a stable hash of the key),
  of every history and model, sorted by (model, key, call): each key's rows are whole in one
  file; `ops/whole-III.parquet`: a model checked whole (key null, sorted by call);
- `skipped-SSS.npy`, `invocations-SSS.npy`: the ordinals that are no judged client event, and
  those of the judged invocations (see `to_positions`; 8 bytes per op, the parent holds them);
- `meta.json`: sources, models (and which history each came from), counts, the bucket count,
  the files (and the models in each), the models checked whole, and the nemesis events (few:
  the statistics' fault windows).

Which model judges an op: its `workload` field mapped by `checker.run.WORKLOAD_MODELS` when that
model is among those asked for; an op without the field goes to every model asked for. The key
is the model's `partition_key` (P-compositionality); an op without one (it spans keys) makes the
whole model's history one group, as `checker.linear.race.split` does (the job applies that).
"""

from __future__ import annotations

import bisect
import json
import multiprocessing
import os
import shutil
import threading
from collections.abc import Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from kraftlab.checker.formats import detect_format, read_history
from kraftlab.checker.history import Op
from kraftlab.spark_analysis.chunks import NO_INDEX, ChunkResult, ChunkTask, Failure, scan_events, scan_jsonl_chunk
from kraftlab.spark_analysis.layout import Written, gather, plan
from kraftlab.spark_analysis.stitch import Stitcher
from kraftlab.spark_analysis.table import DEFAULT_BUCKETS, ModelSpec, RowSink, workload_specs

__all__ = ["CHUNK_BYTES", "DEFAULT_BUCKETS", "DatasetWriter", "ModelSpec", "convert", "read_meta", "to_positions",
           "workload_specs"]

CHUNK_BYTES = 32 * 2**20


def _cpus() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def chunk_bounds(path: Path, chunk_bytes: int) -> list[tuple[int, int, int]]:
    """(start, end, first line) of each chunk: byte ranges cut at line starts."""
    size = path.stat().st_size
    starts = [0]
    with open(path, "rb") as fh:
        for k in range(1, -(-size // chunk_bytes)):
            fh.seek(max(k * chunk_bytes, starts[-1]))
            fh.readline()
            if fh.tell() < size and fh.tell() > starts[-1]:
                starts.append(fh.tell())
        ends = [*starts[1:], size]
        out, line = [], 1
        for start, end in zip(starts, ends, strict=True):
            out.append((start, end, line))
            fh.seek(start)
            left = end - start
            while left > 0:
                block = fh.read(min(left, 16 * 2**20))
                line += block.count(b"\n")
                left -= len(block)
    return out


class DatasetWriter:
    """Writes one Parquet dataset from one or more histories (each with its models)."""

    def __init__(self, out_dir: str | Path, buckets: int = DEFAULT_BUCKETS, workers: int | None = None,
                 chunk_bytes: int = CHUNK_BYTES) -> None:
        self.out = Path(out_dir)
        for old_dir in (self.out / "ops", self.out / "chunks"):  # a re-analysis starts clean
            shutil.rmtree(old_dir, ignore_errors=True)
        for old in [self.out / "meta.json", *self.out.glob("skipped-*.npy"), *self.out.glob("invocations-*.npy")]:
            old.unlink(missing_ok=True)
        self.buckets = buckets
        self.workers = workers or _cpus()
        self.chunk_bytes = chunk_bytes
        self.models: list[ModelSpec] = []
        self.model_source: dict[str, int] = {}
        self.chunk_files: list[tuple[str, list[int]]] = []
        self.whole: set[str] = set()
        self.nemesis: list[dict[str, Any]] = []
        self.sources: list[str] = []
        self.counts = {"events": 0, "client_events": 0, "ops": 0, "rows": 0, "chunks": 0}

    def _part(self, src: int, chunk: int | str) -> Path:
        return self.out / "chunks" / (f"part-{src:03d}-{chunk:05d}.parquet" if isinstance(chunk, int)
                                   else f"part-{src:03d}-{chunk}.parquet")

    def _chunks(self, path: Path, src: int, models: Sequence[ModelSpec], fmt: str) -> Iterator[ChunkResult | Failure]:
        if fmt != "jsonl":
            events = enumerate(read_history(path, fmt).events, 1)
            yield scan_events(events, RowSink(models, self.buckets), str(path), 0, self._part(src, 0))
            return
        bounds = chunk_bounds(path, self.chunk_bytes)
        specs = tuple(m.to_json() for m in models)
        tasks = [ChunkTask(str(path), i, start, end, line, specs, self.buckets, str(self._part(src, i)),
                           i == len(bounds) - 1) for i, (start, end, line) in enumerate(bounds)]
        yield from _pool_map(scan_jsonl_chunk, tasks, self.workers)

    def add(self, history: str | Path, models: Sequence[ModelSpec], fmt: str | None = None,
            notes: list[str] | None = None) -> None:
        """Convert one history; its ops go to the models of `table.models_for`, labelled."""
        import numpy as np

        path = Path(history)
        src = len(self.sources)
        self.sources.append(str(path))
        self.models += models
        self.model_source.update({m.label: src for m in models})
        sink = RowSink(models, self.buckets)
        stitcher = Stitcher(sink, str(path))
        skipped: list[Any] = []
        invocations: list[Any] = []
        blanks: list[int] = []
        events = dropped = 0
        for r in self._chunks(path, src, models, fmt or detect_format(path)):
            if isinstance(r, Failure):
                raise r.error()
            stitcher.take(r)
            skipped.append(np.asarray(r.skipped, dtype=np.int64))
            invocations.append(np.asarray(r.invocations, dtype=np.int64))
            events += r.events
            dropped += len(r.skipped) - len(r.blanks)
            self.counts["ops"] += r.ops
            self.counts["rows"] += r.rows
            self.counts["chunks"] += 1
            self.chunk_files += r.files
            self.whole |= r.whole
            blanks += r.blanks  # chunks come in order: stays sorted
            for ordinal, e in r.nemesis:
                if e.index == NO_INDEX:  # its rank among the file's non-blank lines, as checker.history gives it
                    e = replace(e, index=ordinal - 1 - bisect.bisect_left(blanks, ordinal))
                self.nemesis.append(e.to_json())
            if notes is not None:
                notes.extend(r.notes)
        stitcher.finish()
        sink.write(self._part(src, "stitch"))
        self.chunk_files += sink.files
        self.whole |= sink.whole
        skipped.append(np.asarray(stitcher.skipped, dtype=np.int64))
        self.out.mkdir(parents=True, exist_ok=True)
        np.save(self.out / f"skipped-{src:03d}.npy", np.unique(np.concatenate(skipped)))
        np.save(self.out / f"invocations-{src:03d}.npy", np.concatenate(invocations))
        self.counts["events"] += events
        self.counts["client_events"] += events - dropped - len(stitcher.skipped)
        self.counts["ops"] += sink.ops
        self.counts["rows"] += sink.rows

    def close(self) -> dict[str, Any]:
        """Gather the buckets' files, write meta.json; returns the meta (counts: `events` read,
        `client_events` judged, `ops`, `rows`, `chunks`)."""
        ops = self.out / "ops"
        ops.mkdir(parents=True, exist_ok=True)
        whole = sorted(self.whole)
        written: list[Written] = [w for ws in _pool_map(gather, plan(self.chunk_files, whole, ops, 4 * self.workers),
                                                        self.workers) for w in ws]
        shutil.rmtree(self.out / "chunks", ignore_errors=True)
        meta = {"source": self.sources[0] if len(self.sources) == 1 else self.sources,
                "models": [m.to_json() for m in self.models], "model_source": self.model_source,
                "buckets": self.buckets, **self.counts, "whole_models": whole,
                "files": [{"name": w.name, "models": list(w.models)} for w in sorted(written, key=lambda w: w.name)],
                "nemesis": self.nemesis}
        (self.out / "meta.json").write_text(json.dumps(meta, default=str))
        return meta


def convert(history: str | Path, out_dir: str | Path, models: Sequence[ModelSpec], fmt: str | None = None,
            buckets: int = DEFAULT_BUCKETS, notes: list[str] | None = None, workers: int | None = None,
            chunk_bytes: int = CHUNK_BYTES) -> dict[str, Any]:
    """Write one history's Parquet dataset and meta.json under `out_dir`; returns the meta.
    A torn last line is dropped with a note in `notes`."""
    w = DatasetWriter(out_dir, buckets, workers, chunk_bytes)
    w.add(history, models, fmt, notes)
    return w.close()


def _pool_map(fn: Any, tasks: Sequence[Any], workers: int) -> Iterator[Any]:
    """fn over tasks in order, on up to `workers` processes (in this one when a single will do)."""
    workers = min(workers, len(tasks))
    if workers <= 1:
        yield from map(fn, tasks)
        return
    # fork (cheap) unless another thread could be caught holding a lock (a py4j client's)
    alone = threading.current_thread() is threading.main_thread() and threading.active_count() == 1
    with multiprocessing.get_context("fork" if alone else "spawn").Pool(workers) as pool:
        yield from pool.imap(fn, tasks)


def read_meta(out_dir: str | Path) -> dict[str, Any]:
    return json.loads((Path(out_dir) / "meta.json").read_text())


def to_positions(ops: list[Op], dataset: str | Path, label: str) -> list[Op]:
    """Ops read back from the table with the positions and ids `checker.history.pair_ops` gives
    them: an ordinal o is at position o - 1 - (skipped ordinals before o); an op's id is the
    number of judged invocations before its own."""
    import numpy as np

    src = read_meta(dataset).get("model_source", {}).get(label, 0)
    skipped = np.load(Path(dataset) / f"skipped-{src:03d}.npy", mmap_mode="r")
    invocations = np.load(Path(dataset) / f"invocations-{src:03d}.npy", mmap_mode="r")

    def pos(o: int) -> int:
        return int(o - 1 - np.searchsorted(skipped, o))

    return [replace(op, id=int(np.searchsorted(invocations, op.call)), call=pos(op.call),
                    ret=None if op.ret is None else pos(op.ret)) for op in ops]
