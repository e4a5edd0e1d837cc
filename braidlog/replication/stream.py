"""The connection to one JetStream stream: the only module that imports ``nats``.

Every method blocks (with a timeout) and runs its coroutine on the stream's own event-loop
thread, so the shipper, the synchronous writer and the replica are plain synchronous code.
What a message holds is wire.py's; what a writer and a replica check is theirs.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import re
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

from ..chain import digest
from ..errors import BraidlogError, IntegrityError, ReplicationError, ValidationError
from .wire import (
    EMPTY,
    EPOCH_BRAID,
    HDR_COMMIT,
    HDR_EPOCH,
    HDR_HASH,
    HDR_SALT,
    HDR_SEQ,
    HDR_TREE_SIZE,
    Row,
    Watermark,
    braid_token,
    epoch_header,
    header,
)

__all__ = ["Stream", "Last"]

_PERMANENT = {
    10174: "the stream does not allow atomic batches (allow_atomic)",
    10177: "the server refused a header inside an atomic batch",
    10199: "the batch is larger than the server allows",
    10059: "the stream does not exist",
    10060: "the subject belongs to another stream",
}
_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_PREFIX = re.compile(r"^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$")
HINT = "is nats-server (2.12 or later, with -js) running there? docs/replication.md shows how"
WRONG_LAST = 10071  # JetStream: wrong last sequence (Nats-Expected-Last-Sequence refused)


class _Denied(Exception):
    """The server answered a publish with a permissions violation."""


class Last(NamedTuple):
    """The stream's last message: its watermark and its payload (None for an empty stream)."""

    mark: Watermark
    body: bytes | None
    salt: bytes | None = None


class Transient(Exception):
    """A failure worth retrying until the deadline (timeouts, leader elections, lost acks)."""

    def __init__(self, message: str, code: int | None = None) -> None:
        self.code = code
        super().__init__(message)


