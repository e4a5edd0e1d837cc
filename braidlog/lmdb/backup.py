"""Backup and restore of an LMDB store (re-exported by braidlog.transfer).

**Backup** is LMDB's compacting copy (``MDB_CP_COMPACT``) taken inside one read transaction
(``OnDisk.copy``): consistent while a writer appends, and free of the live file's free pages. It
is verified against the live log, and a manifest beside it records the head it holds, when and
from where. **Restore** copies a backup into a new directory beside the target, verifies the
chain, the head recorded at backup time and every checkpoint there, and only then moves it into
place. Both use the store through its ports (``OnDisk``, ``Bodies``, ``Checkpoints``), never its
internals.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from msgspec import Struct

from ..errors import IntegrityError, StorageError
from ..projection import Projection
from ..replay import CheckpointCheck, check_checkpoints
from ..store import Head, OnDisk, Progress, store_of
from ..store.files import fsync_dir, fsync_file, write_atomic
from .log import LmdbLog

__all__ = ["MANIFEST", "BackupReport", "RestoreReport", "backup", "restore"]

#: The file a backup directory carries beside data.mdb: the head it holds, when and from where.
MANIFEST = "braidlog-backup.json"


class BackupReport(Struct, frozen=True):
    """A backup: where, the head it holds, its size in bytes, and its checkpoints."""

    path: str
    head: str
    size: int
    checkpoints: int
    taken_at: datetime


class RestoreReport(Struct, frozen=True):
    """A restore that verified: the head, how many deltas, and every checkpoint."""

    path: str
    head: str
    verified: int
    checkpoints: list[CheckpointCheck]


def _empty_target(path: Path, what: str) -> None:
    if path.exists() and (not path.is_dir() or any(path.iterdir())):
        raise StorageError(f"{what} {path} exists and is not empty",
                           hint="give a new path, or move the old one away first")


def backup(store: Any, dest: str | os.PathLike[str]) -> BackupReport:
    """An online, consistent copy of ``store`` (an LmdbLog or its path) into the new or empty
    directory ``dest``, verified against the live log, with a manifest beside it."""
    dest = Path(dest)
    _empty_target(dest, "backup target")
    store = store_of(store)
    own = not isinstance(store, OnDisk)  # a path: open it here
    source: Any = LmdbLog(store, create=False, readonly=True) if own else store
    created = not dest.exists()
    try:
        source.copy(dest, compact=True)
        taken_at = datetime.now(UTC)
        with LmdbLog(dest, create=False) as copy:
            head = copy.head()
            copy.verify()
            if source.hash_at(head.seq) != head.hash:
                raise IntegrityError(f"the backup's head {head} is not on the live log's chain",
                                     seq=head.seq)
            ckpts = len(copy.checkpoint_keys())
        manifest = {"braidlog": "backup", "format": 1, "head": str(head),
                    "source": str(source.path), "taken_at": taken_at.isoformat(),
                    "checkpoints": ckpts}
        write_atomic(dest / MANIFEST, (json.dumps(manifest, indent=2) + "\n").encode())
        (dest / "lock.mdb").unlink(missing_ok=True)
        _make_durable(dest)
        fsync_dir(dest.parent)  # dest itself may be new
    except BaseException:
        if created:
            shutil.rmtree(dest, ignore_errors=True)
        else:
            for child in dest.iterdir():
                shutil.rmtree(child) if child.is_dir() else child.unlink()
        raise
    finally:
        if own:
            source.close()
    size = (dest / "data.mdb").stat().st_size
    return BackupReport(str(dest), str(head), size, ckpts, taken_at)


def restore(backup_dir: str | os.PathLike[str], target: str | os.PathLike[str], *,
            projections: Iterable[Projection] | None = None,
            progress: Progress | None = None) -> RestoreReport:
    """Restore a backup into the new path ``target``: copy it beside the target, verify the
    chain, the head its manifest recorded and every checkpoint, then move it into place.

    On any failure the target is left absent (or empty, as it was) and the error says why.
    ``projections`` (default: every shipped one) decode the checkpoint states.
    """
    backup_dir, target = Path(backup_dir), Path(target)
    if not (backup_dir / "data.mdb").exists():
        raise StorageError(f"{backup_dir} is not a backup (no data.mdb)",
                           hint="give the directory `braidlog backup` wrote")
    _empty_target(target, "restore target")
    if projections is None:
        projections = _default_projections()
    manifest = _manifest(backup_dir)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.parent / f".{target.name}.restoring-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        with LmdbLog(backup_dir, create=False, readonly=True) as source:
            source.copy(tmp, compact=True)
        with LmdbLog(tmp, create=False) as restored:
            head = restored.head()
            if manifest is not None and str(head) != manifest["head"]:
                raise IntegrityError(f"the backup holds head {head}, its manifest recorded "
                                     f"{manifest['head']} when it was taken", seq=head.seq)
            verified = restored.verify(progress=progress)
            checks = check_checkpoints(restored, projections)
        _make_durable(tmp)
        if target.exists():
            target.rmdir()
        os.rename(tmp, target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    fsync_dir(target.parent)  # the rename; a failure here names it and leaves the verified target
    return RestoreReport(str(target), str(head), verified.seq, checks)


def _make_durable(directory: Path) -> None:
    """fsync a copy's data.mdb (LMDB's copy does not) and its directory's entries: with its
    parent's, a backup or restore that returned survives an OS crash."""
    fsync_file(directory / "data.mdb")
    fsync_dir(directory)


def _manifest(backup_dir: Path) -> dict[str, Any] | None:
    path = backup_dir / MANIFEST
    if not path.exists():
        return None
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
        Head.parse(manifest["head"])
    except (ValueError, KeyError, TypeError) as e:
        raise IntegrityError(f"{path} is damaged ({e}); restore without it only after checking "
                             "the head by hand") from None
    return manifest


def _default_projections() -> list[Projection]:
    from ..apps import discover

    return discover()
