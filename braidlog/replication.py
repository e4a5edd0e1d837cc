"""Ship a store's log to NATS JetStream and rebuild verified replicas from it.

The only module that imports ``nats`` (the optional extra ``braidlog[replication]``).
docs/replication.md has the long form; the rules in short:

- One stream per store. Stream seq N holds log record N, so the stream is a gap-free copy of the
  log: it is created empty, and every batch the writer publishes carries
  ``Nats-Expected-Last-Sequence`` = the seq before it, so a second writer is refused by the
  server (error 10071, wrong last sequence) instead of being merged.
- A record is one message on subject ``<prefix>.<braid>`` (the braid id escaped to one subject
  token, so consumers can filter by braid). The payload is the record's stored body
  (``hw || canonical delta``) byte for byte. Headers: ``Braidlog-Seq``, ``Braidlog-Hash``
  (the chain hash, hex), ``Braidlog-Commit`` and ``Nats-Msg-Id`` = the chain hash, so a
  competing writer's record at the same seq is never taken for a duplicate.
- A *group* is every record the shipper found committed past the stream's watermark in one
  read of the log; since a read sees whole transactions, a group is one or more whole
  transactions. Every record of a group carries the group's last seq in ``Braidlog-Commit``
  (the transaction marker). A group of one record is one plain publish; a larger one goes out
  as atomic batches of at most 1000 messages (JetStream's limit). One batch is in flight per
  stream. A replica applies a group in one transaction only once it holds all of it, so a
  transaction arrives whole or not at all.
- A replica checks every record's seq and chain hash against its own head before it appends
  it, re-validates the delta, and appends it through its own store, so its records and chain
  head are byte-identical to the writer's. The first record that does not chain is refused:
  the replica stops with an IntegrityError naming the seq and applies nothing after it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import re
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, NamedTuple, TypeVar

import msgspec

from .chain import GENESIS, link
from .delta import GenericDelta, decode, validate
from .errors import (
    BraidlogError, ConflictError, DecodeError, IntegrityError, NotAcknowledged, ReplicationError,
    StaleWriter, ValidationError,
)
from .store import Admit, Head, LogStore, Record, hw_of, ts_micros

__all__ = [
    "Stream",
    "Watermark",
    "Shipper",
    "SyncLog",
    "Replica",
    "promote",
    "ReplicationError",
    "NotAcknowledged",
    "StaleWriter",
    "braid_token",
    "HDR_SEQ",
    "HDR_HASH",
    "HDR_COMMIT",
    "MAX_BATCH",
]

HDR_SEQ = "Braidlog-Seq"
HDR_HASH = "Braidlog-Hash"
HDR_COMMIT = "Braidlog-Commit"
MAX_BATCH = 1000  # the most messages JetStream takes in one atomic batch
_PERMANENT = {
    10174: "the stream does not allow atomic batches (allow_atomic)",
    10177: "the server refused a header inside an atomic batch",
    10199: "the batch is larger than the server allows",
    10059: "the stream does not exist",
    10060: "the subject belongs to another stream",
}
_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_PREFIX = re.compile(r"^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$")
_SAFE = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")
_HINT = "is nats-server (2.12 or later, with -js) running there? docs/replication.md shows how"

T = TypeVar("T")


class Watermark(NamedTuple):
    """How far a stream goes: its last seq, that record's chain hash, and its group's last seq.

    ``commit > seq`` means the stream ends inside a group: the shipper was stopped between two
    atomic batches of one group and finishes it when it resumes.
    """

    seq: int
    hash: bytes
    commit: int

    @property
    def complete(self) -> bool:
        return self.commit == self.seq

    def __str__(self) -> str:
        return f"{self.seq}:{self.hash.hex()}"


class _Transient(Exception):
    """A failure worth retrying until the deadline (timeouts, leader elections, lost acks)."""

    def __init__(self, message: str, code: int | None = None) -> None:
        self.code = code
        super().__init__(message)


class _Braid(msgspec.Struct):
    braid_id: str


_braid_decoder = msgspec.msgpack.Decoder(_Braid)


def braid_token(braid_id: str) -> str:
    """A braid id as one subject token: ``[A-Za-z0-9_-]`` kept, any other byte as ``~XX``."""
    return "".join(chr(b) if b in _SAFE else f"~{b:02X}" for b in braid_id.encode())


def _nats() -> Any:
    try:
        import nats
        import nats.js.api  # noqa: F401
    except ImportError as e:
        raise ReplicationError("replication needs the nats-py client",
                               hint="pip install 'braidlog[replication]'") from e
    return nats


def _header(headers: Mapping[str, str] | None, name: str) -> str | None:
    if not headers:
        return None
    value = headers.get(name)
    if value is None:
        low = name.lower()
        for key, v in headers.items():
            if str(key).lower() == low:
                return v
    return value


def _servers(servers: str | Sequence[str]) -> list[str]:
    items = servers.split(",") if isinstance(servers, str) else list(servers)
    out = [s.strip() for s in items if s.strip()]
    if not out:
        raise ValidationError("servers", "give at least one NATS URL, e.g. nats://127.0.0.1:4222")
    return [s if "://" in s else f"nats://{s}" for s in out]


class Stream:
    """One JetStream stream holding the copy of one store's log, and the connection to it.

    The connection runs on its own event-loop thread; every method here blocks (with a
    timeout), so the stream can be used from plain synchronous code and from several threads.
    ``replicas`` applies when the stream is created (3 on a three-node cluster).
    """

    def __init__(self, servers: str | Sequence[str], name: str, *, replicas: int = 1,
                 create: bool = True, prefix: str | None = None, timeout: float = 10.0) -> None:
        nats = _nats()
        if not _NAME.match(name or ""):
            raise ValidationError("stream", f"{name!r} must be 1 to 64 letters, digits, '-' or '_'")
        prefix = prefix if prefix is not None else f"braidlog.{name}"
        if not _PREFIX.match(prefix) or len(prefix) > 200:
            raise ValidationError("prefix", f"{prefix!r} must be dot-separated tokens of letters, "
                                  "digits, '-' or '_'")
        if not 1 <= replicas <= 5:
            raise ValidationError("replicas", f"must be 1 to 5, got {replicas}")
        self.servers = _servers(servers)
        self.name = name
        self.prefix = prefix
        self.replicas = replicas
        self.timeout = timeout
        self._nats = nats
        self._tokens: dict[str, str] = {}
        self._waiting: dict[str, asyncio.Future] = {}
        self._nc: Any = None
        self._closed = False
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True,
                                        name=f"braidlog-nats-{name}")
        self._thread.start()
        try:
            self._call(self._open(create), timeout * 2 + 5)
        except _Transient as e:
            self.close()
            raise ReplicationError(f"cannot reach NATS at {', '.join(self.servers)}: {e}",
                                   hint=_HINT) from None
        except BaseException:
            self.close()
            raise

    # -- the loop thread ---------------------------------------------------------------------
    def _call(self, coro: Any, timeout: float) -> Any:
        """Run a coroutine on the loop thread and wait for it; _Transient on timeout."""
        if self._closed:
            coro.close()
            raise ReplicationError(f"stream {self.name} is closed", hint="open a new Stream")
        if threading.current_thread() is self._thread:
            coro.close()
            raise RuntimeError("Stream methods block; do not call them from its event loop")
        fut = asyncio.run_coroutine_threadsafe(coro, self._loop)
        try:
            return fut.result(max(timeout, 0.001))
        except concurrent.futures.TimeoutError:
            fut.cancel()
            raise _Transient(f"no answer within {timeout:.1f} s") from None

    def _retry(self, make: Callable[[], Any], deadline: float, what: str) -> Any:
        """Call ``make()`` (a coroutine factory) until it succeeds or the deadline passes."""
        delay = 0.05
        while True:
            left = deadline - time.monotonic()
            try:
                return self._call(make(), min(self.timeout, max(left, 0.001)))
            except _Transient as e:
                left = deadline - time.monotonic()
                if left <= delay:
                    raise ReplicationError(f"{what} failed for stream {self.name}: {e}",
                                           hint=_HINT) from None
                time.sleep(delay)
                delay = min(delay * 2, 1.0)

    async def _open(self, create: bool) -> None:
        nats = self._nats

        async def quiet(_e: Exception) -> None:
            return None

        try:
            self._nc = await asyncio.wait_for(nats.connect(
                servers=self.servers, name=f"braidlog {self.name}", connect_timeout=2,
                reconnect_time_wait=0.25, max_reconnect_attempts=-1, allow_reconnect=True,
                error_cb=quiet), self.timeout)
        except asyncio.TimeoutError:
            raise _Transient(f"no connection within {self.timeout:g} s") from None
        except (OSError, nats.errors.Error) as e:
            raise _Transient(str(e) or type(e).__name__) from None
        self._js = self._nc.jetstream(timeout=self.timeout)
        self._inbox = self._nc.new_inbox()
        await self._nc.subscribe(self._inbox + ".*", cb=self._on_reply)
        await self._ensure(create)

    async def _on_reply(self, msg: Any) -> None:
        fut = self._waiting.pop(msg.subject.rpartition(".")[2], None)
        if fut is not None and not fut.done():
            fut.set_result(msg)

    def _config(self) -> Any:
        api = self._nats.js.api
        return api.StreamConfig(
            name=self.name, subjects=[self.prefix + ".>"], storage=api.StorageType.FILE,
            num_replicas=self.replicas, retention=api.RetentionPolicy.LIMITS,
            discard=api.DiscardPolicy.NEW, allow_atomic=True, allow_direct=True,
            duplicate_window=120.0, deny_delete=True, deny_purge=True,
            description="a braidlog log, one message per record (docs/replication.md)",
            metadata={"braidlog": "1"})

    async def _ensure(self, create: bool) -> None:
        errors = self._nats.js.errors
        deadline = self._loop.time() + self.timeout
        quick = self._nc.jetstream(timeout=min(self.timeout, 1.0))  # a new cluster may not answer
        while True:
            try:
                try:
                    info = await quick.stream_info(self.name)
                except errors.NotFoundError:
                    if not create:
                        raise ReplicationError(f"there is no stream {self.name}",
                                               hint="ship to it first (`braidlog ship`) or pass "
                                               "create=True") from None
                    info = await self._js.add_stream(self._config())
                self._check_config(info.config)
                return
            except (asyncio.TimeoutError, self._nats.errors.Error) as e:
                code = getattr(e, "err_code", None)
                if code in _PERMANENT or self._loop.time() > deadline:
                    raise ReplicationError(f"cannot open stream {self.name}: {e}",
                                           hint=_PERMANENT.get(code, _HINT)) from None
                await asyncio.sleep(0.1)  # JetStream is electing its leaders

    def _check_config(self, config: Any) -> None:
        subjects = config.subjects or []
        problems = []
        if self.prefix + ".>" not in subjects:
            problems.append(f"its subjects are {subjects}, not [{self.prefix + '.>'!r}]")
        if not config.allow_atomic:
            problems.append("it does not allow atomic batches")
        if not config.allow_direct:
            problems.append("it does not allow direct get")
        if problems:
            raise ReplicationError(
                f"stream {self.name} exists but is not a braidlog stream: {'; '.join(problems)}",
                hint="give another stream name, or delete that stream")

    # -- what callers use --------------------------------------------------------------------
    def subject(self, braid_id: str) -> str:
        """The subject of a braid's records: ``<prefix>.<braid token>``."""
        subject = self._tokens.get(braid_id)
        if subject is None:
            subject = self._tokens[braid_id] = f"{self.prefix}.{braid_token(braid_id)}"
        return subject

    def watermark(self, *, timeout: float | None = None) -> Watermark:
        """The stream's last seq, its chain hash and its group's last seq (retried)."""
        deadline = time.monotonic() + (timeout if timeout is not None else self.timeout)
        return self._retry(self._watermark, deadline, "reading the watermark")

    def info(self, *, timeout: float | None = None) -> dict[str, Any]:
        """Facts about the stream: messages, last seq, replicas, the current leader."""
        deadline = time.monotonic() + (timeout if timeout is not None else self.timeout)
        return self._retry(self._info, deadline, "reading stream info")

    def close(self) -> None:
        """Close the connection and stop the loop thread."""
        if self._closed:
            return
        if self._nc is not None and self._thread.is_alive():
            try:
                self._call(self._shutdown(), 5.0)
            except (_Transient, BraidlogError):
                pass
        self._closed = True
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5.0)
        if not self._thread.is_alive():
            self._loop.close()

    async def _shutdown(self) -> None:
        try:
            await asyncio.wait_for(self._nc.close(), 3.0)
        except Exception:  # closing a broken connection; nothing to save
            pass

    def __enter__(self) -> Stream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Stream({','.join(self.servers)!r}, {self.name!r})"

    # -- coroutines (loop thread) ------------------------------------------------------------
    def _transient(self, e: BaseException) -> _Transient:
        return _Transient(str(e) or type(e).__name__)

    async def _info(self) -> dict[str, Any]:
        try:
            info = await self._js.stream_info(self.name)
        except (asyncio.TimeoutError, self._nats.errors.Error) as e:
            raise self._transient(e) from None
        cluster = info.cluster
        return {"stream": self.name, "messages": info.state.messages,
                "first_seq": info.state.first_seq, "last_seq": info.state.last_seq,
                "replicas": info.config.num_replicas,
                "leader": getattr(cluster, "leader", None) if cluster else None}

    async def _watermark(self) -> Watermark:
        try:
            info = await self._js.stream_info(self.name)
            state = info.state
            if state.last_seq == 0:
                return Watermark(0, GENESIS, 0)
            if state.first_seq != 1 or state.messages != state.last_seq:
                raise ReplicationError(
                    f"stream {self.name} is not a gap-free copy: it holds {state.messages} "
                    f"messages between seq {state.first_seq} and {state.last_seq}",
                    hint="messages were deleted or purged; ship the log to a new stream")
            raw = await self._js.get_msg(self.name, seq=state.last_seq)
        except (asyncio.TimeoutError, self._nats.errors.Error) as e:
            raise self._transient(e) from None
        return self._mark(state.last_seq, raw.headers)

    def _mark(self, seq: int, headers: Mapping[str, str] | None) -> Watermark:
        try:
            found = int(_header(headers, HDR_SEQ) or "")
            chain = bytes.fromhex(_header(headers, HDR_HASH) or "")
            commit = int(_header(headers, HDR_COMMIT) or "")
        except ValueError:
            raise StaleWriter(f"stream {self.name} seq {seq} is not a braidlog record (no "
                              f"{HDR_SEQ}/{HDR_HASH}/{HDR_COMMIT} headers): something other "
                              f"than braidlog publishes to {self.prefix}.>", actual=seq) from None
        if found != seq or len(chain) != 32 or commit < seq:
            raise StaleWriter(f"stream {self.name} seq {seq} carries braidlog seq {found}: it is "
                              "not a gap-free copy of one log", expected=seq, actual=found)
        return Watermark(seq, chain, commit)

    def _token(self) -> str:
        return self._nc.new_inbox().rpartition(".")[2]

    def _request(self, subject: str, body: bytes, headers: dict[str, str]) -> Any:
        token = self._token()
        fut = self._loop.create_future()
        self._waiting[token] = fut
        send = self._nc.publish(subject, body, reply=f"{self._inbox}.{token}", headers=headers)
        return fut, send, token

    async def _publish(self, rows: list[tuple[int, bytes, bytes, str]], commit: int) -> int:
        """Publish rows (seq, hash, body, subject), one atomic batch if several; the acked seq.

        One message goes out as a plain publish (it is atomic by itself, and JetStream syncs an
        atomic batch to disk at commit, ~20 ms on a file stream). Several messages are pipelined
        inside one atomic batch: the server stores all of them or none.
        """
        batch_id = self._token()
        last = len(rows)
        fut = token = None
        try:
            for i, (seq, chain, body, subject) in enumerate(rows, 1):
                hx = chain.hex()
                hdr = {"Nats-Msg-Id": hx, HDR_SEQ: str(seq), HDR_HASH: hx, HDR_COMMIT: str(commit)}
                if last > 1:
                    hdr["Nats-Batch-Id"] = batch_id
                    hdr["Nats-Batch-Sequence"] = str(i)
                if i == 1:
                    hdr["Nats-Expected-Last-Sequence"] = str(seq - 1)
                    hdr["Nats-Expected-Stream"] = self.name
                if i == last:
                    if last > 1:
                        hdr["Nats-Batch-Commit"] = "1"
                    fut, send, token = self._request(subject, body, hdr)
                    await send
                else:
                    await self._nc.publish(subject, body, headers=hdr)
            msg = await asyncio.wait_for(fut, self.timeout)
        except self._nats.errors.MaxPayloadError:
            big = max(rows, key=lambda r: len(r[2]))
            raise ReplicationError(
                f"record seq {big[0]} is {len(big[2])} bytes, more than the NATS server's "
                f"max_payload ({self._nc.max_payload} bytes)",
                hint="raise max_payload in the nats-server configuration (up to 64 MB)") from None
        except (asyncio.TimeoutError, OSError, self._nats.errors.Error) as e:
            raise self._transient(e) from None
        finally:
            if token is not None:
                self._waiting.pop(token, None)
        return self._ack(msg, rows[-1][0])

    def _ack(self, msg: Any, want: int) -> int:
        status = _header(msg.headers, "Status")
        if status == "503":
            raise _Transient("no responders: JetStream has no leader for the stream right now")
        try:
            ack = json.loads(msg.data) if msg.data else {}
        except ValueError:
            raise _Transient(f"unreadable acknowledgement {msg.data[:80]!r}") from None
        error = ack.get("error")
        if error:
            code = error.get("err_code")
            text = f"JetStream error {code}: {error.get('description')}"
            if code in _PERMANENT:
                raise ReplicationError(f"stream {self.name} refused the batch: {text}",
                                       hint=_PERMANENT[code])
            raise _Transient(text, code)  # 10071 and friends: the caller re-reads the watermark
        seq = ack.get("seq")
        if seq != want or ack.get("duplicate"):
            raise _Transient(f"acknowledged seq {seq}, expected {want}")
        return seq

    async def _read(self, start: int, count: int) -> list[tuple[int, Any, bytes]]:
        """Up to ``count`` messages from seq ``start`` by one batched direct get."""
        out: list[tuple[int, Any, bytes]] = []
        end = self._loop.create_future()

        async def take(msg: Any) -> None:
            status = _header(msg.headers, "Status")
            if status:
                if not end.done():
                    end.set_result((status, _header(msg.headers, "Description") or ""))
                return
            out.append((int(_header(msg.headers, "Nats-Sequence") or 0), msg.headers, msg.data))
            if len(out) >= count and not end.done():
                end.set_result(("204", ""))

        try:
            sub = await self._nc.subscribe(self._nc.new_inbox(), cb=take)
            try:
                request = json.dumps({"seq": start, "batch": count, "max_bytes": 16 << 20})
                await self._nc.publish(f"$JS.API.DIRECT.GET.{self.name}", request.encode(),
                                       reply=sub.subject)
                status, text = await asyncio.wait_for(end, self.timeout)
            finally:
                await sub.unsubscribe()
        except (asyncio.TimeoutError, OSError, self._nats.errors.Error) as e:
            raise self._transient(e) from None
        if status not in ("204", "404"):
            raise _Transient(f"direct get answered {status} {text}".strip())
        return out



