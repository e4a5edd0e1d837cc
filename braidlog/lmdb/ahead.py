"""``Ahead``: one environment's ``durable="wal"`` side: its write-ahead file (wal.py), the read
transaction that pins the last checkpoint's snapshot, the checkpoints and the recovery. env.py
owns the environment and calls in at the points named below; the file's format and the
invariants are wal.py's.

- At open (``take``, before LMDB maps the file): the file is opened; after a restart the
  checkpoint's meta pages are put back; its entries wait to be appended again (``pending``).
- Once LMDB is open (``hold``): the checkpoint's snapshot is pinned, the map grown for the replay.
- ``recover``: the log appends the entries again, then a checkpoint (or, opened durable=True,
  a sync and the file removed).
- Each group commit: ``write`` just before LMDB commits (the entries, unsynced), ``durable``
  just after (the sync, or a checkpoint).
- ``resize``: a map resize ends every transaction (py-lmdb): a checkpoint, then the pin again.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ..errors import StorageError
from .wal import WAL, Entry, WriteAhead, first_pages, restore_metas, stale, stale_header

__all__ = ["Ahead", "CHECKPOINT_COMMITS", "CHECKPOINT_PAGES", "refuse_stale"]

#: A checkpoint after this many commits, or once LMDB's file has grown by this many pages,
#: since the last one: the pinned snapshot keeps LMDB from reusing the pages freed since, so
#: until the next checkpoint every page a commit writes is a new one (reused after it).
CHECKPOINT_COMMITS = 128
CHECKPOINT_PAGES = 1024


class Ahead:
    """The write-ahead side of the environment ``lenv`` (py-lmdb's) at ``path``."""

    def __init__(self, path: Path, wal: WriteAhead, pending: list[Entry], *, mode: bool) -> None:
        self.path, self.wal = path, wal
        self.mode = mode  # durable="wal" (else: only recovering a file another writer left)
        self.pending: list[Entry] | None = pending  # to append again, until recovered
        self.pin: Any = None  # the read transaction on the last checkpoint's snapshot
        self._pinned_pages = 0  # LMDB's last page at the last checkpoint
        self._commits = 0  # since the last checkpoint
        self._wrote = False  # the leader's group is in the file, unsynced
        self.broken = False  # a failed commit's entry is in the file: no commit may follow it
        self._recovery = threading.Lock()
        self.lenv: Any = None

    @classmethod
    def take(cls, path: Path, *, mode: bool) -> Ahead | None:
        """Open the write-ahead file (``mode``: durable="wal"), or the one a writer under it left,
        before LMDB maps the data file; None when there is nothing to do."""
        if not mode and not (path / WAL).exists():
            return None
        wal = WriteAhead(path, create=mode)
        try:
            header = wal.read_header()
            if header is None:  # never checkpointed: nothing was acknowledged through it
                return cls(path, wal, [], mode=mode)
            data = path / "data.mdb"
            if stale(header, data):
                restore_metas(data, header.metas)
            return cls(path, wal, list(wal.entries()), mode=mode)
        except BaseException:
            wal.close()
            raise

    def hold(self, lenv: Any, max_map: int) -> None:
        """Pin the snapshot the header names (untouched until recovery checkpoints), the map
        grown first (to ``max_map`` at most) for what the replay appends: a resize would end
        the pin."""
        self.lenv = lenv
        if self.pending:
            size = os.stat(self.path / "data.mdb").st_size
            need = size + 16 * sum(len(d) + 256 for e in self.pending for _, d in e.items) + (64 << 20)
            if need > lenv.info()["map_size"]:
                lenv.set_mapsize(min(need, max_map))
        self.pin = lenv.begin()  # (no other process writes: locks.hold_writer)

    def recover(self, replay: Callable[[list[Entry]], None], sync: Callable[[], None]) -> bool:
        """``replay`` the entries (the log's), once; then checkpoint, or (not ``mode``) ``sync``
        LMDB and remove the file. True when the file is gone."""
        with self._recovery:
            if self.pending is None:
                return False
            replay(self.pending)
            self.pending = None
            if self.mode:
                self.checkpoint()
                return False
            sync()
            self.wal.close(remove=True)
            self._unpin()
            return True

    def checkpoint(self) -> None:
        """Sync LMDB, start the file's next generation with LMDB's meta pages, and pin the new
        snapshot in place of the last. Only with no write transaction open."""
        self._checkpoint_file()
        pin, self.pin = self.pin, self.lenv.begin()
        if pin is not None:
            pin.abort()

    def _checkpoint_file(self) -> None:
        self.lenv.sync(True)
        self.wal.checkpoint(first_pages(self.path / "data.mdb", self.lenv.stat()["psize"]))
        self._pinned_pages, self._commits = self.lenv.info()["last_pgno"], 0

    def _unpin(self) -> None:
        if self.pin is not None:
            self.pin.abort()
            self.pin = None

    # -- each commit ----------------------------------------------------------------------------
    def write(self, redo: Sequence[list[Entry] | None]) -> None:
        """Just before LMDB commits a group: its writers' entries written to the file (``redo``:
        each writer's, None for one whose writes cannot be written there: then nothing is, and
        ``durable`` checkpoints)."""
        self._wrote = False
        if self.broken:
            raise StorageError(f"the write-ahead file of {self.path} holds an entry of a commit "
                               "that failed, and the checkpoint that would leave it behind "
                               "failed too", hint="close the store and open it again (it recovers)")
        if self.pending is not None or any(r is None for r in redo):
            return
        try:
            self._wrote = self.wal.write([e for r in redo for e in r or ()])
        except OSError as e:
            raise StorageError(f"writing the commit to {self.wal.path} failed: {e}",
                               hint="check the disk; nothing of it was committed") from e

    def durable(self, *, committed: bool) -> None:
        """Just after LMDB committed the group (unsynced): the file synced, or a checkpoint when
        the group was not written there or LMDB's file grew far enough past the last one. After
        a failed commit whose group was written, a checkpoint leaves its entry behind in an
        older generation. Raises OSError or lmdb.Error: the commit is in LMDB, unsynced, and
        the next open recovers it."""
        if self.pending is not None:
            return
        wrote, self._wrote = self._wrote, False
        if not committed and not wrote:
            return
        if wrote and committed:
            self.wal.sync()
        self._commits += 1
        if (not wrote or not committed or self._commits >= CHECKPOINT_COMMITS
                or self.lenv.info()["last_pgno"] > self._pinned_pages + CHECKPOINT_PAGES):
            try:
                self.checkpoint()
            except BaseException:
                self.broken = self.broken or (wrote and not committed)
                raise

    def resize(self, size: int) -> None:
        """LMDB's set_mapsize (under the environment's exclusive gate): py-lmdb ends every
        transaction of the environment there, the pin among them, so a checkpoint comes first
        and the pin is taken again on the same snapshot (no other writer can commit meanwhile)."""
        if self.pending is not None:
            raise StorageError(f"recovering {self.path} needs a larger map than the one it "
                               "reserved", hint="open it again with a larger map_size")
        self._checkpoint_file()
        self.pin = None
        self.lenv.set_mapsize(size)
        self.pin = self.lenv.begin()

    def close(self) -> None:
        """Checkpoint (a reopening recovers nothing), then let go of the pin and the file."""
        try:
            if self.pending is None:
                self.checkpoint()
        finally:
            self._unpin()
            self.wal.close()


def refuse_stale(path: Path) -> None:
    """For a read-only opener, which cannot recover: StorageError while recovery is due."""
    data = path / "data.mdb"
    if data.exists() and stale_header(path, data) is not None:
        raise StorageError(f"the store at {path} was last written through its write-ahead file, "
                           "and the machine restarted before it was closed",
                           hint="open it once for writing (it recovers), then read-only")
