"""The LMDB environment under a store: the only module that imports ``lmdb`` (but for its
structural check of the file, pages.py).

It opens a store's file (refusing one it cannot map safely), keeps one environment per path per
process, survives ``fork``, grows the map, runs every transaction with the retries LMDB asks
for, and turns every ``lmdb`` exception into a braidlog one. ``LmdbLog`` (log.py, its
format in format.py) keeps the log's tables on top of it and never sees ``lmdb`` itself.

Hazards, handled here so callers never meet them (docs/operations.md has the long form):

- A file cut short is refused before it is mapped (mapping it and touching a page past its end
  kills the process with SIGBUS): the size is compared with the last page its meta page names.
- Every transaction is a ``with`` block run through ``read``/``write``, which retry on
  MDB_MAP_RESIZED (another process grew the map: adopt its size) and, for writes, on
  MDB_MAP_FULL (double the map and run the write again). ``set_mapsize`` is only called with no
  transaction of this process open (the ``Gate``). The transactions that open the tables run
  through the same retry.
- Writers in several threads share commits (``Env.write``'s queue): each ``fn`` of a group runs
  in a nested transaction after those before it and is undone alone if it raises; a read made
  from inside a ``fn`` reads its transaction; a write begun from inside one is refused.
- ``durable="wal"`` (ahead.py, wal.py): LMDB commits unsynced, each group's appends are written
  to the write-ahead file just before LMDB commits and synced just after, and every other
  write checkpoints. A map resize ends every transaction of the environment, the checkpoint's
  pin among them: it checkpoints first. A forked child never closes a pinned environment.
- ``fork``: py-lmdb refuses to open an environment that is already open in the process, and a
  forked child inherits the parent's. After a fork, the child closes the inherited environments
  that no thread was using at the moment of the fork (closing touches only the child's own copy
  of the map, its own file descriptors and reader slots of its own pid, none), so the child can
  open the store again. One that a thread was inside cannot be closed safely (its transaction
  and reader slot are the parent's): it is left alone for good, and opening that store in the
  child raises StorageError naming the remedy.
"""

from __future__ import annotations

import ctypes
import itertools
import os
import sys
import threading
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import lmdb

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX: no store-wide lock, erase refuses
    fcntl = None  # type: ignore[assignment]  # None: not POSIX

from ..errors import BraidlogError, IntegrityError, StorageError, StoreFullError, ValidationError
from ..store.files import fsync_dir
from .ahead import Ahead, refuse_stale
from .file import short_file
from .gate import Gate
from .locks import hold_shared, hold_writer, lmdb_user, release_lock
from .wal import WAL, Entry

__all__ = ["Env", "acquire", "release", "MAX_MAP_SIZE"]

MAX_MAP_SIZE = 1 << 40
MAX_READERS = 512
#: Runs of the structural check before a finding is believed though the store moved each time.
_TREE_CHECKS = 10

T = TypeVar("T")


#: The most a group commit takes at once, in its writers' weights (a batch weighs its deltas).
GROUP_WEIGHT = 10_000


class _Job:
    """One writer's ``fn``, waiting in the queue for the commit of its group."""

    __slots__ = ("fn", "weight", "event", "lead", "done", "result", "error", "redo", "unlogged")

    def __init__(self, fn: Callable[[Any], Any], weight: int) -> None:
        self.fn, self.weight = fn, max(1, weight)
        self.event = threading.Event()
        self.lead = self.done = False
        self.result: Any = None
        self.error: BaseException | None = None
        # under durable="wal": the records its fn appended, (first seq, [(salt, delta bytes)]);
        # None when it wrote something else (a checkpoint of LMDB makes that durable)
        self.redo: list[Entry] | None = None
        self.unlogged = False  # it appended records that cannot be appended again from there


class _Inside(threading.local):
    txn: Any = None
    job: _Job | None = None


#: Below this many free bytes, an I/O error while writing is taken for a full disk (tmpfs and
#: some other filesystems report a failed write to a full disk as EIO, not ENOSPC).
DISK_FULL_BYTES = 16 << 20


def _commit_id(txn: Any) -> int:
    return txn.id()