def _rows(store: LogStore, stream: Stream, start: int, stop: int
          ) -> list[tuple[int, bytes, bytes, str]]:
    """(seq, hash, body, subject) of records start..stop, gap-free."""
    rows = []
    for seq, chain, body in store.scan_bodies(start, stop + 1):
        if seq != start + len(rows):
            raise IntegrityError(f"seq {start + len(rows)} is missing from the log", seq=seq)
        rows.append((seq, chain, body, stream.subject(_braid_decoder.decode(body[8:]).braid_id)))
    if len(rows) != stop - start + 1:
        raise IntegrityError(f"seq {start + len(rows)} is missing from the log",
                             seq=start + len(rows))
    return rows


class Shipper:
    """Publishes a store's committed records to its stream, in seq order, one batch in flight.

    ``ship()`` publishes everything committed so far and returns once the stream acknowledged
    it; ``follow()`` (or ``start()`` for a background thread) keeps doing so. After a crash a new
    Shipper resumes from the stream's watermark: nothing is lost, duplicated or reordered.
    """

    def __init__(self, store: LogStore, stream: Stream, *, batch: int = MAX_BATCH) -> None:
        if not 1 <= batch <= MAX_BATCH:
            raise ValidationError("batch", f"must be 1 to {MAX_BATCH} (JetStream's atomic batch "
                                  f"limit), got {batch}")
        self.store = store
        self.stream = stream
        self.batch = batch
        self.shipped = 0
        self.retries = 0
        self.error: BaseException | None = None
        self._wm: Watermark | None = None
        self._refused: int | None = None  # the JetStream error code that refused a batch
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def ship(self, *, timeout: float = 30.0) -> Watermark:
        """Publish every record committed now and not yet in the stream; the stream's watermark.

        Retries through leader elections and lost acknowledgements until ``timeout``, then
        ReplicationError. StaleWriter when the stream holds records this store does not.
        """
        deadline = time.monotonic() + timeout
        with self._lock:
            head = self.store.head()
            delay = 0.05
            while True:
                try:
                    wm = self._wm
                    if wm is None:
                        wm = self.stream._call(self.stream._watermark(), self._left(deadline))
                        if wm.seq > head.seq:
                            head = self.store.head()
                        self._check(wm, head)
                        self._wm = wm
                    if wm.seq >= head.seq:
                        return wm
                    end = wm.commit if wm.commit > wm.seq else head.seq
                    stop = min(end, wm.seq + self.batch)
                    rows = _rows(self.store, self.stream, wm.seq + 1, stop)
                    self.stream._call(self.stream._publish(rows, end), self._left(deadline))
                    self._wm = Watermark(stop, rows[-1][1], end)
                    self.shipped += len(rows)
                    delay = 0.05
                except _Transient as e:
                    self._wm = None  # re-read: the batch may have landed, or someone else wrote
                    self._refused = e.code or self._refused
                    self.retries += 1
                    if time.monotonic() + delay >= deadline:
                        raise ReplicationError(
                            f"could not ship seq {head.seq} to stream {self.stream.name} within "
                            f"{timeout:.1f} s: {e}", hint=_HINT) from None
                    time.sleep(delay)
                    delay = min(delay * 2, 1.0)

    def _left(self, deadline: float) -> float:
        return min(self.stream.timeout, max(deadline - time.monotonic(), 0.001))

    def _check(self, wm: Watermark, head: Head) -> None:
        name = self.stream.name
        how = (f"JetStream refused this store's batch with error {self._refused}"
               if self._refused else "the expected-sequence check refuses this store's batches")
        if wm.seq > head.seq or wm.commit > head.seq:
            raise StaleWriter(
                f"stream {name} goes to seq {max(wm.seq, wm.commit)} but this store's head is "
                f"seq {head.seq}: another writer ships to it ({how}); this store is no longer "
                "the writer: rebuild it as a replica", expected=head.seq, actual=wm.seq)
        if wm.seq and self.store.hash_at(wm.seq) != wm.hash:
            raise StaleWriter(
                f"stream {name} seq {wm.seq} has chain hash {wm.hash.hex()}, this store "
                f"{self.store.hash_at(wm.seq).hex()}: the stream holds another writer's records "
                f"({how}; nothing was merged); rebuild this store as a replica",
                expected=self.store.hash_at(wm.seq), actual=wm.hash)

    def follow(self, stop: threading.Event | None = None, *, poll: float = 0.05,
               timeout: float | None = None, ship_timeout: float = 30.0) -> Watermark:
        """Ship as the log grows until ``stop`` is set or ``timeout`` passes; ships once more."""
        end = None if timeout is None else time.monotonic() + timeout
        stop = stop or self._stop
        while True:
            self.ship(timeout=ship_timeout)
            if stop.is_set() or (end is not None and time.monotonic() >= end):
                return self.ship(timeout=ship_timeout)
            stop.wait(poll)

    def start(self, *, poll: float = 0.05, ship_timeout: float = 30.0) -> Shipper:
        """Follow the log in a background thread; ``stop()`` ends it and re-raises its error."""
        if self._thread is not None:
            raise ValidationError("shipper", "already started")
        self._stop.clear()

        def run() -> None:
            try:
                self.follow(self._stop, poll=poll, ship_timeout=ship_timeout)
            except BaseException as e:  # handed to stop()
                self.error = e

        self._thread = threading.Thread(target=run, daemon=True,
                                        name=f"braidlog-ship-{self.stream.name}")
        self._thread.start()
        return self

    def stop(self, *, timeout: float = 60.0) -> Watermark | None:
        """Stop the background thread after a last ship; re-raise what ended it early."""
        thread, self._thread = self._thread, None
        if thread is None:
            return None
        self._stop.set()
        thread.join(timeout)
        if thread.is_alive():
            raise ReplicationError(f"the shipper of stream {self.stream.name} did not stop "
                                   f"within {timeout:.0f} s", hint=_HINT)
        if self.error is not None:
            error, self.error = self.error, None
            raise error
        return self._wm


