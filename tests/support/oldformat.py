"""Turn a store into what an earlier braidlog wrote, for the upgrade tests.

Formats 1 to 3 stored a record as ``chain hash || hw || canonical delta bytes`` with the chain
``BLAKE3(prev || seq || hw || delta bytes)`` and (from format 2) a BLAKE3 tree; format 2 added the
``tree`` and ``notes`` tables, format 3 the ``idh`` table. Written from that description, with
no code of braidlog's.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import lmdb
from blake3 import blake3

FIXTURES = Path(__file__).parent.parent / "fixtures"

SINCE = {b"tree": 2, b"notes": 2, b"idh": 3}


def release_facts(name: str) -> dict[str, Any]:
    """The facts written down beside the release fixture ``name`` (``format3``, ``format4``)."""
    return json.loads((FIXTURES / name / "facts.json").read_text())


def release_store(name: str, path: Path) -> Path:
    """The store of the release fixture ``name`` unpacked into the new directory ``path``."""
    path.mkdir()
    (path / "data.mdb").write_bytes(gzip.decompress((FIXTURES / name / "data.mdb.gz").read_bytes()))
    return path


def old_rows(rows: list[tuple[bytes, bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    """(key, format-3 value) for (key, hw, delta bytes) in seq order."""
    prev, out = bytes(32), []
    for key, hw, data in rows:
        prev = blake3(prev + key + hw + data).digest()
        out.append((key, prev + hw + data))
    return out


def downgrade(path, version: int) -> bytes:
    """Rewrite the store at ``path`` as format ``version`` (1..3) wrote it; its old head hash.
    Format 5's ``indexed-to`` mark goes (ValueError unless every record is indexed: no earlier
    format left any record's entries to a later commit).

    The tree table of a format-2/3 store is left empty (the upgrade rebuilds it either way)."""
    env = lmdb.open(str(path), max_dbs=16)
    with env.begin(write=True) as txn:
        log = env.open_db(b"log", txn=txn)
        rows = []
        for key, value in txn.cursor(log):
            value = bytes(value)
            n, k = int.from_bytes(value[40:42], "big"), value[42]  # entry, tree nodes
            rows.append((bytes(key), value[32:40], value[43 + n + 32 * k + 16:]))
        meta = env.open_db(b"meta", txn=txn)
        mark = txn.get(b"indexed-to", db=meta)  # format 5's: no earlier format has one
        if mark is not None and rows and int.from_bytes(mark, "big") < int.from_bytes(rows[-1][0], "big"):
            raise ValueError("an earlier format indexes every record in its own commit: write "
                             "the store in batches of 64 or more, or repair its indexes, first")
        txn.delete(b"indexed-to", db=meta)
        converted = old_rows(rows)
        for key, value in converted:
            txn.put(key, value, db=log)
        for name, since in SINCE.items():
            db = env.open_db(name, txn=txn)
            txn.drop(db, delete=since > version)
        txn.put(b"format", str(version).encode(), db=env.open_db(b"meta", txn=txn))
    env.close()
    return converted[-1][1][:32] if converted else bytes(32)
