"""Files written beside a store, each rule once: replacing a file atomically (``write_atomic``)
and making a directory's entries (``fsync_dir``) or a file written without syncing
(``fsync_file``) durable.

- ``write_atomic`` writes to a temporary file beside the target (hidden, named for this process
  and thread, ending in ``.tmp``), flushes and fsyncs it, then renames it over the target: a
  reader sees the old file or the new one, never a part. A write that fails removes its
  temporary file and raises the OSError. The rename itself is made durable only by an fsync of
  the directory: the files written this way (recall indexes, tiles, cosignatures) are rebuilt or
  written again when lost.
- ``fsync_dir`` makes a rename, link or creation in a directory survive an OS crash. An error
  is raised (StorageError), since the entry may then be lost and a caller that promised
  durability must not go on as if it were not; only a filesystem that cannot fsync a directory
  at all (EINVAL, ENOTSUP: some network and FUSE filesystems) is let pass, as SQLite does, since
  nothing more can be done there.
- ``fsync_file`` syncs a file another writer left unsynced (LMDB's copy, for a backup); an error
  is raised (StorageError) for the same reason.
"""

from __future__ import annotations

import errno
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

from ..errors import StorageError

__all__ = ["temp_path", "write_atomic", "fsync_dir", "fsync_file"]

#: The errors of an fsync of a directory on a filesystem that cannot do it (nothing to do there).
_UNSUPPORTED = {errno.EINVAL, errno.ENOTSUP, errno.EOPNOTSUPP}


def temp_path(path: Path) -> Path:
    """The temporary file a write of ``path`` goes through: beside it, hidden, unique to this
    process and thread, ending in ``.tmp``."""
    return path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")


def write_atomic(path: str | os.PathLike[str], content: bytes | Callable[[BinaryIO], None]) -> None:
    """Replace ``path`` with ``content`` (bytes, or a function that writes them to the open file)
    in one step: a temporary file beside it, flushed, fsynced and renamed over it."""
    target = Path(path)
    tmp = temp_path(target)
    try:
        with open(tmp, "wb") as f:
            if isinstance(content, bytes | bytearray | memoryview):
                f.write(content)
            else:
                content(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def fsync_dir(path: str | os.PathLike[str]) -> None:
    """Make the entries of directory ``path`` durable (after a file in it was renamed, linked
    or created); StorageError when that fails, except on a filesystem that cannot do it."""
    try:
        _fsync(path, os.O_RDONLY | os.O_DIRECTORY)
    except OSError as e:
        if e.errno in _UNSUPPORTED:
            return
        raise StorageError(f"cannot make the entries of {path} durable (fsync of the directory: "
                           f"{e})", hint="check the filesystem and the directory's permissions; "
                           "the last change in it may not survive an OS crash") from e


def fsync_file(path: str | os.PathLike[str]) -> None:
    """Make the content of the file ``path`` durable (one written without syncing, as LMDB's
    copy writes); StorageError when that fails."""
    try:
        _fsync(path, os.O_RDONLY)
    except OSError as e:
        raise StorageError(f"cannot make {path} durable (fsync: {e})",
                           hint="check the disk and the filesystem") from e


def _fsync(path: str | os.PathLike[str], flags: int) -> None:
    fd = os.open(path, flags)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