def disk_full(path: Path, e: BaseException) -> int | None:
    """The bytes free on ``path``'s filesystem if error ``e`` there means the disk is full (not
    LMDB's map: that is MDB_MAP_FULL, which braidlog meets by growing the map), else None."""
    text = str(e)
    if not any(s in text for s in ("No space left", "Disk quota", "Input/output error")):
        return None
    try:
        st = os.statvfs(path)
    except OSError:
        return None
    free = st.f_bavail * st.f_frsize
    return free if free < DISK_FULL_BYTES or "Input/output" not in text else None


def _corrupted(e: lmdb.Error) -> bool:
    return isinstance(e, (lmdb.CorruptedError, lmdb.PageNotFoundError, lmdb.PanicError,
                          lmdb.InvalidError, lmdb.VersionMismatchError))


class Env:
    """One LMDB environment, shared by every LmdbLog of its path in this process."""

    def __init__(self, path: Path, *, readonly: bool, create: bool, durable: bool | str,
                 map_size: int, tables: tuple[str, ...]) -> None:
        self.path = path
        self.readonly = readonly
        self.durable = durable
        self.ahead: Ahead | None = None  # under durable="wal", or recovering its file (ahead.py)
        self.users = 0
        self.forked = False
        self.gate = Gate()
        self.db: dict[str, Any] = {}  # the table handles, set by the opener's ``init``
        self.format_version = 0
        self.tables = tables
        self.erasing = False  # an erasure holds it alone (``alone``): no new user meanwhile
        self._queue: deque[_Job] = deque()  # writers waiting for their group's commit (``write``)
        self._queue_lock = threading.Lock()
        self._leading = False
        self._inside = _Inside()  # the write transaction this thread is running a write in
        data = path / "data.mdb"
        # An existing store is opened under a shared lock that an erasure takes exclusively
        # while it puts a new data.mdb in place: an opener waits for it, never maps the old file.
        self.lockfd = hold_shared(path, create=not readonly) if data.exists() else None
        self.writerfd: int | None = None  # the directory, flocked by a writing process
        try:
            if readonly:
                refuse_stale(path)
            else:
                self.writerfd = hold_writer(path, alone=durable == WAL)
                self.ahead = Ahead.take(path, mode=durable == WAL)
            self._open(path, readonly=readonly, create=create, durable=durable,
                       map_size=map_size)
            if self.ahead is not None:
                try:
                    self.ahead.hold(self.env, MAX_MAP_SIZE)
                except BaseException:
                    self.env.close()
                    raise
        except BaseException:
            if self.ahead is not None:
                self.ahead.wal.close()
            release_lock(self.writerfd)
            release_lock(self.lockfd)
            raise
        if self.lockfd is None:  # a new store: it is in place now, nothing could erase it before
            self.lockfd = hold_shared(path, create=False)

    def recover(self, replay: Callable[[list[Entry]], None]) -> None:
        """Append the write-ahead file's entries again (``replay``, the log's), once, before the
        environment's first use by a log (ahead.py)."""
        if self.ahead is not None and self.ahead.recover(replay, self.sync):
            self.ahead = None

    def _open(self, path: Path, *, readonly: bool, create: bool, durable: bool | str,
              map_size: int) -> None:
        data = path / "data.mdb"
        if data.exists():
            try:
                why = short_file(data)
            except OSError as e:
                raise StorageError(f"cannot read {data}: {e}", hint="check its permissions") from e
            if why is not None:
                raise StorageError(why, hint="restore the store from a backup (`braidlog "
                                   "restore`); it was not opened, nothing was read or written")
        for _attempt in range(100):
            try:
                self.env = lmdb.open(
                    str(path), map_size=map_size, max_dbs=len(self.tables) + 4, subdir=True,
                    readonly=readonly, create=create and not readonly, sync=durable != WAL,
                    metasync=durable is True, lock=True, readahead=False, max_readers=MAX_READERS,
                    max_spare_txns=0,  # a cached read transaction holds a reader slot across fork
                )
                break
            except lmdb.MapResizedError:
                # Another process grew the map between LMDB reading the meta page and py-lmdb's
                # first transaction: open again, at the size that process recorded (0 = adopt).
                map_size = 0
            except lmdb.Error as e:
                raise StorageError(f"cannot open store at {path}: {e}",
                                   hint="check the path and its permissions") from e
        else:
            raise StorageError(f"cannot open store at {path}: its map grew under every one of "
                               "100 attempts", hint="try again")

    # -- transactions --------------------------------------------------------------------------
    def read(self, fn: Callable[[Any], T], *, buffers: bool = True) -> T:
        """``fn(txn)`` in a read transaction, run again if another process grew the map. Called
        by a write's ``fn`` (a projection's check reading the store), it reads that write's own
        transaction: what the batches committed before it in the same group wrote, and nothing
        of its own yet, as if each had committed alone."""
        inside = self._inside.txn
        if inside is not None:
            return fn(inside)
        return self._fresh_read(fn, buffers)

    def _fresh_read(self, fn: Callable[[Any], T], buffers: bool = True) -> T:
        while True:
            try:
                with self.gate.shared():
                    # (the stubs overload begin() on a literal buffers)
                    txn = self.env.begin(buffers=True) if buffers else self.env.begin(buffers=False)
                    try:
                        return fn(txn)
                    finally:
                        txn.abort()  # a read commits nothing: cheaper than the context manager
            except lmdb.MapResizedError:
                self.adopt_map()
            except lmdb.Error as e:
                raise self.error("read", e) from e

    def write(self, fn: Callable[[Any], T], weight: int = 1) -> T:
        """``fn(txn)`` in a write transaction, committed (and, durable, synced) before it
        returns; run again after growing the map when it is full, or adopting another process's
        growth.

        Writers in several threads of this process share transactions without asking: a writer
        that finds no commit in flight leads, and runs its own ``fn`` and those of every writer
        queued by then (up to ``GROUP_WEIGHT`` of ``weight``, in the order they came) in one
        transaction with one sync; those that queue meanwhile form the next group (LevelDB's
        writer queue, PostgreSQL's group commit). Each ``fn`` of a group runs in a nested
        transaction of its own, after the ones before it: one that raises is undone alone and
        its writer alone gets the error; the others commit. Every writer returns only once the
        transaction holding its write is committed."""
        if self._inside.txn is not None:
            raise StorageError("a write was begun inside a write transaction of the same store",
                               hint="write from the transaction's caller, after it returns")
        if self.gate._owner == threading.get_ident():
            return self._transact(fn)  # holding the store alone (an erasure): no group to wait for
        job = _Job(fn, weight)
        with self._queue_lock:
            self._queue.append(job)
            lead = not self._leading
            if lead:
                self._leading = True
        if lead:
            self._lead()
        while not job.done:
            job.event.wait()
            job.event.clear()
            if job.lead and not job.done:
                job.lead = False
                self._lead()
        if job.error is not None:
            raise job.error
        return job.result

    def _lead(self) -> None:
        """Commit the group at the head of the queue, then hand the lead to the next writer
        waiting (or put it down)."""
        group: list[_Job] = []
        try:
            with self._queue_lock:
                weight = 0
                while self._queue and (not group or weight + self._queue[0].weight <= GROUP_WEIGHT):
                    group.append(self._queue.popleft())
                    weight += group[-1].weight
            self._commit_group(group)
        finally:
            for job in group:
                job.done = True
                job.event.set()
            with self._queue_lock:
                if self._queue:
                    self._queue[0].lead = True
                    self._queue[0].event.set()
                else:
                    self._leading = False

    def _commit_group(self, group: list[_Job]) -> None:
        if len(group) == 1:
            job = group[0]

            def one(txn: Any) -> Any:
                result = self._run(job, txn)
                self._ahead(group)
                return result
            try:
                job.result = self._transact(one)
            except BaseException as e:
                job.error = e
                self._made_durable(group, committed=False)
                return
            self._made_durable(group, committed=True)
            return

        def each(txn: Any) -> None:
            for job in group:
                job.result, job.error = None, None
                child = self.env.begin(write=True, parent=txn)
                self._inside.txn = child
                try:
                    job.result = self._run(job, child)
                except (lmdb.MapFullError, lmdb.MapResizedError):
                    child.abort()
                    raise  # the whole group runs again, on the grown map
                except BaseException as e:
                    child.abort()
                    job.error = self.error("write", e) if isinstance(e, lmdb.Error) else e
                else:
                    try:
                        child.commit()
                    except lmdb.Error as e:
                        job.result, job.error = None, self.error("write", e)
                finally:
                    self._inside.txn = txn
            self._ahead(group)
        try:
            self._transact(each)
        except BaseException as e:  # the commit failed: nothing of the group was written
            for job in group:
                job.result, job.error = None, e
            self._made_durable(group, committed=False)
            return
        self._made_durable(group, committed=True)

    def _run(self, job: _Job, txn: Any) -> Any:
        """``job``'s fn in ``txn``, what it appends noted for the write-ahead file (``logged``)."""
        job.redo, job.unlogged = None, False  # afresh: a group runs again after the map grew
        self._inside.job = job
        try:
            return job.fn(txn)
        finally:
            self._inside.job = None

    def logged(self, first: int, items: list[tuple[bytes, bytes]] | None) -> None:
        """What the running write appended, for the write-ahead file: ``items`` (salt, delta
        bytes) from seq ``first``; None for records it cannot append again (written erased)."""
        job = self._inside.job
        if job is None or self.ahead is None:
            return
        if items is None:
            job.unlogged = True
            return
        if job.redo is None:
            job.redo = []
        if items:  # (none: a retry of records already written, which writes nothing)
            job.redo.append(Entry(first, items))

    def _ahead(self, group: list[_Job]) -> None:
        """Under durable="wal", just before LMDB commits the group: written ahead (ahead.py)."""
        if self.ahead is not None:
            self.ahead.write([None if job.redo is None or job.unlogged else job.redo
                              for job in group if job.error is None])

    def _made_durable(self, group: list[_Job], *, committed: bool) -> None:
        """Under durable="wal", once LMDB has committed the group, or failed to: synced, or
        checkpointed (ahead.py). A failure is every writer's error: the commit is in LMDB,
        unsynced, and the next open recovers it."""
        if self.ahead is None:
            return
        try:
            self.ahead.durable(committed=committed)
        except (OSError, lmdb.Error) as e:
            if committed:
                error = StorageError(f"syncing the commit to {self.path} failed: {e}",
                                     hint="check the disk; the store recovers when opened again")
                for job in group:
                    if job.error is None:
                        job.result, job.error = None, error

    def _transact(self, fn: Callable[[Any], T]) -> T:
        while True:
            try:
                with self.gate.shared(), self.env.begin(write=True) as txn:
                    self._inside.txn = txn
                    try:
                        return fn(txn)
                    finally:
                        self._inside.txn = None
            except lmdb.MapFullError:
                self.grow()
            except lmdb.MapResizedError:
                self.adopt_map()
            except BraidlogError:
                raise
            except lmdb.Error as e:
                raise self.error("write", e) from e

    def error(self, what: str, e: lmdb.Error) -> StorageError | IntegrityError:
        """The braidlog error for an lmdb one met while doing ``what``."""
        if _corrupted(e):
            return IntegrityError(
                f"{what} failed: the store's file is damaged ({e}); run `braidlog verify` to find "
                "what is intact, then restore from a backup")
        free = disk_full(self.path, e)
        if free is not None:
            return StoreFullError(
                f"{what} failed: the disk holding {self.path} is full ({free:,} bytes free; LMDB "
                f"said: {e}); nothing of this transaction was committed",
                hint="free space on that disk, or move the store to a larger one")
        return StorageError(f"{what} failed: {e}", hint="see docs/operations.md")

    def grow(self) -> None:
        with self.gate.exclusive():
            size = self.env.info()["map_size"]
            if size >= MAX_MAP_SIZE:
                raise StoreFullError(f"the store reached {size} bytes",
                                     hint="move it to a larger disk or shard braids over stores")
            try:
                self._set_mapsize(min(size * 2, MAX_MAP_SIZE))
            except lmdb.Error as e:
                raise StoreFullError(f"cannot grow the store map: {e}",
                                     hint="free disk space or address space") from e

    def adopt_map(self) -> None:
        with self.gate.exclusive():
            self._set_mapsize(0)

    def _set_mapsize(self, size: int) -> None:
        """LMDB's set_mapsize, under ``gate.exclusive`` (through ahead.py under durable="wal")."""
        if self.ahead is not None:
            self.ahead.resize(size)
        else:
            self.env.set_mapsize(size)

    def open_tables(self, names: list[str], dups: set[str], *, create: bool) -> dict[str, Any]:
        """Handles of the named tables (created when ``create``, else they must exist)."""
        if create:
            return self.write(lambda txn: {
                n: self.env.open_db(n.encode(), txn=txn, dupsort=n in dups) for n in names})
        while True:  # py-lmdb keeps a handle opened in a read transaction only if it opens that
            try:     # transaction itself: give it none (it commits an empty one, changing nothing)
                with self.gate.shared():
                    return {n: self.env.open_db(n.encode(), create=False, dupsort=n in dups)
                            for n in names}
            except lmdb.MapResizedError:
                self.adopt_map()
            except (lmdb.IncompatibleError, lmdb.NotFoundError) as e:
                raise StorageError(f"{self.path} is not a braidlog store, or its table list is "
                                   f"damaged: {e}", hint="give the path of a braidlog store; if "
                                   "it is one, restore it from a backup") from e
            except lmdb.Error as e:
                raise self.error("opening the tables", e) from e

    # -- operating -----------------------------------------------------------------------------
    def info(self) -> dict[str, int]:
        with self.gate.shared():
            info, stat = self.env.info(), self.env.stat()
        return {"map_size": info["map_size"], "last_pgno": info["last_pgno"],
                "page_size": stat["psize"]}

    def last_commit(self) -> int:
        """The id of the last commit a read begun now sees (about a microsecond): it changes with
        every commit of any process. Taken from a read transaction, not from the meta page: a
        writer stamps the meta page a moment before new readers are given its commit, and a
        caller that saw the new id then read the old snapshot would take it for the new one."""
        return self._fresh_read(_commit_id)

    def release_pages(self) -> None:
        """Drop the store's file pages from this process's resident set (Linux; elsewhere
        nothing): ``madvise(MADV_DONTNEED)`` over the map. Safe at any time: the map is read-only
        and file-backed (LMDB writes with ``pwrite``, not through it), so the pages stay in the
        page cache and a later read faults them back in, unchanged. For a long scan that would
        otherwise count the whole log in the process's resident set."""
        if _madvise is None:
            return
        target = str((self.path / "data.mdb").resolve())
        with self.gate.shared():
            try:
                with open("/proc/self/maps") as maps:
                    spans = [line.split(None, 1)[0] for line in maps if line.rstrip("\n").endswith(target)]
            except OSError:
                return
            for span in spans:
                lo, hi = (int(x, 16) for x in span.split("-"))
                _madvise(lo, hi - lo, _MADV_DONTNEED)

    def copy(self, dest: Path, *, compact: bool) -> None:
        try:
            # Without a read transaction of ours, LMDB takes the writer mutex for the copy while
            # holding the GIL, which deadlocks against a write in another thread of this
            # process. A compacting copy reads from an explicit transaction; a plain one (py-lmdb
            # allows no transaction there) keeps this process's other threads out meanwhile.
            if compact:
                with self.gate.shared(), self.env.begin() as txn:
                    self.env.copy(str(dest), compact=True, txn=txn)
            else:
                with self.gate.exclusive():
                    self.env.copy(str(dest), compact=False)
        except lmdb.Error as e:
            raise StorageError(f"copy to {dest} failed: {e}", hint="dest must be an empty directory") from e

    def sync(self) -> None:
        with self.gate.shared():
            self.env.sync(True)

    def tree_findings(self) -> list[str]:
        """py-lmdb's structural check of every page of the file (each reachable page once, keys
        in order, counters right, free and used pages covering the file), run under a read
        transaction so that no page of the snapshot it reads is reused meanwhile.

        The check measures the file before it reads the meta pages: a commit of another process
        in between names pages past the length it measured. So a finding counts only if no
        commit landed during the check; otherwise the check runs again (a busy writer rarely
        commits in that window twice running)."""
        from .pages import VerifyError, verify

        with self.pinned():
            for _ in range(_TREE_CHECKS):
                before = self.last_commit()
                try:
                    found = list(verify(str(self.path)))
                except VerifyError as e:
                    found = [str(e)]
                if not found or self.last_commit() == before:
                    break
            return found

    @contextmanager
    def pinned(self) -> Iterator[None]:
        """A read transaction held open: the pages of the current commit (and of the one before
        it) are not reused while the file is read directly. Begun again if another process grew
        the map."""
        while True:
            with self.gate.shared():
                try:
                    txn = self.env.begin()
                except lmdb.MapResizedError:
                    txn = None
                except lmdb.Error as e:
                    raise self.error("read", e) from e
                if txn is not None:
                    try:
                        yield
                    finally:
                        txn.abort()
                    return
            self.adopt_map()

    def close(self) -> None:
        if not self.forked:
            with self.gate.closing(self.path):
                if self.ahead is not None:
                    try:
                        self.ahead.close()
                    finally:
                        self.ahead = None
                self.env.close()
        # After the environment: closing any descriptor of lock.mdb drops every fcntl lock this
        # process holds on it, LMDB's own among them.
        release_lock(self.lockfd)
        release_lock(self.writerfd)
        self.lockfd = self.writerfd = None

    # -- erasure: holding the store alone and putting a rewritten file in place ----------------
    @contextmanager
    def alone(self) -> Iterator[None]:
        """Hold the store alone: no other process has it open (refused, StorageError, if one
        has) and none can open it meanwhile (openers wait). The caller keeps this process's
        other threads out with ``gate.exclusive()`` where it needs to."""
        if self.ahead is not None:
            raise StorageError(f"{self.path} is open with durable='wal', which erasing cannot "
                               "use (it puts a new data file in place under the write-ahead "
                               "file's checkpoint)", hint="close it, then erase with the store "
                               "opened with durable=True")
        if self.users > 1:
            raise StorageError(f"{self.path} is open {self.users} times in this process",
                               hint="close the other handles (Braid, LmdbLog) of this store first")
        fd = self.lockfd
        if fd is None or fcntl is None:
            raise StorageError(f"cannot lock {self.path / 'lock.mdb'}",
                               hint="erasing needs a POSIX system and the store on a local "
                               "file system")
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            fcntl.flock(fd, fcntl.LOCK_SH)  # a failed conversion may have dropped the shared lock
            raise StorageError(
                f"another process has the store at {self.path} open",
                hint="close it there (stop the application, replica or MCP server using it), "
                "then try again") from None
        try:
            pid = lmdb_user(fd)
            if pid is not None:
                raise StorageError(f"process {pid} has the store at {self.path} open through "
                                   "LMDB", hint="close it there, then try again")
            self.erasing = True
            yield
        finally:
            self.erasing = False
            fcntl.flock(fd, fcntl.LOCK_SH)

    def rewrite(self, dest: Path, rows: Callable[[str, Iterator[tuple[bytes, bytes]]],
                                                  Iterator[tuple[bytes, bytes]]]) -> None:
        """Copy every table into a new environment at ``dest`` record by record, each through
        ``rows(table, its (key, value) pairs in order)``, and sync it. Only inside ``alone``.

        Not LMDB's compacting copy: that copies whole pages, and the unused gap of a page keeps
        the bytes of values it once held; a new environment written in key order holds only what
        is written to it (and zeroes)."""
        dest.mkdir(parents=True)
        with self.gate.exclusive():
            self._rewrite(dest, rows)

    def _rewrite(self, dest: Path, rows: Any) -> None:
        new = lmdb.open(str(dest), map_size=self.env.info()["map_size"],
                        max_dbs=len(self.tables) + 4, subdir=True, sync=False, metasync=False,
                        lock=True, readahead=False, max_spare_txns=0)
        try:
            with self.env.begin(buffers=False) as src:
                for name in self.tables:
                    if name not in self.db:
                        continue
                    dup = self.db[name].flags(src)["dupsort"]
                    with new.begin(write=True) as txn:
                        ndb = new.open_db(name.encode(), txn=txn, dupsort=dup)
                    source = rows(name, src.cursor(self.db[name]).iternext())
                    while chunk := list(itertools.islice(source, REWRITE_CHUNK)):
                        with new.begin(write=True) as txn:
                            added = txn.cursor(ndb).putmulti(chunk, append=True, dupdata=dup)[1]
                        if added != len(chunk):
                            raise StorageError(f"rewriting table {name} into {dest} failed: "
                                               "rows out of order", hint="run `braidlog verify`")
            new.sync(True)
        except lmdb.Error as e:
            raise self.error(f"rewriting the store into {dest}", e) from e
        finally:
            new.close()

    def replace_file(self, data: Path, init: Callable[[Env], None]) -> None:
        """Put the file ``data`` in place of the store's data.mdb (one rename: a crash leaves
        the old file or the new one) and reopen the environment on it, then ``init`` it (the
        tables' handles). Only inside ``alone``, with no transaction of this process open."""
        with self.gate.exclusive():
            os.replace(data, self.path / "data.mdb")
            fsync_dir(self.path)
            self.env.close()  # drops LMDB's fcntl lock, not the flock: openers still wait
            self._open(self.path, readonly=self.readonly, create=False, durable=self.durable,
                       map_size=0)
        init(self)


