"""History → Parquet: the paired client ops, one row per op and per model that judges it,
bucketed by key and sorted by key and invocation within each row group.

Layout of the output directory:
- `ops/bucket=NNNNN/part-0.parquet`: every key lives in exactly one bucket (a stable hash of the
  key), so a reader can take a bucket at a time; rows are sorted by (model, key, call);
- `meta.json`: source, models, counts, the bucket count, and the nemesis events (few; the fault
  windows of the statistics come from them).

The conversion streams (`checker.history.iter_jsonl` and `spark_analysis.pairing`): memory is
bounded by the open invocations plus one row group per bucket, whatever the history's size. EDN
and etcd logs (small, external) are read whole with `checker.formats.read_history`.

Which model judges an op: its `workload` field mapped by `checker.run.WORKLOAD_MODELS` when that
model is among those asked for; an op without the field goes to every model asked for. The key
is the model's `partition_key` (P-compositionality); an op without one (it spans keys) makes the
whole model's history one group, as `checker.linear.race.split` does (the job applies that).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from checker.history import Event, Op
from checker.models import Model, build_model
from checker.run import WORKLOAD_MODELS
from spark_analysis.history_io import read_events
from spark_analysis.keys import bucket_of, encode_key
from spark_analysis.pairing import client_events, iter_ops

COLUMNS = (("model", "string"), ("key", "string"), ("id", "int64"), ("call", "int64"), ("ret", "int64"),
           ("process", "string"), ("f", "string"), ("status", "string"), ("value", "string"), ("output", "string"),
           ("error", "string"), ("call_time", "int64"), ("ret_time", "int64"), ("call_line", "int64"),
           ("ret_line", "int64"))
"""The ops table; `process`, `value`, `output` and `error` hold JSON text."""


def schema() -> Any:
    import pyarrow as pa  # the spark extra; imported late so the pure parts need none of it

    return pa.schema([(name, getattr(pa, kind)()) for name, kind in COLUMNS])
DEFAULT_BUCKETS = 128
ROW_GROUP = 100_000


@dataclass(frozen=True)
class ModelSpec:
    """A model as it travels to executors: name, semantics, and the label of its rows (the
    `model` column; the name unless several histories share one dataset)."""

    name: str
    initial: Any = None
    nil_read_any: bool = False
    tag: str | None = None

    @property
    def label(self) -> str:
        return self.name if self.tag is None else self.tag

    @property
    def checker(self) -> str:
        """Its entry in results.json: `linearizable-<label>`, or `linearizable` for label ''."""
        return "linearizable" + (f"-{self.label}" if self.label else "")

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "initial": self.initial, "nil_read_any": self.nil_read_any, "label": self.label}

    def build(self) -> Model:
        return build_model(self.name, self.initial, self.nil_read_any)


def _dumps(v: Any) -> str:
    return json.dumps(v, default=str, sort_keys=True)


def op_row(op: Op, model: str, key: str | None) -> dict[str, Any]:
    return {"model": model, "key": key, "id": op.id, "call": op.call, "ret": op.ret, "process": _dumps(op.process),
            "f": op.f, "status": op.status, "value": _dumps(op.value), "output": _dumps(op.output),
            "error": _dumps(op.error), "call_time": op.call_time, "ret_time": op.ret_time,
            "call_line": op.call_line, "ret_line": op.ret_line}


def row_dict(row: dict[str, Any]) -> dict[str, Any]:
    """The op a row was made from, as the dict `checker.linear.keyed` takes (the inverse of `op_row`)."""
    return {"id": int(row["id"]), "process": json.loads(row["process"]), "f": row["f"],
            "value": json.loads(row["value"]), "output": json.loads(row["output"]), "status": row["status"],
            "call": int(row["call"]), "ret": _int_or_none(row["ret"]), "error": json.loads(row["error"]),
            "call_time": _int_or_none(row["call_time"]), "ret_time": _int_or_none(row["ret_time"]),
            "call_line": int(row["call_line"]), "ret_line": int(row["ret_line"])}


def row_op(row: dict[str, Any]) -> Op:
    """The Op a row was made from."""
    return Op(**row_dict(row))


def _null(v: Any) -> bool:
    return v is None or v != v  # pandas gives NaN for missing ints


def _int_or_none(v: Any) -> int | None:
    return None if _null(v) else int(v)


@dataclass
class _BucketWriter:
    path: Path
    rows: list[dict[str, Any]] = field(default_factory=list)
    writer: Any = None

    def add(self, row: dict[str, Any]) -> None:
        self.rows.append(row)
        if len(self.rows) >= ROW_GROUP:
            self.flush()

    def flush(self) -> None:
        if not self.rows:
            return
        import pyarrow as pa
        import pyarrow.parquet as pq

        self.rows.sort(key=lambda r: (r["model"], r["key"] or "", r["call"]))
        if self.writer is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.writer = pq.ParquetWriter(self.path, schema(), compression="zstd")
        columns = {name: [r[name] for r in self.rows] for name, _ in COLUMNS}
        self.writer.write_table(pa.Table.from_pydict(columns, schema=self.writer.schema))
        self.rows = []

    def close(self) -> None:
        self.flush()
        if self.writer is not None:
            self.writer.close()


def models_for(event: Event, specs: Sequence[ModelSpec]) -> list[ModelSpec]:
    """The models that judge this op: for an op with a `workload` field, the spec labelled with
    that workload, else an unlabelled spec of its model (`checker.run.WORKLOAD_MODELS`); for an
    op without one, every spec."""
    w = event.extra.get("workload")
    if w is None:
        return list(specs)
    labelled = [s for s in specs if s.tag == str(w)]
    return labelled or [s for s in specs if s.tag is None and s.name == WORKLOAD_MODELS.get(str(w))]


def workload_specs(models: Sequence[str]) -> list[ModelSpec]:
    """One spec per workload whose model is among `models`, labelled with the workload (the
    results are then `linearizable-<workload>`, as the single-process run check names them)."""
    return [ModelSpec(m, tag=w) for w, m in WORKLOAD_MODELS.items() if m in models]


def _key_of(model: Model, op: Op) -> str | None:
    try:
        return encode_key(model.partition_key(op))
    except Exception:  # a malformed op: the whole model's history is one group, the search says why
        return None


class DatasetWriter:
    """Writes one Parquet dataset from one or more histories (each with its models)."""

    def __init__(self, out_dir: str | Path, buckets: int = DEFAULT_BUCKETS) -> None:
        self.out = Path(out_dir)
        shutil.rmtree(self.out / "ops", ignore_errors=True)  # a re-analysis starts clean
        (self.out / "meta.json").unlink(missing_ok=True)
        self.buckets = buckets
        self.writers: dict[int, _BucketWriter] = {}
        self.models: list[ModelSpec] = []
        self.model_buckets: dict[str, set[int]] = {}
        self.nemesis: list[Event] = []
        self.sources: list[str] = []
        self.counts = {"events": 0, "client_events": 0, "ops": 0, "rows": 0}

    def _counted(self, events: Iterable[Event], name: str) -> Iterator[Event]:
        for e in events:
            self.counts[name] += 1
            yield e

    def add(self, history: str | Path, models: Sequence[ModelSpec], fmt: str | None = None,
            notes: list[str] | None = None) -> None:
        """Stream one history in; its ops go to the models of `models_for`, labelled."""
        built = {m.label: m.build() for m in models}
        self.models += models
        self.sources.append(str(history))
        raw = self._counted(read_events(history, fmt, notes), "events")
        events = self._counted(client_events(raw, self.nemesis), "client_events")
        for op, invocation in iter_ops(events, str(history)):
            self.counts["ops"] += 1
            for spec in models_for(invocation, models):
                key = _key_of(built[spec.label], op)
                b = bucket_of(key, self.buckets)
                if b not in self.writers:
                    self.writers[b] = _BucketWriter(self.out / "ops" / f"bucket={b:05d}" / "part-0.parquet")
                self.writers[b].add(op_row(op, spec.label, key))
                self.model_buckets.setdefault(spec.label, set()).add(b)
                self.counts["rows"] += 1

    def close(self) -> dict[str, Any]:
        """Finish the files and write meta.json; returns the meta (counts: `events` read,
        `client_events` judged, `ops`, `rows`)."""
        for w in self.writers.values():
            w.close()
        meta = {"source": self.sources[0] if len(self.sources) == 1 else self.sources,
                "models": [m.to_json() for m in self.models], "buckets": self.buckets,
                "bucket_ids": sorted(self.writers), **self.counts,
                "model_buckets": {k: sorted(v) for k, v in self.model_buckets.items()},
                "nemesis": [e.to_json() for e in self.nemesis]}
        self.out.mkdir(parents=True, exist_ok=True)
        (self.out / "meta.json").write_text(json.dumps(meta, default=str))
        return meta


def convert(history: str | Path, out_dir: str | Path, models: Sequence[ModelSpec], fmt: str | None = None,
            buckets: int = DEFAULT_BUCKETS, notes: list[str] | None = None) -> dict[str, Any]:
    """Write one history's Parquet dataset and meta.json under `out_dir`; returns the meta.
    A torn last line is dropped with a note in `notes`."""
    w = DatasetWriter(out_dir, buckets)
    w.add(history, models, fmt, notes)
    return w.close()


def read_meta(out_dir: str | Path) -> dict[str, Any]:
    return json.loads((Path(out_dir) / "meta.json").read_text())
