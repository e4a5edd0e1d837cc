"""The file locks a store's processes hold beside LMDB's own: ``hold_shared`` (lock.mdb, shared
by every opener; an erasure takes it exclusively), ``hold_writer`` (the store's directory,
shared by every writing process, exclusive under durable="wal"), and ``lmdb_user`` (who holds
LMDB's lock). flock locks belong to an open file description, so closing another descriptor of
the file drops none of them (fcntl locks, LMDB's, are dropped by closing any)."""

from __future__ import annotations

import os
import struct
from pathlib import Path

from ..errors import StorageError

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX: no store-wide lock, erase refuses
    fcntl = None  # type: ignore[assignment]  # None: not POSIX

__all__ = ["hold_shared", "hold_writer", "release_lock", "lmdb_user"]


def hold_shared(path: Path, *, create: bool) -> int | None:
    """A descriptor of ``path/lock.mdb`` holding flock(LOCK_SH), waited for while an erasure
    holds it exclusively; None where the file cannot be opened (read-only media)."""
    if fcntl is None:
        return None
    for flags in ((os.O_RDWR | os.O_CREAT) if create else os.O_RDWR, os.O_RDONLY):
        try:
            fd = os.open(path / "lock.mdb", flags | os.O_CLOEXEC, 0o644)
            break
        except OSError:
            continue
    else:
        return None
    try:
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_SH)
                return fd
            except InterruptedError:
                continue
    except OSError:
        os.close(fd)
        return None


def release_lock(fd: int | None) -> None:
    if fd is not None:
        try:
            os.close(fd)
        except OSError:
            pass


def lmdb_user(fd: int) -> int | None:
    """The pid of another process holding LMDB's lock on lock.mdb (its first byte, read-locked
    by every process that has the environment open), or None. F_GETLK never reports this
    process's own locks."""
    query = struct.pack("hhqqi", fcntl.F_WRLCK, os.SEEK_SET, 0, 1, 0) + bytes(8)
    try:
        got = fcntl.fcntl(fd, fcntl.F_GETLK, query)
    except OSError:
        return None
    kind, _, _, _, pid = struct.unpack_from("hhqqi", got)
    return None if kind == fcntl.F_UNLCK else pid


def hold_writer(path: Path, *, alone: bool) -> int | None:
    """A descriptor of the store's directory holding flock: shared by every process that opens
    it for writing, exclusive (and refused, StorageError, while another writer has it) under
    durable="wal", which must be the store's only writing process: its recovery puts the data
    file back to its own checkpoint. None where directories cannot be locked."""
    if fcntl is None:
        return None
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        fcntl.flock(fd, (fcntl.LOCK_EX if alone else fcntl.LOCK_SH) | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        if alone:
            raise StorageError(f"another process has the store at {path} open for writing, and "
                               "durable='wal' must be its only writer", hint="close it there "
                               "first, or open this store durable=True") from None
        raise StorageError(f"another process writes the store at {path} with durable='wal', "
                           "which must be its only writer", hint="write through that process, "
                           "or close the store there first") from None
    except OSError:
        os.close(fd)
        return None
    return fd