def _nats() -> Any:
    try:
        import nats
        import nats.js.api
    except ImportError as e:
        raise ReplicationError("replication needs the nats-py client",
                               hint="pip install '.[replication]'") from e
    return nats


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
    ``replicas`` is the stream's replication factor (3 on a three-node cluster): a new stream is
    created with it (1 when not given); an existing stream with another factor is updated to
    it, and when JetStream refuses the change (too few nodes) opening fails with a
    ReplicationError naming both numbers. ``replicas=None`` takes an existing stream as it is.
    """

    def __init__(self, servers: str | Sequence[str], name: str, *, replicas: int | None = None,
                 create: bool = True, prefix: str | None = None, timeout: float = 10.0) -> None:
        nats = _nats()
        if not _NAME.match(name or ""):
            raise ValidationError("stream", f"{name!r} must be 1 to 64 letters, digits, '-' or '_'")
        prefix = prefix if prefix is not None else f"braidlog.{name}"
        if not _PREFIX.match(prefix) or len(prefix) > 200:
            raise ValidationError("prefix", f"{prefix!r} must be dot-separated tokens of letters, "
                                  "digits, '-' or '_'")
        if replicas is not None and (type(replicas) is not int or not 1 <= replicas <= 5):
            raise ValidationError("replicas", f"must be 1 to 5, got {replicas!r}")
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
        self._checkpoints_ready = False
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True,
                                        name=f"braidlog-nats-{name}")
        self._thread.start()
        try:
            self._call(self._open(create), timeout * 2 + 5)
        except Transient as e:
            self.close()
            raise ReplicationError(f"cannot reach NATS at {', '.join(self.servers)}: {e}",
                                   hint=HINT) from None
        except BaseException:
            self.close()
            raise

    # -- the loop thread ---------------------------------------------------------------------
    def _call(self, coro: Any, timeout: float) -> Any:
        """Run a coroutine on the loop thread and wait for it; Transient on timeout."""
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
            raise Transient(f"no answer within {timeout:.1f} s") from None

    def _retry(self, make: Callable[[], Any], deadline: float, what: str) -> Any:
        """Call ``make()`` (a coroutine factory) until it succeeds or the deadline passes."""
        delay = 0.05
        while True:
            left = deadline - time.monotonic()
            try:
                return self._call(make(), min(self.timeout, max(left, 0.001)))
            except Transient as e:
                left = deadline - time.monotonic()
                if left <= delay:
                    raise ReplicationError(f"{what} failed for stream {self.name}: {e}",
                                           hint=HINT) from None
                time.sleep(delay)
                delay = min(delay * 2, 1.0)

    async def _open(self, create: bool) -> None:
        nats = self._nats

        async def quiet(e: Exception) -> None:
            # the server refuses a publish this client's credentials do not allow with an
            # asynchronous -ERR, never an answer: fail the publishes waiting for one now
            if "permissions violation" in str(e).lower():
                for fut in list(self._waiting.values()):
                    if not fut.done():
                        fut.set_exception(_Denied(str(e).strip().strip("'")))

        try:
            self._nc = await asyncio.wait_for(nats.connect(
                servers=self.servers, name=f"braidlog {self.name}", connect_timeout=2,
                reconnect_time_wait=0.25, max_reconnect_attempts=-1, allow_reconnect=True,
                error_cb=quiet), self.timeout)
        except TimeoutError:
            raise Transient(f"no connection within {self.timeout:g} s") from None
        except (OSError, nats.errors.Error) as e:
            raise Transient(str(e) or type(e).__name__) from None
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
            num_replicas=self.replicas or 1, retention=api.RetentionPolicy.LIMITS,
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
                wanted = self.replicas
                if wanted is not None and info.config.num_replicas != wanted:
                    await self._scale(info.config, wanted)
                self.replicas = wanted or info.config.num_replicas
                return
            except (TimeoutError, self._nats.errors.Error) as e:
                code = getattr(e, "err_code", None)
                if code in _PERMANENT or self._loop.time() > deadline:
                    raise ReplicationError(f"cannot open stream {self.name}: {e}",
                                           hint=HINT if code is None else _PERMANENT.get(code, HINT)) from None
                await asyncio.sleep(0.1)  # JetStream is electing its leaders

    async def _scale(self, config: Any, wanted: int) -> None:
        """Change an existing stream's replication factor, or say why it cannot be done."""
        import dataclasses

        had = config.num_replicas
        try:
            info = await self._js.update_stream(dataclasses.replace(config, num_replicas=wanted))
        except self._nats.js.errors.APIError as e:
            raise ReplicationError(
                f"stream {self.name} has {had} replica(s) and replicas={wanted} was asked, but "
                f"JetStream refused to change it: {e.description or e}",
                hint=f"give replicas={had} to keep it, or run a cluster of at least {wanted} "
                "JetStream nodes") from None
        if info.config.num_replicas != wanted:
            raise ReplicationError(
                f"stream {self.name} still has {info.config.num_replicas} replica(s) after "
                f"asking for {wanted}", hint="check the cluster with `nats stream info`")

    # -- signed checkpoints travel in a stream of their own ------------------------------------
    @property
    def checkpoint_stream(self) -> str:
        """The stream beside this one that holds the writer's signed checkpoint notes."""
        return f"{self.name}-checkpoints"

    def checkpoint_subject(self, size: int) -> str:
        return f"{self.prefix}-checkpoints.{size}"

    async def _checkpoints_exist(self, create: bool) -> bool:
        if self._checkpoints_ready:
            return True
        api = self._nats.js.api
        try:
            try:
                await self._js.stream_info(self.checkpoint_stream)
            except self._nats.js.errors.NotFoundError:
                if not create:
                    return False
                await self._js.add_stream(api.StreamConfig(
                    name=self.checkpoint_stream, subjects=[f"{self.prefix}-checkpoints.>"],
                    storage=api.StorageType.FILE, num_replicas=self.replicas or 1,
                    retention=api.RetentionPolicy.LIMITS, discard=api.DiscardPolicy.NEW,
                    allow_direct=True, duplicate_window=120.0, deny_delete=True,
                    deny_purge=True, metadata={"braidlog": "1"},
                    description=f"signed checkpoint notes of braidlog stream {self.name}"))
        except self._nats.js.errors.APIError as e:
            if e.err_code in _PERMANENT or e.err_code == 10065:
                raise ReplicationError(
                    f"cannot open the checkpoint stream {self.checkpoint_stream}: {e}",
                    hint="its subjects overlap another stream's; rename one") from None
            raise self._transient(e) from None
        except (TimeoutError, self._nats.errors.Error) as e:
            raise self._transient(e) from None
        self._checkpoints_ready = True
        return True

    async def _publish_note(self, size: int, note: bytes) -> None:
        await self._checkpoints_exist(True)
        msg_id = f"{size}-{digest(note)[:8].hex()}"
        try:
            ack = await self._js.publish(self.checkpoint_subject(size), note, timeout=self.timeout,
                                         headers={HDR_TREE_SIZE: str(size), "Nats-Msg-Id": msg_id})
        except (TimeoutError, OSError, self._nats.errors.Error) as e:
            raise self._transient(e) from None
        if not ack.seq:
            raise Transient(f"checkpoint {size} was not acknowledged")

    async def _read_notes(self, start: int, count: int) -> list[tuple[int, Any, bytes]]:
        if not await self._checkpoints_exist(False):
            return []
        return await self._read(start, count, self.checkpoint_stream)

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
        """The stream's last seq, its chain hash, its group's last seq and epoch (retried)."""
        return self.last(timeout=timeout).mark

    def last(self, *, timeout: float | None = None) -> Last:
        """The stream's watermark and its last message's payload (retried)."""
        deadline = time.monotonic() + (timeout if timeout is not None else self.timeout)
        return self._retry(self._last, deadline, "reading the watermark")

    def last_epoch(self, *, timeout: float | None = None
                   ) -> tuple[int, Mapping[str, str], bytes] | None:
        """The stream's last writer-epoch record as (seq, headers, payload); None if it has none."""
        deadline = time.monotonic() + (timeout if timeout is not None else self.timeout)
        return self._retry(self._last_epoch, deadline, "reading the writer epoch")

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
            except (Transient, BraidlogError):
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
    def _transient(self, e: BaseException) -> Transient:
        return Transient(str(e) or type(e).__name__)

    async def _info(self) -> dict[str, Any]:
        try:
            info = await self._js.stream_info(self.name)
        except (TimeoutError, self._nats.errors.Error) as e:
            raise self._transient(e) from None
        cluster = info.cluster
        return {"stream": self.name, "messages": info.state.messages,
                "first_seq": info.state.first_seq, "last_seq": info.state.last_seq,
                "replicas": info.config.num_replicas,
                "leader": getattr(cluster, "leader", None) if cluster else None}

    async def _last(self) -> Last:
        try:
            info = await self._js.stream_info(self.name)
            state = info.state
            if state.last_seq == 0:
                return Last(EMPTY, None)
            if state.first_seq != 1 or state.messages != state.last_seq:
                raise ReplicationError(
                    f"stream {self.name} is not a gap-free copy: it holds {state.messages} "
                    f"messages between seq {state.first_seq} and {state.last_seq}",
                    hint="messages were deleted or purged; ship the log to a new stream")
            raw = await self._js.get_msg(self.name, seq=state.last_seq)
        except (TimeoutError, self._nats.errors.Error) as e:
            raise self._transient(e) from None
        try:
            salt = bytes.fromhex(header(raw.headers, HDR_SALT) or "")
        except ValueError:
            salt = None
        return Last(self._mark(state.last_seq, raw.headers), raw.data or b"", salt)

    async def _last_epoch(self) -> tuple[int, Mapping[str, str], bytes] | None:
        try:
            raw = await self._js.get_msg(self.name, subject=self.subject(EPOCH_BRAID))
        except self._nats.js.errors.NotFoundError:
            return None
        except (TimeoutError, self._nats.errors.Error) as e:
            raise self._transient(e) from None
        return raw.seq, raw.headers or {}, raw.data or b""

    def _mark(self, seq: int, headers: Mapping[str, str] | None) -> Watermark:
        try:
            found = int(header(headers, HDR_SEQ) or "")
            chain = bytes.fromhex(header(headers, HDR_HASH) or "")
            commit = int(header(headers, HDR_COMMIT) or "")
            epoch = epoch_header(headers)
        except ValueError:
            raise IntegrityError(
                f"stream {self.name} seq {seq} holds a foreign or corrupt record: it has no valid "
                f"{HDR_SEQ}/{HDR_HASH}/{HDR_COMMIT}/{HDR_EPOCH} headers, so something other than "
                f"braidlog published to {self.prefix}.>; ship the verified log to a new stream "
                "(docs/replication.md, *A foreign or corrupt record*)", seq=seq) from None
        if found != seq or len(chain) != 32 or commit < seq:
            raise IntegrityError(
                f"stream {self.name} seq {seq} holds a foreign or corrupt record: it claims log "
                f"seq {found} (group end {commit}); ship the verified log to a new stream "
                "(docs/replication.md, *A foreign or corrupt record*)", seq=seq)
        return Watermark(seq, chain, commit, epoch)

    def _token(self) -> str:
        return self._nc.new_inbox().rpartition(".")[2]

    def _request(self, subject: str, body: bytes, headers: dict[str, str]) -> Any:
        token = self._token()
        fut = self._loop.create_future()
        self._waiting[token] = fut
        send = self._nc.publish(subject, body, reply=f"{self._inbox}.{token}", headers=headers)
        return fut, send, token

    async def _publish(self, rows: list[Row], commit: int) -> int:
        """Publish rows, one atomic batch if several; the acknowledged seq.

        One message goes out as a plain publish (it is atomic by itself, and JetStream syncs an
        atomic batch to disk at commit, ~20 ms on a file stream). Several messages are pipelined
        inside one atomic batch: the server stores all of them or none.
        """
        batch_id = self._token()
        last = len(rows)
        fut = token = None
        try:
            for i, (seq, chain, body, subject, epoch, salt) in enumerate(rows, 1):
                hx = chain.hex()
                hdr = {"Nats-Msg-Id": hx, HDR_SEQ: str(seq), HDR_HASH: hx, HDR_COMMIT: str(commit),
                       HDR_EPOCH: str(epoch), HDR_SALT: salt.hex()}
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
            assert fut is not None  # the last message's request
            msg = await asyncio.wait_for(fut, self.timeout)
        except _Denied as e:
            raise ReplicationError(
                f"NATS refused this client's publish to stream {self.name}: {e}",
                hint=f"publishing on {self.prefix}.> needs the writer's credentials "
                "(docs/replication.md, *Authorization*)") from None
        except self._nats.errors.MaxPayloadError:
            big = max(rows, key=lambda r: len(r[2]))
            raise ReplicationError(
                f"record seq {big[0]} is {len(big[2])} bytes, more than the NATS server's "
                f"max_payload ({self._nc.max_payload} bytes)",
                hint="raise max_payload in the nats-server configuration (up to 64 MB)") from None
        except (TimeoutError, OSError, self._nats.errors.Error) as e:
            raise self._transient(e) from None
        finally:
            if token is not None:
                self._waiting.pop(token, None)
        return self._ack(msg, rows[-1][0])

    def _ack(self, msg: Any, want: int) -> int:
        status = header(msg.headers, "Status")
        if status == "503":
            raise Transient("no responders: JetStream has no leader for the stream right now")
        try:
            ack = json.loads(msg.data) if msg.data else {}
        except ValueError:
            raise Transient(f"unreadable acknowledgement {msg.data[:80]!r}") from None
        error = ack.get("error")
        if error:
            code = error.get("err_code")
            text = f"JetStream error {code}: {error.get('description')}"
            if code in _PERMANENT:
                raise ReplicationError(f"stream {self.name} refused the batch: {text}",
                                       hint=_PERMANENT[code])
            raise Transient(text, code)  # 10071 and friends: the caller re-reads the watermark
        seq = ack.get("seq")
        if seq != want or ack.get("duplicate"):
            raise Transient(f"acknowledged seq {seq}, expected {want}")
        return seq

    async def _read(self, start: int, count: int, name: str | None = None
                    ) -> list[tuple[int, Any, bytes]]:
        """Up to ``count`` messages from seq ``start`` by one batched direct get (of stream
        ``name``, default this one)."""
        out: list[tuple[int, Any, bytes]] = []
        end = self._loop.create_future()

        async def take(msg: Any) -> None:
            status = header(msg.headers, "Status")
            if status:
                if not end.done():
                    end.set_result((status, header(msg.headers, "Description") or ""))
                return
            out.append((int(header(msg.headers, "Nats-Sequence") or 0), msg.headers, msg.data))
            if len(out) >= count and not end.done():
                end.set_result(("204", ""))

        try:
            sub = await self._nc.subscribe(self._nc.new_inbox(), cb=take)
            try:
                request = json.dumps({"seq": start, "batch": count, "max_bytes": 16 << 20})
                await self._nc.publish(f"$JS.API.DIRECT.GET.{name or self.name}", request.encode(),
                                       reply=sub.subject)
                status, text = await asyncio.wait_for(end, self.timeout)
            finally:
                await sub.unsubscribe()
        except (TimeoutError, OSError, self._nats.errors.Error) as e:
            raise self._transient(e) from None
        if status not in ("204", "404"):
            raise Transient(f"direct get answered {status} {text}".strip())
        return out