class SyncLog:
    """A store whose appends return only after the stream acknowledged them with its replicas.

    Every other attribute is the wrapped store's, so ``Braid(SyncLog(store, stream), ...)``
    makes every append and ``execute`` synchronous. An append is committed locally first, then
    shipped; if the stream does not acknowledge it in time the append raises NotAcknowledged
    (the records stay in the local log and go out with the next append or ``ship()``).
    """

    def __init__(self, store: LogStore, stream: Stream, *, timeout: float = 30.0,
                 batch: int = MAX_BATCH) -> None:
        self.store = store
        self.stream = stream
        self.timeout = timeout
        self.shipper = Shipper(store, stream, batch=batch)
        self._lock = threading.Lock()
        self._stale: StaleWriter | None = None

    def append(self, delta: GenericDelta, *, expected_version: int | None = None) -> int:
        """Append one delta; return its seq once the stream holds it."""
        return self._sync(lambda: self.store.append(delta, expected_version=expected_version),
                          lambda seq: [seq])

    def append_batch(self, deltas: Iterable[GenericDelta], *,
                     expected_version: int | Mapping[str, int] | None = None,
                     expected_head: int | None = None, admit: Admit | None = None) -> list[int]:
        """Append deltas atomically; return their seqs once the stream holds them (whole)."""
        return self._sync(lambda: self.store.append_batch(
            deltas, expected_version=expected_version, expected_head=expected_head,
            admit=admit), list)

    def commit(self, deltas: Iterable[GenericDelta], *,
               expected_version: int | Mapping[str, int] | None = None,
               expected_head: int | None = None, admit: Admit | None = None) -> list[Record]:
        """Append deltas atomically; the records written, once the stream holds them."""
        return self._sync(lambda: self.store.commit(
            deltas, expected_version=expected_version, expected_head=expected_head,
            admit=admit), lambda recs: [r.seq for r in recs])

    def ship(self) -> Watermark:
        """Ship whatever the local log holds that the stream does not (after NotAcknowledged)."""
        with self._lock:
            return self._ship([])

    def _sync(self, write: Callable[[], T], seqs: Callable[[T], list[int]]) -> T:
        with self._lock:
            if self._stale is not None:
                raise StaleWriter(f"{self._stale} (nothing was appended)",
                                  expected=self._stale.expected, actual=self._stale.actual)
            result = write()
            self._ship(seqs(result))
            return result

    def _ship(self, seqs: list[int]) -> Watermark:
        try:
            return self.shipper.ship(timeout=self.timeout)
        except StaleWriter as e:
            self._stale = e
            raise
        except ReplicationError as e:
            where = f"seq {seqs[0]}..{seqs[-1]} were appended locally but " if seqs else ""
            raise NotAcknowledged(f"{where}not acknowledged by stream {self.stream.name}: {e}",
                                  seqs=seqs, hint="they go out with the next append or ship()"
                                  ) from e

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)

    def __repr__(self) -> str:
        return f"SyncLog({self.store!r}, {self.stream!r})"


