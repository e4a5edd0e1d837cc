"""The write-ahead file: a store's point of durability under ``durable="wal"``, with LMDB behind
it as the index of the log.

A durable LMDB commit flushes the device twice (its data pages, then its meta page). Under
``durable="wal"`` a commit flushes once: LMDB commits without syncing (MDB_NOSYNC), then the
records the commit appended are written to this file, which is synced (``fdatasync``) before
any writer of the commit returns. The file grows by a mebibyte of zeros at a time ahead of its
entries, up to ``SIZE``, so that most syncs change no file metadata (one device flush); a
checkpoint syncs LMDB and starts the file again from the top.

Invariants, each kept here or in ahead.py:

- **The checkpoint's snapshot is never overwritten.** A checkpoint syncs LMDB, copies the data
  file's two meta pages into this file's header, and keeps a read transaction open on that
  snapshot until the next checkpoint, so LMDB reuses none of its pages. An OS crash may leave
  the data file's later pages half written and a meta page that names them; recovery writes the
  two meta pages back, and LMDB opens the checkpoint's snapshot, intact.
- **What was acknowledged is in this file.** Recovery appends the entries past the snapshot's
  head again, each the same records with the same salts (so the same chain hashes), then
  checkpoints.
- **Recovery after a process crash is not recovery after an OS crash.** The header names the
  boot it was written in (Linux's ``boot_id``). In the same boot the page cache kept every LMDB
  commit, so the meta pages are left alone; after a reboot (and only if they changed since the
  checkpoint) they are put back.
- **One writing process.** The store's directory is held with ``flock(LOCK_EX)`` by the process
  writing under ``durable="wal"`` (locks.hold_writer; every other writer holds it shared), and
  this file with ``flock(LOCK_EX)`` by whoever writes or recovers it.

File layout (little-endian): two header slots of ``SLOT`` bytes (a checkpoint writes the slot of
its generation's parity, so a torn header write leaves the other), then entries from ``BODY``:
``generation u64 || first seq u64 || count u32 || length u32 || msgpack [[salt, delta bytes],
...] || blake3(all before)[:16]``. An entry counts only if its digest holds, its generation is
the header's and its first seq follows the entry before it. A header slot: ``MAGIC || generation
u64 || boot id (16) || meta-page size u32 || the data file's first two pages || blake3(all
before)``.
"""

from __future__ import annotations

import functools
import os
import struct
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import msgspec
from blake3 import blake3

from ..errors import StorageError
from ..store.files import fsync_dir, fsync_file

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX
    fcntl = None  # type: ignore[assignment]  # None: not POSIX

__all__ = ["WAL", "Entry", "Header", "WriteAhead", "boot_id", "first_pages", "restore_metas",
           "stale", "stale_header"]

WAL = "wal"  # the ``durable`` value, and the file's name in the store's directory
MAGIC = b"braidlog-wal-1\x00\x00"
SLOT = 1 << 16  # a header slot: room for two meta pages of up to 32 KiB
BODY = 2 * SLOT
SIZE = 64 << 20  # the file's length at most: a checkpoint comes when an entry would pass it
GROW = 1 << 20  # zeros written ahead of the entries when the file grows
_HEAD = struct.Struct("<16sQ16sI")
_ENTRY = struct.Struct("<QQII")
_DIGEST = 16
_items = msgspec.msgpack.Decoder(list[tuple[bytes, bytes]])
_encode = msgspec.msgpack.Encoder().encode


