"""The storage port by role, the rules every store shares, and ``MemoryLog``, the reference.

- ``ports.py``: the roles (``LogReader``; ``LogStore(LogReader)``, which adds the writes) and
  the optional capabilities, each a small Protocol asked for with ``isinstance`` (``Bodies``,
  ``Indexes``, ``Checkpoints``, ``SideTables``, ``MerkleTree``, ``Erasure``, ``OnDisk``);
  ``store_of``, the store behind a Braid, a View or a store.
- ``rules.py``: the rules every store shares, each written once (``check_batch``, ``stage``,
  ``record_entry``, ``verify_bodies`` …).
- ``files.py``: files written beside a store (``write_atomic``, ``fsync_dir``).
- ``memory.py``: ``MemoryLog``. ``LmdbLog`` (braidlog.lmdb) is the other adapter.

The log's invariants (docs/requirements.md numbers them):

- A store assigns ``seq`` 1, 2, 3 … with no gaps; an append of one delta or a batch is atomic.
- Record ``seq`` is stored with its chain hash, ``hw`` (the highest ``ts``, microseconds since
  the epoch, of deltas ``1..seq``), its committed form ``entry`` (``record_entry``: the
  envelope and a salted commitment to the canonical delta bytes), its ``salt`` and its canonical
  delta bytes; ``hash = chain.link(hash[seq-1], seq, entry)`` and the Merkle tree's leaf
  ``seq - 1`` is ``entry``. ``body`` is ``hw`` (8 bytes big-endian) followed by the delta bytes.
- A delta id is stored once. Appending it again with identical canonical bytes returns the stored
  seq and writes nothing; with other bytes it is a ConflictError.
- ``expected_version`` (the number of deltas a braid holds) is checked before anything is written.
- There is no update and no delete.
"""

from ..chain import Row
from .memory import MemoryLog
from .ports import (
    CAPABILITIES,
    Admit,
    Bodies,
    BraidHead,
    Checkpoints,
    Erasure,
    Fronted,
    FullStore,
    Head,
    Indexes,
    LogReader,
    LogStore,
    MerkleTree,
    OnDisk,
    Progress,
    Record,
    SideTables,
    Staged,
    store_of,
)
from .rules import (
    HW_SIZE,
    MAX_REF_BYTES,
    Checked,
    IndexScans,
    chain_fault,
    check_batch,
    check_expected,
    hw_fault,
    hw_of,
    id_key,
    next_hw,
    record_entry,
    resolve_point,
    stage,
    ts_micros,
    verify_bodies,
)

__all__ = [
    "HW_SIZE", "MAX_REF_BYTES", "Head", "BraidHead", "Record", "Staged", "Row", "Progress", "Admit",
    "LogReader", "LogStore", "Bodies", "Indexes", "Checkpoints", "SideTables", "MerkleTree",
    "Erasure", "OnDisk", "FullStore", "CAPABILITIES", "Fronted", "store_of",
    "MemoryLog", "IndexScans", "Checked", "check_batch", "check_expected", "stage",
    "record_entry", "verify_bodies", "resolve_point", "id_key", "hw_of", "next_hw", "hw_fault",
    "chain_fault", "ts_micros",
]