class _Pending(NamedTuple):
    seq: int
    hash: bytes
    hw: int
    delta: GenericDelta


class Replica:
    """Rebuilds a store from a stream; every record is checked against its own head first.

    The replica's store must hold a prefix of the stream (empty is fine). Records are applied
    one complete group per transaction through the store's own append, so the replica's log
    is byte-identical to the writer's. A record that does not chain (or is not a valid delta)
    is refused with an IntegrityError naming its seq; nothing after it is applied and the
    replica stays stopped (``.error``).
    """

    def __init__(self, store: LogStore, stream: Stream, *, batch: int = MAX_BATCH) -> None:
        if not 1 <= batch <= MAX_BATCH:
            raise ValidationError("batch", f"must be 1 to {MAX_BATCH}, got {batch}")
        self.store = store
        self.stream = stream
        self.batch = batch
        self.applied = 0
        self.error: IntegrityError | None = None
        self._head = store.head()
        self._hw = hw_of(store.body(self._head.seq)) if self._head.seq else 0
        self._pending: list[_Pending] = []
        self._group_end = 0
        self._ids: set[str] = set()
        self._anchored = False

    @property
    def head(self) -> Head:
        """The last record applied (a group end)."""
        return self._head

    def catch_up(self, *, timeout: float = 60.0) -> Head:
        """Apply every complete group the stream holds now; the replica's head."""
        deadline = time.monotonic() + timeout
        self._alive()
        target = self.stream.info(timeout=timeout)["last_seq"]
        self._anchor(target, deadline)
        while self._next() <= target:
            if time.monotonic() >= deadline:
                raise ReplicationError(
                    f"replica of stream {self.stream.name} reached seq {self._head.seq} of "
                    f"{target} within {timeout:.1f} s", hint="give it more time")
            if not self._pull(deadline):
                time.sleep(0.02)  # a lagging replica of the stream answered; ask again
        self._drop_pending()  # the stream ends inside a group: wait for the rest of it
        return self._head

    def follow(self, stop: threading.Event | None = None, *, timeout: float | None = None,
               poll: float = 0.05) -> Head:
        """Apply groups as they arrive until ``stop`` is set or ``timeout`` passes.

        Reads again at once after a full batch, else after ``poll`` seconds.
        """
        end = None if timeout is None else time.monotonic() + timeout
        stop = stop or threading.Event()
        self._alive()
        self._anchor(None, time.monotonic() + self.stream.timeout)
        while not stop.is_set() and (end is None or time.monotonic() < end):
            if self._pull(time.monotonic() + 60.0) < self.batch:
                stop.wait(poll)
        self._drop_pending()
        return self._head

    # -- reading ---------------------------------------------------------------------------
    def _alive(self) -> None:
        if self.error is not None:
            raise self.error

    def _next(self) -> int:
        return self._head.seq + len(self._pending) + 1

    def _drop_pending(self) -> None:
        self._pending.clear()
        self._ids.clear()

    def _anchor(self, last: int | None, deadline: float) -> None:
        """Check once that the replica's own head is a record of the stream."""
        if self._anchored:
            return
        seq = self._head.seq
        if seq:
            if last is None:
                last = self.stream.info(timeout=max(deadline - time.monotonic(), 0.1))["last_seq"]
            if seq > last:
                raise ConflictError(
                    f"this store's head is seq {seq} but stream {self.stream.name} ends at seq "
                    f"{last}: the store is not a replica of that stream", expected=last,
                    actual=seq)
            rows = self.stream._retry(lambda: self.stream._read(seq, 1), deadline,
                                      "reading the replica's anchor")
            found = rows[0][1] if rows and rows[0][0] == seq else None
            if _header(found, HDR_HASH) != self._head.hash.hex():
                self._refuse(seq, "the replica's own record at this seq differs from the "
                             "stream's: the store is not a replica of this stream")
        self._anchored = True

    def _pull(self, deadline: float) -> int:
        start = self._next()
        rows = self.stream._retry(lambda: self.stream._read(start, self.batch), deadline,
                                  "reading records")
        for seq, headers, body in rows:
            if seq < self._next():
                continue  # a late duplicate of a message already taken
            self._accept(seq, headers, body)
        return len(rows)

    def _refuse(self, seq: int, why: str, *, expected: bytes | None = None,
                found: bytes | None = None) -> None:
        self._drop_pending()
        self.error = IntegrityError(
            f"stream {self.stream.name}: record seq {seq} refused: {why}; the replica stopped "
            f"at seq {self._head.seq} and applied nothing after it", seq=seq, expected=expected,
            found=found)
        raise self.error

    def _accept(self, seq: int, headers: Mapping[str, str] | None, body: bytes) -> None:
        want = self._next()
        if seq != want:
            self._refuse(want, f"the stream has no message at seq {want} (next found: {seq})")
        try:
            shipped_seq = int(_header(headers, HDR_SEQ) or "")
            shipped = bytes.fromhex(_header(headers, HDR_HASH) or "")
            commit = int(_header(headers, HDR_COMMIT) or "")
        except ValueError:
            self._refuse(seq, f"the message has no valid {HDR_SEQ}/{HDR_HASH}/{HDR_COMMIT} headers")
        if shipped_seq != seq:
            self._refuse(seq, f"stream seq {seq} carries log seq {shipped_seq}")
        group = self._pending[0].seq if self._pending else seq
        if commit < seq or (self._pending and commit != self._group_end):
            self._refuse(seq, f"its transaction marker {commit} does not close the group "
                         f"that starts at seq {group}")
        prev = self._pending[-1].hash if self._pending else self._head.hash
        chained = link(prev, seq, body)
        if chained != shipped:
            self._refuse(seq, f"it does not chain: the head before it and its bytes give hash "
                         f"{chained.hex()}, the stream says {shipped.hex()}",
                         expected=chained, found=shipped)
        try:
            stored, data = validate(decode(body[8:]), self.store.registry)
        except (DecodeError, ValidationError) as e:
            self._refuse(seq, f"it is not a delta this replica can store ({e}); a replica needs "
                         "the writer's kinds declared (import the same projections)")
        if data != body[8:]:
            self._refuse(seq, "its delta bytes are not canonical here: the replica's kind "
                         "registry differs from the writer's (import the same projections)")
        prev_hw = self._pending[-1].hw if self._pending else self._hw
        hw = max(prev_hw, ts_micros(stored.ts))
        if hw_of(body) != hw:
            self._refuse(seq, f"its time watermark {hw_of(body)} should be {hw}")
        if stored.id in self._ids or self.store.seq_of(stored.id) is not None:
            self._refuse(seq, f"delta id {stored.id} is already in the log")
        self._ids.add(stored.id)
        self._pending.append(_Pending(seq, shipped, hw, stored))
        self._group_end = commit
        if seq == commit:
            self._apply()

    def _apply(self) -> None:
        group, first = self._pending, self._pending[0].seq
        try:
            records = self.store.commit([p.delta for p in group], expected_head=self._head.seq)
        except ConflictError as e:
            self._refuse(first, f"the replica's store moved under it ({e}); only the replica "
                         "may write to it")
        except ValidationError as e:
            self._refuse(first, f"the store refused the group ({e})")
        if [(r.seq, r.hash) for r in records] != [(p.seq, p.hash) for p in group]:
            raise IntegrityError(
                f"the replica's store wrote seqs {first}..{group[-1].seq} with other hashes than "
                "the stream's; run `braidlog verify` and rebuild the replica", seq=first)
        self._head = Head(group[-1].seq, group[-1].hash)
        self._hw = group[-1].hw
        self.applied += len(group)
        self._drop_pending()


def promote(store: LogStore, stream: Stream, *, timeout: float = 60.0) -> Head:
    """Check a replica holds everything the stream acknowledged, so it may become the writer.

    Catches the replica up, then requires its head to equal the stream's last record and the
    stream not to end inside a group. Returns the head; ship from it with Shipper or SyncLog.
    The old writer, if it comes back, is refused (StaleWriter, error 10071) once the new one
    has shipped.
    """
    head = Replica(store, stream).catch_up(timeout=timeout)
    wm = stream.watermark(timeout=timeout)
    if not wm.complete:
        raise ConflictError(
            f"stream {stream.name} ends inside a transaction (seq {wm.seq} of a group ending at "
            f"{wm.commit}): the old writer stopped while shipping it; restart the old writer's "
            "shipper to finish it, or ship the log to a new stream", expected=wm.commit,
            actual=wm.seq)
    if (head.seq, head.hash) != (wm.seq, wm.hash):
        raise ConflictError(
            f"the replica is at {head} but stream {stream.name} at {wm}: it has not caught up; "
            "run the replica again before promoting it", expected=wm.seq, actual=head.seq)
    return head