REWRITE_CHUNK = 1 << 16  # rows a transaction of a rewrite


def _libc_madvise() -> Callable[[int, int, int], int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        fn = ctypes.CDLL(None, use_errno=True).madvise
    except (OSError, AttributeError):
        return None
    fn.argtypes, fn.restype = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int], ctypes.c_int
    return fn


_madvise = _libc_madvise()
_MADV_DONTNEED = 4


# -- one environment per path per process -------------------------------------------------------
_envs: dict[str, Env] = {}
_lock = threading.Lock()
_busy_at_fork: set[str] = set()
_envs_at_fork: dict[str, Any] = {}  # those of them that were pinned for a write-ahead file
_leaked: list[Env] = []


def acquire(path: Path, *, readonly: bool, create: bool, durable: bool | str, map_size: int,
            tables: tuple[str, ...], init: Callable[[Env], None]) -> Env:
    """The environment of ``path`` in this process, opened (and ``init`` run on it) if needed."""
    key = os.path.realpath(path)
    with _lock:
        env = _envs.get(key)
        if env is None:
            if key in _busy_at_fork and _envs_at_fork.get(key) is not None:
                raise StorageError(f"{path} was open with durable='wal' in the parent process "
                                   "when it forked, so this child cannot open it (closing the "
                                   "inherited environment would release the parent's hold on "
                                   "its last checkpoint)", hint="use the 'spawn' or "
                                   "'forkserver' start method, or open the store in the child "
                                   "before the parent opens it")
            if key in _busy_at_fork:
                raise StorageError(
                    f"{path} was in use by another thread of the parent process when it forked, "
                    "so this child cannot open it (LMDB allows one environment per file in a "
                    "process, and the inherited one cannot be closed while the parent's "
                    "transaction is in it)",
                    hint="fork while no thread is inside a store call (e.g. before starting "
                    "threads that use it), or use the 'spawn' or 'forkserver' start method")
            env = Env(path, readonly=readonly, create=create, durable=durable, map_size=map_size,
                      tables=tables)
            try:
                init(env)
            except BaseException:
                env.close()
                raise
            _envs[key] = env
        elif env.erasing:
            raise StorageError(f"{path} is being erased by another thread of this process",
                               hint="open it once the erasure returned")
        elif env.readonly and not readonly:
            raise StorageError(f"{path} is already open read-only in this process",
                               hint="close the read-only store first, or open this one read-only")
        env.users += 1
    return env


