"""A saved vector index: what ``<store>/recall/<space>.<metric>/`` holds and how it is written
and read back. The files of one generation (columns, vectors, head graph, as-of blocks) are
written first, then ``meta.msgpack`` naming each with its digest and the seq and chain hash the
index covers, so a crash mid-save leaves the previous generation intact (``files.py``). Reading
refuses, with the reason, anything that does not match: the caller rebuilds from the log."""

from __future__ import annotations

from pathlib import Path
from typing import Any, NamedTuple

import hnswlib
import msgspec
from msgspec import Struct

from ..delta import new_id
from .columns import Columns
from .files import file_digest, save_graph, stale, write_file, write_with
from .vectors import Rows

__all__ = ["FORMAT", "Saved", "write_index", "read_index"]

FORMAT = 2  # 2: columns in numpy, vectors in chunks; an index of format 1 is rebuilt
_GENERATION_FILES = ("rows-", "vectors-", "head-")
_meta_encoder = msgspec.msgpack.Encoder()


class _Meta(Struct, frozen=True):
    """The persisted index's facts: what it covers and the digest of every file it names."""

    format: int
    space: str
    metric: str
    params: dict[str, int]
    dim: int
    count: int
    covered_seq: int
    covered_hash: bytes
    generation: str
    files: dict[str, bytes]
    head_count: int


class Saved(NamedTuple):
    """An index as saved: its vectors and columns (None when it holds none), its head graph
    (None when there is none yet), the as-of blocks' file digests, what it covers."""

    dim: int
    count: int  # type: ignore[assignment]  # a field, named as the index's, shadows tuple.count
    cols: Columns
    rows: Rows | None
    head: Any
    head_count: int
    block_digests: dict[str, bytes]
    covered_seq: int
    covered_hash: bytes
    generation: str


def write_index(d: Path, index: Saved, *, space: str, metric: str, params: dict[str, int]) -> str:
    """Write ``index`` as a new generation in ``d`` (its ``generation`` field is ignored), then
    drop the files of earlier ones; the new generation's name."""
    d.mkdir(parents=True, exist_ok=True)
    gen = new_id()
    files: dict[str, bytes] = {}
    rows = index.rows
    files[f"rows-{gen}.msgpack"] = write_file(d / f"rows-{gen}.msgpack", index.cols.encode())
    files[f"vectors-{gen}.f32"] = write_with(d / f"vectors-{gen}.f32",
                                             rows.write if rows is not None else (lambda f: None))
    if index.head is not None:
        files[f"head-{gen}.hnsw"] = save_graph(index.head, d / f"head-{gen}.hnsw")
    files.update(index.block_digests)
    meta = _Meta(FORMAT, space, metric, params, index.dim, index.count, index.covered_seq,
                 index.covered_hash, gen, files, index.head_count)
    write_file(d / "meta.msgpack", _meta_encoder.encode(meta))
    for p in d.iterdir():
        if p.name != "meta.msgpack" and p.name not in files and p.name.startswith(_GENERATION_FILES) \
                and not p.name.endswith(".tmp"):
            p.unlink(missing_ok=True)
    return gen


def read_index(d: Path, *, space: str, metric: str, params: dict[str, int], store: Any,
               min_capacity: int, ef: int) -> Saved | str:
    """The index saved in ``d``, or why it cannot be used (then nothing of it is trusted). Its
    head graph can hold at least ``min_capacity`` vectors, searched with ``ef``."""
    try:
        meta = msgspec.msgpack.decode((d / "meta.msgpack").read_bytes(), type=_Meta)
    except (OSError, msgspec.DecodeError) as e:
        return f"its meta file does not decode ({e})"
    if meta.format != FORMAT:
        return f"format {meta.format}, this braidlog reads {FORMAT}"
    if meta.space != space or meta.metric != metric:
        return f"it indexes space {meta.space!r} with {meta.metric}"
    if meta.params != params:
        return f"it was built with {meta.params}, this index uses {params}"
    why = stale(store, meta.covered_seq, meta.covered_hash)
    if why is not None:
        return why
    for name, want in meta.files.items():
        if name.startswith(_GENERATION_FILES):
            p = d / name
            if not p.exists():
                return f"{name} is missing"
            if file_digest(p) != want:
                return f"{name} is damaged (digest mismatch)"
    gen, n = meta.generation, meta.count
    try:
        cols = Columns.decode((d / f"rows-{gen}.msgpack").read_bytes())
    except (msgspec.DecodeError, ValueError, KeyError) as e:
        return f"its rows do not decode ({e})"
    if cols.n != n or (n and meta.dim <= 0):
        return "its rows and meta disagree on the count"
    rows = None
    if n:
        try:
            rows = Rows.read(d / f"vectors-{gen}.f32", meta.dim, n, home=d)
        except ValueError as e:
            return str(e)
    head = None
    if meta.head_count:
        head = hnswlib.Index(space="ip", dim=meta.dim)
        try:
            head.load_index(str(d / f"head-{gen}.hnsw"), max_elements=max(n, min_capacity))
        except RuntimeError as e:
            return f"its head graph does not load ({e})"
        if head.get_current_count() != meta.head_count:
            return "its head graph holds another count than its meta says"
        head.set_ef(ef)
        head.set_num_threads(1)
    return Saved(meta.dim, n, cols, rows, head, meta.head_count,
                 {k: v for k, v in meta.files.items() if k.startswith("L")},
                 meta.covered_seq, meta.covered_hash, gen)