@functools.cache
def boot_id() -> bytes:
    """This boot's id (Linux): it changes when the machine restarts, not when a process does
    (so it is read once a process)."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            return uuid.UUID(f.read().strip()).bytes
    except (OSError, ValueError):
        raise StorageError("durable='wal' needs Linux's /proc/sys/kernel/random/boot_id to tell an "
                           "OS crash from a process crash", hint="open the store with durable=True"
                           ) from None


class Header(NamedTuple):
    generation: int
    boot: bytes
    metas: bytes  # the data file's first two pages at the checkpoint


class Entry(NamedTuple):
    first: int  # the seq of its first record
    items: list[tuple[bytes, bytes]]  # (salt, canonical delta bytes), one a record


class WriteAhead:
    """The open write-ahead file of a store (``path/wal``), held by this process."""

    def __init__(self, path: Path, *, create: bool) -> None:
        self.path = path / WAL
        flags = os.O_RDWR | os.O_CLOEXEC | (os.O_CREAT if create else 0)
        try:
            self.fd = os.open(self.path, flags, 0o644)
        except OSError as e:
            raise StorageError(f"cannot open {self.path}: {e}", hint="check its permissions") from e
        try:
            if fcntl is not None:
                fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(self.fd)
            raise StorageError(f"another process writes the store at {path} through its "
                               "write-ahead file", hint="write from that process, or close the "
                               "store there first") from None
        self.header: Header | None = None
        self.offset = BODY
        self.size = SIZE
        self.length = os.fstat(self.fd).st_size  # written (zeros ahead of the entries)

    # -- reading it back (recovery) ---------------------------------------------------------
    def read_header(self) -> Header | None:
        """The newest intact header, or None (a file never checkpointed)."""
        self.header = _read_header(self.fd)
        return self.header

    def entries(self) -> Iterator[Entry]:
        """The intact entries of the header's generation, in order. (Recovery checkpoints
        before anything is written again, which starts the file from the top.)"""
        if self.header is None:
            return
        gen, at, last = self.header.generation, BODY, 0
        while True:
            head = os.pread(self.fd, _ENTRY.size, at)
            if len(head) < _ENTRY.size:
                break
            g, first, count, n = _ENTRY.unpack(head)
            if g != gen or (last and first != last + 1) or n > self.size:
                break
            body = os.pread(self.fd, n + _DIGEST, at + _ENTRY.size)
            if len(body) < n + _DIGEST or blake3(head + body[:n]).digest()[:_DIGEST] != body[n:]:
                break
            try:
                items = _items.decode(body[:n])
            except msgspec.MsgspecError:
                break
            if len(items) != count:
                break
            at += _ENTRY.size + n + _DIGEST
            last = first + count - 1
            yield Entry(first, items)

    # -- writing ----------------------------------------------------------------------------
    def write(self, entries: list[Entry]) -> bool:
        """Write one commit's entries (``sync`` makes them durable); False, nothing written,
        when the file has no room left for them and a checkpoint must come instead."""
        assert self.header is not None
        out: list[bytes] = []
        at = self.offset
        for first, items in entries:
            payload = _encode(items)
            head = _ENTRY.pack(self.header.generation, first, len(items), len(payload))
            out += (head, payload, blake3(head + payload).digest()[:_DIGEST])
            at += _ENTRY.size + len(payload) + _DIGEST
        if at > self.size:
            return False
        if at > self.length:  # zeros ahead, so that the next syncs change no file metadata
            self.length = min(self.size, at + GROW)
            out.append(bytes(self.length - at))
        if out:
            _write(self.fd, b"".join(out), self.offset)
        self.offset = at
        return True

    def sync(self) -> None:
        """Make what ``write`` wrote durable (one ``fdatasync``)."""
        os.fdatasync(self.fd)

    def checkpoint(self, metas: bytes) -> None:
        """Start a new generation: LMDB is synced and ``metas`` are its first two pages now."""
        gen, boot = 0 if self.header is None else self.header.generation + 1, boot_id()
        raw = _HEAD.pack(MAGIC, gen, boot, len(metas) // 2) + metas
        if len(raw) + 32 > SLOT:
            raise StorageError(f"LMDB's pages ({len(metas) // 2} bytes) do not fit the "
                               "write-ahead file's header", hint="open the store with durable=True")
        new = self.length < BODY  # a new file: its length and its name made durable once
        if new:
            _write(self.fd, bytes(BODY - self.length), self.length)
            self.length = BODY
        _write(self.fd, raw + blake3(raw).digest(), (gen % 2) * SLOT)
        if new:
            fsync_file(self.path)
            fsync_dir(self.path.parent)
        else:
            os.fdatasync(self.fd)
        self.header = Header(gen, boot, metas)
        self.offset = BODY

    def close(self, *, remove: bool = False) -> None:
        """Let go of the file (removed when ``remove``: LMDB was synced just before)."""
        if remove:
            os.unlink(self.path)
            fsync_dir(self.path.parent)
        os.close(self.fd)  # drops the flock


def _write(fd: int, data: bytes, at: int) -> None:
    view = memoryview(data)
    while view:
        n = os.pwrite(fd, view, at)
        view, at = view[n:], at + n


def restore_metas(data: Path, metas: bytes) -> None:
    """Put the checkpoint's two meta pages back in LMDB's data file, synced."""
    fd = os.open(data, os.O_WRONLY | os.O_CLOEXEC)
    try:
        _write(fd, metas, 0)
    finally:
        os.close(fd)
    fsync_file(data)


def _read_header(fd: int) -> Header | None:
    """The newest intact header of the write-ahead file ``fd``, or None."""
    best: Header | None = None
    for slot in (0, 1):
        raw = os.pread(fd, SLOT, slot * SLOT)
        if len(raw) < _HEAD.size:
            continue
        magic, gen, boot, n = _HEAD.unpack_from(raw)
        end = _HEAD.size + 2 * n
        if magic != MAGIC or gen % 2 != slot or end + 32 > len(raw):
            continue
        if blake3(raw[:end]).digest() != raw[end:end + 32]:
            continue
        if best is None or gen > best.generation:
            best = Header(gen, boot, raw[_HEAD.size:end])
    return best


def first_pages(data: Path, psize: int) -> bytes:
    """The data file's two meta pages (of ``psize`` bytes each), as in the page cache now."""
    fd = os.open(data, os.O_RDONLY | os.O_CLOEXEC)
    try:
        return os.pread(fd, 2 * psize, 0)
    finally:
        os.close(fd)


def stale(header: Header, data: Path) -> bool:
    """Whether ``header`` was written in an earlier boot and the data file's meta pages are no
    longer its checkpoint's (so they may name pages of commits an OS crash cut short)."""
    if header.boot == boot_id():
        return False
    with open(data, "rb") as f:
        return f.read(len(header.metas)) != header.metas


def stale_header(path: Path, data: Path) -> Header | None:
    """The header of the write-ahead file in ``path``, if there is one and it is ``stale``."""
    try:
        fd = os.open(path / WAL, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        header = _read_header(fd)
    finally:
        os.close(fd)
    return header if header is not None and stale(header, data) else None