def release(path: Path, env: Env) -> None:
    """One user fewer; the environment closes with the last."""
    key = os.path.realpath(path)
    with _lock:
        env.users -= 1
        if env.users == 0:
            if _envs.get(key) is env:
                del _envs[key]
            env.close()


def _after_fork_in_child() -> None:
    global _lock
    _lock = threading.Lock()  # a thread of the parent may have held it: it is gone here
    for key, env in list(_envs.items()):
        env.forked = True
        pinned = env.ahead is not None and env.ahead.pin is not None
        if env.gate.idle and not pinned:  # (aborting the pin would free the parent's snapshot)
            env.env.close()
            release_lock(env.lockfd)  # the parent's flock stays: it is held by its own copy
            release_lock(env.writerfd)
            env.lockfd = env.writerfd = None
        else:
            # Its transaction belongs to a thread that does not exist here: closing the
            # environment would abort it (clearing the parent's reader slot) or wait forever for
            # it. Keep it from ever being closed or collected in this process.
            _busy_at_fork.add(key)
            if pinned:
                _envs_at_fork[key] = env
            _leaked.append(env)
            ctypes.pythonapi.Py_IncRef(ctypes.py_object(env.env))
    _envs.clear()


os.register_at_fork(after_in_child=_after_fork_in_child)


def store_path(path: Any) -> Path:
    """``path`` as a Path, refused when it cannot name a directory on this system."""
    try:
        p = Path(path)
        os.fsencode(p)
    except TypeError:
        raise ValidationError("path", "must be a str or os.PathLike naming the store's directory, "
                              f"not {type(path).__name__}") from None
    except UnicodeEncodeError as e:
        raise ValidationError("path", f"cannot be a file name here: {e.object[e.start]!r} at index "
                              f"{e.start} is not encodable ({e.reason})") from None
    if "\x00" in str(p):
        raise ValidationError("path", "must not contain a NUL character")
    return p
