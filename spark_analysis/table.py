"""The ops table: one row per client op and per model that judges it, the models as they
travel to executors (`ModelSpec`), and `RowSink`, which collects a history's ops as columns and
writes them to one Parquet file sorted by (bucket, model, key, call), one row group per bucket
(a reader that wants some buckets skips the other row groups by their statistics).

`call`, `ret` and `id` hold the ops' *ordinals* (spark_analysis.chunks): ordered as the
single-process checker's positions, which `spark_analysis.convert.to_positions` recovers.
`process`, `value`, `output` and `error` hold JSON text.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kraftlab.checker.history import Event, Op
from kraftlab.checker.models import Model, build_model
from kraftlab.checker.run import WORKLOAD_MODELS
from kraftlab.spark_analysis.keys import bucket_of, encode_key

COLUMNS = (("bucket", "int32"), ("model", "string"), ("key", "string"), ("id", "int64"), ("call", "int64"),
           ("ret", "int64"), ("process", "string"), ("f", "string"), ("status", "string"), ("value", "string"),
           ("output", "string"), ("error", "string"), ("call_time", "int64"), ("ret_time", "int64"),
           ("call_line", "int64"), ("ret_line", "int64"))
DEFAULT_BUCKETS = 128
_encode = json.JSONEncoder(sort_keys=True, default=str).encode  # one encoder: json.dumps(**kw) builds one per call


def _dumps(v: Any) -> str:
    """JSON text, with the common cases (nil, integers: processes, errors) short-cut."""
    if v is None:
        return "null"
    return str(v) if type(v) is int else _encode(v)


def schema() -> Any:
    import pyarrow as pa  # the spark extra; imported late so the pure parts need none of it

    return pa.schema([(name, getattr(pa, kind)()) for name, kind in COLUMNS])


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

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> ModelSpec:
        return cls(d["name"], d.get("initial"), bool(d.get("nil_read_any")), d.get("label"))

    def build(self) -> Model:
        return build_model(self.name, self.initial, self.nil_read_any)


def op_row(op: Op, model: str, key: str | None, bucket: int = 0) -> dict[str, Any]:
    """A row of the table (the inverse of `frame_ops`)."""
    return {"bucket": bucket, "model": model, "key": key, "id": op.id, "call": op.call, "ret": op.ret,
            "process": _dumps(op.process), "f": op.f, "status": op.status, "value": _dumps(op.value),
            "output": _dumps(op.output), "error": _dumps(op.error), "call_time": op.call_time,
            "ret_time": op.ret_time, "call_line": op.call_line, "ret_line": op.ret_line}


OP_COLUMNS = ("id", "process", "f", "value", "output", "status", "call", "ret", "error", "call_time", "ret_time",
              "call_line", "ret_line")
JSON_COLUMNS = frozenset({"process", "value", "output", "error"})
CHECK_COLUMNS = ("model", "key", "id", "process", "f", "value", "output", "status", "call", "ret", "error", "call_line")
"""What a key's search reads: a frame of only these decodes with no times and no completion lines
(they serve explanations, which read every column)."""
_ABSENT = {"call_time": None, "ret_time": None, "ret_line": 0}


def _decode_all(texts: list[str]) -> list[Any]:
    """Many JSON texts in one call of the C decoder (one per text costs its Python wrapper each time)."""
    return json.loads("[" + ",".join(texts) + "]") if texts else []


def _rows(pdf: Any, key_column: str) -> Iterator[tuple[str, str | None, dict[str, Any]]]:
    """(model, key, op as a dict of `Op` fields) per row, in the frame's order: columns taken
    whole, JSON columns decoded whole; a column of `_ABSENT` left out of the frame is its default."""
    cols = [_decode_all(pdf[c].tolist()) if c in JSON_COLUMNS else pdf[c].tolist() if c in pdf.columns
            else [_ABSENT[c]] * len(pdf) for c in OP_COLUMNS]
    for model, key, i, proc, f, value, output, status, call, ret, error, ct, rt, cl, rl in zip(
            pdf["model"].tolist(), pdf[key_column].tolist(), *cols, strict=True):
        yield model, (key if isinstance(key, str) else None), {  # None, NaN or NA: the key null
            "id": int(i), "process": proc, "f": f, "value": value, "output": output, "status": status,
            "call": int(call), "ret": int_or_none(ret), "error": error, "call_time": int_or_none(ct),
            "ret_time": int_or_none(rt), "call_line": int(cl), "ret_line": int(rl)}


def frame_ops(pdf: Any, key_column: str = "key") -> dict[str | None, list[dict[str, Any]]]:
    """A pandas frame of one model's rows → each key's ops as dicts of `Op` fields (what
    `checker.linear.keyed` takes; `Op(**d)` makes the op), in call order."""
    out: dict[str | None, list[dict[str, Any]]] = {}
    for _model, key, op in _rows(pdf.sort_values([key_column, "call"], kind="stable"), key_column):
        out.setdefault(key, []).append(op)
    return out


def frame_runs(pdf: Any) -> list[tuple[str, str | None, list[dict[str, Any]]]]:
    """A pandas frame whose rows are grouped by (model, key) already (a bucket file's order) →
    each run's (model, key, ops), in the frame's order."""
    out: list[tuple[str, str | None, list[dict[str, Any]]]] = []
    for model, key, op in _rows(pdf, "key"):
        if not out or out[-1][0] != model or out[-1][1] != key:
            out.append((model, key, []))
        out[-1][2].append(op)
    return out


def int_or_none(v: Any) -> int | None:
    """A missing int is None, NaN or pandas.NA depending on the column's dtype."""
    if v is None:  # the common case of a column left out: no exception raised and caught per op
        return None
    try:
        return int(v)
    except (TypeError, ValueError):
        return None


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


class RowSink:
    """Collects ops as columns (one row per op and model that judges it); `write` sorts them
    and writes one Parquet file."""

    def __init__(self, specs: Sequence[ModelSpec], buckets: int) -> None:
        self.specs = list(specs)
        self.built = {s.label: s.build() for s in specs}
        self.buckets = buckets
        self.columns: dict[str, list[Any]] = {}
        self.lists: list[list[Any]] = []
        self._reset()
        self.whole: set[str] = set()  # models with an op of no key: checked whole
        self.files: list[tuple[str, list[int]]] = []  # each file written and the bucket of each of its row groups
        self.ops = 0
        self.written = 0

    def _reset(self) -> None:
        self.columns = {name: [] for name, _ in COLUMNS}
        self.lists = list(self.columns.values())  # in op_row's order

    @property
    def rows(self) -> int:
        return self.written + len(self.columns["id"])

    def add(self, op: Op, invocation: Event) -> None:
        self.ops += 1
        for spec in models_for(invocation, self.specs):
            key = _key_of(self.built[spec.label], op)
            b = bucket_of(key, self.buckets)
            if key is None:
                self.whole.add(spec.label)
            for column, v in zip(self.lists, op_row(op, spec.label, key, b).values(), strict=True):
                column.append(v)

    def write(self, path: Path) -> None:
        """One file, sorted by (bucket, model, key, call), a row group per bucket; none if empty."""
        if not self.columns["id"]:
            return
        import pyarrow as pa
        import pyarrow.parquet as pq

        table = pa.Table.from_pydict(self.columns, schema=schema()).sort_by(
            [("bucket", "ascending"), ("model", "ascending"), ("key", "ascending"), ("call", "ascending")])
        self._reset()
        self.written += len(table)
        buckets = table.column("bucket").to_pylist()
        path.parent.mkdir(parents=True, exist_ok=True)
        groups: list[int] = []
        with pq.ParquetWriter(path, table.schema, compression="zstd") as writer:
            start = 0
            for i in range(1, len(buckets) + 1):
                if i == len(buckets) or buckets[i] != buckets[start]:
                    writer.write_table(table.slice(start, i - start), row_group_size=i - start)
                    groups.append(buckets[start])
                    start = i
        self.files.append((str(path), groups))
