"""Where recall keeps its files, how they are written (atomically) and checked (blake3 digests).

An index directory holds one ``meta.msgpack`` naming every file of the current generation with
its digest, plus the seq and chain hash the index covers; the meta file is replaced last, so a
crash mid-save leaves the previous generation intact. Anything whose digest, covered seq or
chain hash does not match is rebuilt from the log, never trusted.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO

from blake3 import blake3

from ..chain import digest
from ..erasure import ERASURES_BRAID
from ..errors import ValidationError
from ..store import OnDisk
from ..store.files import temp_path, write_atomic

__all__ = ["index_directory", "stale", "file_digest", "write_file", "write_with", "save_graph"]


def index_directory(store: Any, directory: Any, name: str, suffix: str) -> Path | None:
    """``<base>/<slug of name>.<suffix>``: base is ``directory``, or ``<store>/recall`` for an
    LMDB store; None (keep it in memory) for ``directory=False`` or a store in memory."""
    if directory is False:
        return None
    if directory is None or directory is True:
        root = store.path if isinstance(store, OnDisk) else None
        if root is None:
            if directory is True:
                raise ValidationError("directory", "this store lives in memory; pass a directory path")
            return None
        base = Path(root) / "recall"
    else:
        base = Path(directory)
    slug = re.sub(r"[^A-Za-z0-9_.-]", "_", name)[:40]
    if slug != name:
        slug += "-" + digest(name.encode()).hex()[:12]
    return base / f"{slug}.{suffix}"


def stale(store: Any, covered_seq: int, covered_hash: bytes) -> str | None:
    """Why an index saved as covering ``covered_seq`` (chain hash ``covered_hash``) does not
    belong to ``store``'s log, or None when it does: the log ends before it, or its chain there
    is another, or it was built before an erasure (both indexes, vector and keyword, check a
    saved index so)."""
    head = store.head()
    if covered_seq > head.seq:
        return f"it covers seq {covered_seq} but the log ends at {head.seq} (stale)"
    if store.hash_at(covered_seq) != covered_hash:
        return (f"its chain hash at seq {covered_seq} is not the log's (stale: the log it "
                "was built from is not this one)")
    erased_at = store.braid_head(ERASURES_BRAID).seq
    if erased_at > covered_seq:
        return (f"the log erased deltas at seq {erased_at}, after the seq it covers "
                f"({covered_seq}): it may hold their text or vectors")
    return None


def file_digest(path: Path) -> bytes:
    h = blake3()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 22):
            h.update(chunk)
    return h.digest()


def write_file(path: Path, data: bytes) -> bytes:
    """Write ``data`` to ``path`` atomically (store.files.write_atomic); its digest."""
    write_atomic(path, data)
    return digest(data)


class _Hashing:
    """A binary file that hashes what is written to it."""

    def __init__(self, f: BinaryIO) -> None:
        self.f, self.h = f, blake3()

    def write(self, data: bytes | memoryview) -> None:
        self.h.update(data)
        self.f.write(data)


def write_with(path: Path, fill: Callable[[Any], None]) -> bytes:
    """Write a file atomically by streaming ``fill(f)`` into it (no whole copy in memory); its digest."""
    hashed: list[_Hashing] = []

    def write(f: Any) -> None:
        hashed.append(_Hashing(f))
        fill(hashed[0])

    write_atomic(path, write)
    return hashed[0].h.digest()


def save_graph(g: Any, path: Path) -> bytes:
    """Save an hnswlib graph to ``path`` atomically; the file's digest."""
    tmp = temp_path(path)
    g.save_index(str(tmp))
    d = file_digest(tmp)
    os.replace(tmp, path)
    return d
