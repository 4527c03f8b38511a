"""The dataset's final layout: every key's rows whole in ONE file, so the job reads each file as
one Spark partition and needs no shuffle.

The conversion's workers write a file per chunk of history (a row group per key bucket); here
the rows of each bucket are gathered from every chunk file into `bucket-BBBBB.parquet`, sorted by
(model, key, call): a key's rows are one contiguous run in one file. A model with an op of no
key (its history cannot be split, as `checker.linear.race.split` decides) is checked whole: its
rows go to `whole-III.parquet` instead, key null, sorted by call. Workers take ranges of
buckets; each opens the chunk files once and holds one bucket's rows at a time.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROW_GROUP_ROWS = 65_536
"""Rows per row group of a bucket file: bounds what a reader decodes at once."""


def bucket_name(bucket: int) -> str:
    return f"bucket-{bucket:05d}.parquet"


def whole_name(index: int) -> str:
    return f"whole-{index:03d}.parquet"


@dataclass(frozen=True)
class Written:
    """A file of the dataset and the models whose rows it holds."""

    name: str
    models: tuple[str, ...]


@dataclass(frozen=True)
class BucketTask:
    """Gather `buckets` from the chunk files (each with the bucket of each of its row groups),
    leaving out the rows of the models checked whole."""

    files: tuple[tuple[str, tuple[int, ...]], ...]
    buckets: tuple[int, ...]
    whole: tuple[str, ...]
    out_dir: str


@dataclass(frozen=True)
class WholeTask:
    """Gather one model checked whole from every chunk file."""

    files: tuple[str, ...]
    model: str
    index: int
    out_dir: str


def _write(table: Any, path: Path) -> Written:
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    pq.write_table(table, path, compression="zstd", row_group_size=ROW_GROUP_ROWS)
    return Written(path.name, tuple(sorted(pc.unique(table.column("model")).to_pylist())))


def gather_buckets(task: BucketTask) -> list[Written]:
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    opened = [(pq.ParquetFile(f), {b: i for i, b in enumerate(groups)}) for f, groups in task.files]
    out: list[Written] = []
    for b in task.buckets:
        parts = [pf.read_row_group(groups[b]) for pf, groups in opened if b in groups]
        if not parts:
            continue
        table = pa.concat_tables(parts)
        if task.whole:
            table = table.filter(pc.invert(pc.is_in(table.column("model"), pa.array(task.whole, pa.string()))))
        if len(table):
            table = table.sort_by([("model", "ascending"), ("key", "ascending"), ("call", "ascending")])
            out.append(_write(table, Path(task.out_dir) / bucket_name(b)))
    return out


def gather_whole(task: WholeTask) -> list[Written]:
    import pyarrow as pa
    import pyarrow.dataset as pads

    table = pads.dataset(list(task.files), format="parquet").to_table(filter=pads.field("model") == task.model)
    table = table.set_column(table.schema.get_field_index("key"), "key", pa.nulls(len(table), pa.string()))
    return [_write(table.sort_by([("call", "ascending")]), Path(task.out_dir) / whole_name(task.index))]


def plan(files: list[tuple[str, list[int]]], whole: list[str], out_dir: Path,
         tasks: int) -> list[BucketTask | WholeTask]:
    """The gathering work in about `tasks` bucket ranges, plus a task per model checked whole."""
    buckets = sorted({b for _, groups in files for b in groups})
    chunk_files = tuple((f, tuple(groups)) for f, groups in files)
    n = max(1, min(tasks, len(buckets)))
    cuts = [len(buckets) * i // n for i in range(n + 1)]
    out: list[BucketTask | WholeTask] = [BucketTask(chunk_files, tuple(buckets[cuts[i]:cuts[i + 1]]), tuple(whole),
                                                    str(out_dir)) for i in range(n) if cuts[i + 1] > cuts[i]]
    out += [WholeTask(tuple(f for f, _ in files), m, i, str(out_dir)) for i, m in enumerate(whole)]
    return out


def gather(task: BucketTask | WholeTask) -> list[Written]:
    """A worker's entry point."""
    return gather_buckets(task) if isinstance(task, BucketTask) else gather_whole(task)
