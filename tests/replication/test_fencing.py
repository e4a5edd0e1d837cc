"""Fencing on one real nats-server: a refused write commits nothing locally, a promotion starts a
writer epoch that refuses the old writer, the writer checks its stream's last record by its
bytes, the replication factor is never kept silently, and NATS permissions keep other clients
off the stream's subjects. The three-node versions are in test_replication_cluster.py.
"""

from __future__ import annotations

import os
import subprocess
import threading
import time

import pytest

nats = pytest.importorskip("nats")

from braidlog import Braid, ConflictError, IntegrityError, LmdbLog, ValidationError, to_json  # noqa: E402  (after the importorskip above)
from braidlog.cli import main  # noqa: E402  (after the importorskip above)
from braidlog.replication import (  # noqa: E402  (after the importorskip above)
    EPOCH_KIND,
    HDR_COMMIT,
    HDR_EPOCH,
    HDR_HASH,
    HDR_SEQ,
    Replica,
    ReplicationError,
    Shipper,
    StaleWriter,
    Stream,
    SyncLog,
    promote,
)
from braidlog.replication.wire import HDR_SALT, chains  # noqa: E402  (after the importorskip above)
from tests.support import make_delta, random_deltas  # noqa: E402  (after the importorskip above)
from tests.support.nats import COUNTS, assert_stream_is_the_log, free_port, raw_messages, wait_port  # noqa: E402  (after the importorskip above)

pytestmark = pytest.mark.nats


def test_every_refused_sync_append_leaves_the_store_unchanged(stores, open_stream, url, tmp_path,
                                                              capsys):
    stream = open_stream()
    a = stores("a")
    log_a = SyncLog(a, stream)
    for i in range(3):
        log_a.append(make_delta(i))
    # a second synchronous writer of the same epoch: the stream orders the two. Each takes in
    # what the stream acknowledged past its head (it chains onto it) before it publishes.
    b = stores("b")
    log_b = SyncLog(b, stream)
    log_b.append_batch([make_delta(10), make_delta(11)])
    assert b.head().seq == 5
    assert log_a.append(make_delta(12)) == 6 and a.head().seq == 6
    braid = Braid(log_b, [COUNTS])  # decided at b's head 5, stale: caught up and decided again
    assert braid.append(make_delta(13)) == 7
    assert list(a.scan_bodies(1, 7)) == list(b.scan_bodies(1, 7))
    # a store whose own records are not in the stream is another writer's past: refused
    a.append(make_delta(14))  # committed around the SyncLog, at seq 7: b's seq 7 is different
    head = a.head()
    before = (list(a.scan_bodies()), a.braids())
    with pytest.raises(StaleWriter, match=r"seq 7 has chain hash .*another writer.*committed "
                                          r"nothing locally"):
        log_a.append(make_delta(20))
    assert a.head() == head
    with pytest.raises(StaleWriter, match="this call appended nothing"):
        log_a.append(make_delta(21))  # a SyncLog refused once refuses at once
    with pytest.raises(StaleWriter):
        Braid(SyncLog(a, stream), [COUNTS]).append(make_delta(23))
    assert (list(a.scan_bodies()), a.braids()) == before and a.head() == head

    # a promotion fences both writers of epoch 0: refused before they publish anything
    r = stores("r")
    done = promote(r, stream, quiet=0.1, timeout=20)
    assert done.epoch == 1 and done.caught_up.seq == 7 and done.head.seq == 9  # kind, epoch
    wm = stream.watermark()
    for store in (a, b):
        was = store.head()
        with pytest.raises(StaleWriter, match="writer epoch 1 since seq 9.*fenced"):
            SyncLog(store, stream).append(make_delta(30))
        assert store.head() == was
    with pytest.raises(StaleWriter, match="fenced"):
        log_b.append(make_delta(31))  # a live SyncLog of epoch 0: its publish is refused
    assert b.head().seq == 7
    assert stream.watermark() == wm, "a fenced writer published"

    # the command line says so, exits 1, and commits nothing
    a.close()
    (tmp_path / "d.jsonl").write_text(to_json(make_delta(40, braid="cli")).decode() + "\n")
    code = main(["--store", str(tmp_path / "a"), "sync-append", str(tmp_path / "d.jsonl"),
                 "--nats", url, "--stream", stream.name, "--timeout", "10"])
    err = capsys.readouterr().err
    assert code == 1 and "fenced" in err and "committed nothing locally" in err
    with LmdbLog(tmp_path / "a") as again:
        assert again.head() == head
    assert stream.watermark() == wm
    assert_stream_is_the_log(stream.servers, stream.name, r)


def test_a_sync_transaction_over_one_atomic_batch_is_refused_whole(stores, open_stream):
    writer, stream = stores("w"), open_stream()
    log = SyncLog(writer, stream)
    with pytest.raises(ValidationError, match="at most 1000 deltas"):
        log.append_batch([make_delta(i) for i in range(1001)])
    assert writer.head().seq == 0 and stream.watermark().seq == 0
    assert len(log.append_batch([make_delta(i) for i in range(1000)])) == 1000
    assert stream.watermark().seq == 1000


# -- epochs ----------------------------------------------------------------------------------
def test_the_old_writers_unshipped_tail_cannot_win_after_a_promotion(stores, open_stream, rng):
    old, stream = stores("old"), open_stream()
    old.append_batch(random_deltas(rng, 5))
    Shipper(old, stream).ship(timeout=10)
    old.append_batch(random_deltas(rng, 3))  # committed, never shipped: 6..8
    new = stores("new")
    done = promote(new, stream, writer="r1", quiet=0.1, timeout=20)
    assert (done.epoch, done.caught_up.seq, done.head.seq) == (1, 5, 7)  # 6 declares the kind
    fence = raw_messages(stream.servers, stream.name)[-1]
    assert fence[2][HDR_EPOCH] == "1" and fence[1].endswith(".braidlog-writer")
    assert new.read(7).delta.kind == EPOCH_KIND and new.read(7).delta.payload["writer"] == "r1"
    assert new.read(6).delta.kind == "kind_declared"
    # the old writer's shipper comes back: it reads the stream first and is refused
    wm = stream.watermark()
    shipper = Shipper(old, stream)
    with pytest.raises(StaleWriter, match=r"since seq 7 \(writer 'r1'\).*records 6\.\.8 were "
                                          r"never acknowledged.*log --start 6"):
        shipper.ship(timeout=10)
    assert shipper.shipped == 0 and stream.watermark() == wm
    # the new writer ships in epoch 1; a replica rebuilt from scratch is byte-identical
    SyncLog(new, stream).append(make_delta(50, braid="after"))
    Shipper(new, stream).ship(timeout=10)
    replica = stores("r2")
    assert Replica(replica, stream).catch_up(timeout=10) == new.head()
    assert list(replica.scan_bodies()) == list(new.scan_bodies())
    assert [m[2][HDR_EPOCH] for m in raw_messages(stream.servers, stream.name)] == \
        ["0"] * 6 + ["1", "1"]
    # promoting again starts epoch 2 after epoch 1's records
    assert promote(replica, stream, quiet=0.1, timeout=10).epoch == 2
    with pytest.raises(StaleWriter, match="epoch 2 since seq 9"):
        SyncLog(new, stream).append(make_delta(51))


def test_promote_refuses_while_the_stream_moves_unless_forced(stores, open_stream, rng):
    old, stream = stores("old"), open_stream()
    old.append_batch(random_deltas(rng, 5))
    shipper = Shipper(old, stream).start(poll=0.01)
    stop = threading.Event()

    def write() -> None:  # the old writer is alive and writing
        while not stop.is_set():
            old.append(random_deltas(rng, 1)[0])
            time.sleep(0.02)

    writer = threading.Thread(target=write)
    writer.start()
    new = stores("new")
    try:
        with pytest.raises(ConflictError, match=r"still moving.*Stop the old writer first.*"
                                                r"revoke its NATS credentials.*--force"):
            promote(new, stream, quiet=0.5, timeout=20)
        done = promote(new, stream, quiet=0.5, force=True, timeout=20)
    finally:
        stop.set()
        writer.join(10)
    old.append(random_deltas(rng, 1)[0])  # the old writer's tail, after the fence
    with pytest.raises(StaleWriter, match="fenced"):
        shipper.stop(timeout=30)
    assert done.head.seq == done.caught_up.seq + 2 and old.head().seq > done.caught_up.seq
    assert new.read(done.head.seq).delta.payload == {"epoch": 1, "writer": new.read(
        done.head.seq).delta.payload["writer"], "forced": True}
    # one history: the old writer's records up to the fence, then the fence; nothing after it
    cut = done.caught_up.seq + 1
    assert list(new.scan_bodies(1, cut)) == list(old.scan_bodies(1, cut))
    assert_stream_is_the_log(stream.servers, stream.name, new)


# -- the writer checks what its stream holds ---------------------------------------------------
@pytest.mark.parametrize("how", ["bytes", "prev"])
def test_a_foreign_record_is_reported_and_the_genuine_log_ships_to_a_new_stream(
        stores, open_stream, stream_name, url, tmp_path, capsys, how):
    writer, stream = stores("w"), open_stream()
    log = SyncLog(writer, stream)
    for i in range(5):
        log.append(make_delta(i))
    replica = Replica(stores("r"), stream)
    replica.catch_up(timeout=10)
    writer.append(make_delta(5))  # committed, not yet shipped
    seq = forge_next(writer, stream, how)
    assert seq == 6
    with pytest.raises(IntegrityError, match=r"seq 6 holds a foreign or corrupt record.*ship it "
                                             r"to a new stream") as err:
        Shipper(writer, stream).ship(timeout=10)
    assert err.value.seq == 6
    with pytest.raises(IntegrityError, match="seq 6 holds a foreign or corrupt record"):
        SyncLog(writer, stream).append(make_delta(7))
    assert writer.head().seq == 6
    with pytest.raises(IntegrityError, match="record seq 6 refused"):
        replica.catch_up(timeout=10)
    writer.close()
    code = main(["--store", str(tmp_path / "w"), "ship", "--nats", url, "--stream", stream.name,
                 "--once", "--timeout", "10"])
    assert code == 1 and "seq 6 holds a foreign or corrupt record" in capsys.readouterr().err

    # the recovery: verify the store, ship it to a new stream, point the replicas there
    with LmdbLog(tmp_path / "w") as writer:
        head = writer.verify()
        new_name = stream_name + "new"
        assert main(["--store", str(tmp_path / "w"), "ship", "--nats", url, "--stream", new_name,
                     "--once"]) == 0
        fresh = Stream(url, new_name, create=False)
        try:
            moved = Replica(replica.store, fresh)  # the stopped replica, at seq 5
            assert moved.catch_up(timeout=10) == head == replica.store.head()
            assert list(replica.store.scan_bodies()) == list(writer.scan_bodies())
            assert_stream_is_the_log(url, new_name, writer)
        finally:
            fresh.close()


# -- replication factor ----------------------------------------------------------------------
def test_a_stream_with_another_replication_factor_is_refused_on_one_node(
        stores, open_stream, url, stream_name, tmp_path, capsys):
    stream = open_stream()
    assert stream.info()["replicas"] == 1
    assert open_stream(replicas=1).replicas == 1 and open_stream().replicas == 1
    with pytest.raises(ReplicationError, match=r"has 1 replica\(s\) and replicas=3 was asked, "
                                               r"but JetStream refused"):
        open_stream(replicas=3)
    (tmp_path / "d.jsonl").write_text(to_json(make_delta(40, braid="cli")).decode() + "\n")
    for command in (["sync-append", str(tmp_path / "d.jsonl")], ["ship", "--once"]):
        code = main(["--store", str(tmp_path / "w"), *command, "--nats", url, "--stream",
                     stream_name, "--replicas", "3", "--timeout", "5"])
        assert code == 1 and "replicas=3 was asked" in capsys.readouterr().err
    with LmdbLog(tmp_path / "w") as writer:
        assert writer.head().seq == 0
    assert stream.info()["replicas"] == 1


# -- NATS authorization: only the writer's credentials publish on the stream's subjects --------
AUTH_CONF = """
listen: 127.0.0.1:{port}
server_name: auth1
jetstream {{ store_dir: "{store}" }}
authorization {{
  users = [
    # the writer: publishes records on its stream's subjects and uses the JetStream API
    {{ user: writer, password: writer-secret,
       permissions: {{ publish: ["braidlog.AUTH.>", "$JS.API.>"], subscribe: ["_INBOX.>"] }} }}
    # a replica: reads the stream (info, direct get) and nothing else
    {{ user: replica, password: replica-secret,
       permissions: {{ publish: ["$JS.API.STREAM.INFO.AUTH", "$JS.API.DIRECT.GET.AUTH",
                                 "$JS.API.STREAM.MSG.GET.AUTH"],
                       subscribe: ["_INBOX.>"] }} }}
  ]
}}
"""


@pytest.fixture
def auth_server(nats_binary, tmp_path):
    port = free_port()
    conf = tmp_path / "auth.conf"
    conf.write_text(AUTH_CONF.format(port=port, store=tmp_path / "js"))
    log = open(tmp_path / "auth.log", "ab")
    proc = subprocess.Popen([nats_binary, "-c", str(conf)], stdout=log, stderr=log)
    log.close()
    try:
        assert wait_port(port, proc), (tmp_path / "auth.log").read_text()
        yield port
    finally:
        proc.terminate()
        proc.wait(10)


def test_only_the_writers_credentials_publish_on_the_stream(auth_server, stores, tmp_path):
    port = auth_server
    writer_url = f"nats://writer:writer-secret@127.0.0.1:{port}"
    replica_url = f"nats://replica:replica-secret@127.0.0.1:{port}"
    writer = stores("w")
    with Stream(writer_url, "AUTH") as stream:
        log = SyncLog(writer, stream)
        for i in range(4):
            log.append(make_delta(i))
    with Stream(replica_url, "AUTH", create=False, timeout=3) as ro:
        replica = stores("r")
        assert Replica(replica, ro).catch_up(timeout=10) == writer.head()
        # the replica's credentials cannot publish a record: the server refuses it
        with pytest.raises(Exception, match="(?i)permissions violation|timeout"):
            publish_raw(replica_url, "braidlog.AUTH.b1", writer.body(4),
                        {HDR_SEQ: "5", HDR_HASH: "00" * 32, HDR_COMMIT: "5"}, expect=4,
                        timeout=2)
        # nor write as a writer: the replica refuses, never promoted ...
        with pytest.raises(ReplicationError, match="was never promoted"):
            SyncLog(replica, ro, timeout=2)
        # ... and a store that is no replica, with the replica's credentials: NATS refuses,
        # nothing committed locally
        from braidlog.replication.role import unmark

        unmark(replica)
        with pytest.raises(ReplicationError, match=r"NATS refused this client's publish to stream "
                                                   r"AUTH: .*(?i:permissions violation).*writer.s cred"):
            SyncLog(replica, ro, timeout=2).append(make_delta(9))
        assert replica.head() == writer.head()
        with pytest.raises(ReplicationError, match="(?i)permissions violation"):
            promote(replica, ro, quiet=0.1, timeout=3)
        assert replica.head() == writer.head()
    with Stream(writer_url, "AUTH") as stream:
        assert stream.watermark().seq == 4
        assert_stream_is_the_log(writer_url, "AUTH", writer)


# -- signed checkpoints: a forgery that recomputed the chain is refused ------------------------
def checkpoint_signer(name: str):
    """(sign(size, root) -> a C2SP signed note, open(note) -> Checkpoint) for a new key."""
    import base64

    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from braidlog.proofs.verify import EM_DASH, Checkpoint, VerifierKey, key_id, open_checkpoint

    private = Ed25519PrivateKey.generate()
    public = private.public_key().public_bytes_raw()
    kid = key_id(name, public)

    def sign(size: int, root: bytes) -> bytes:
        text = Checkpoint(name, size, root).text()
        sig = base64.b64encode(kid + private.sign(text.encode())).decode()
        return f"{text}\n{EM_DASH} {name} {sig}\n".encode()

    key = VerifierKey(name, kid, public)
    opener = lambda note: open_checkpoint(note, key)  # noqa: E731  (a one-line callback)
    opener.key = str(key)
    return sign, opener


def test_a_rechained_forgery_is_refused_where_a_signed_checkpoint_contradicts_it(
        stores, open_stream, stream_name, url, tmp_path, capsys):
    pytest.importorskip("cryptography")
    from braidlog.proofs import root
    from tests.support.nats import forged, republish

    writer, stream = stores("w"), open_stream()
    log = SyncLog(writer, stream)
    for i in range(1, 9):
        log.append(make_delta(i))
    sign, trusted = checkpoint_signer("writer.example")
    note = sign(8, root(writer, 8))
    writer.put_note(8, note)
    Shipper(writer, stream).ship(timeout=10)  # records are there: the note goes out now
    assert [m[3] for m in raw_messages(stream.servers, stream.checkpoint_stream)] == [note]
    genuine = Replica(stores("g"), stream, checkpoints=trusted)
    assert genuine.catch_up(timeout=10) == writer.head() and genuine.ignored_checkpoints == 0
    assert genuine.checked_checkpoints == 1

    # someone with publish rights copies the stream, altering record 7 and rechaining 7 and 8
    messages = raw_messages(stream.servers, stream.name)
    copy = open_stream(stream_name + "copy", prefix=stream.prefix + "copy")
    rewritten = forged(messages, 7, "rechained")
    prev = bytes.fromhex(rewritten[6][1][HDR_HASH])
    subject, headers, data = rewritten[7]
    chained = chains(prev, 8, data, bytes.fromhex(headers[HDR_SALT]))
    headers = {**headers, HDR_HASH: chained.hex(), "Nats-Msg-Id": chained.hex()}
    rewritten[7] = (subject, headers, data)
    republish(copy.servers, copy.name, [(s.replace(stream.prefix, copy.prefix, 1), h, d)
                                        for s, h, d in rewritten])
    # the chain alone cannot tell (a replica without checkpoints takes all of it) ...
    fooled = Replica(stores("f"), copy)
    assert fooled.catch_up(timeout=10).seq == 8
    # ... the writer's signed checkpoint can; one signed by another key is not evidence
    other, _ = checkpoint_signer("someone.else")
    copy._call(copy._publish_note(8, other(8, b"\x01" * 32)), 5)
    copy._call(copy._publish_note(8, note), 5)
    checked = Replica(stores("c"), copy, checkpoints=trusted)
    with pytest.raises(IntegrityError, match=r"record seq 8 refused: a signed checkpoint says "
                                             r"the first 8 records have root") as err:
        checked.catch_up(timeout=10)
    assert err.value.expected == root(writer, 8) and checked.ignored_checkpoints == 1
    assert checked.store.head().seq in (6, 7)  # 7 decodes and chains; 8 is where it shows
    (tmp_path / "writer.vkey").write_text(trusted.key + "\n")
    code = main(["--store", str(tmp_path / "cli"), "replica", "--nats", url, "--stream", copy.name,
                 "--prefix", copy.prefix, "--once", "--checkpoint-key", str(tmp_path / "writer.vkey")])
    assert code == 1 and "record seq 8 refused: a signed checkpoint" in capsys.readouterr().err
    assert main(["--store", str(tmp_path / "cli2"), "replica", "--nats", url, "--stream",
                 stream.name, "--once", "--checkpoint-key", trusted.key]) == 0
    assert "replica at 8:" in (out := capsys.readouterr().out)
    assert "held to 1 signed checkpoint(s)" in out
    # a replica that applied the forgery before the checkpoint came finds out when it does
    with pytest.raises(IntegrityError, match="the 8 this replica applied give"):
        Replica(fooled.store, copy, checkpoints=trusted).catch_up(timeout=10)


# -- arbitrary input at the boundary ----------------------------------------------------------
from hypothesis import HealthCheck, given, settings  # noqa: E402  (the fuzz section's own imports)
from hypothesis import strategies as st  # noqa: E402  (the fuzz section's own imports)

from tests.support.nats import forge_next, publish_raw  # noqa: E402  (the fuzz section's own imports)

_header_names = st.sampled_from([HDR_SEQ, HDR_HASH, HDR_COMMIT, HDR_EPOCH, "Nats-Msg-Id", "X"])
_header_values = st.one_of(st.text(max_size=70), st.integers(-3, 3).map(str),
                           st.binary(min_size=32, max_size=32).map(bytes.hex))


@pytest.fixture(scope="module")
def one_stream(nats_server):
    stream = Stream(nats_server.urls[0], f"ANY{os.getpid()}")
    yield stream
    stream.close()


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(headers=st.dictionaries(_header_names, _header_values, max_size=5),
       body=st.binary(max_size=120))
def test_a_replica_refuses_any_malformed_message_with_an_integrity_error(one_stream, headers,
                                                                          body):
    from braidlog import MemoryLog

    stream = one_stream
    store = MemoryLog()
    replica = Replica(store, stream)
    with pytest.raises(IntegrityError, match="record seq 1 refused") as err:
        replica._accept(1, headers, body)
    assert err.value.seq == 1 and replica.error is err.value and store.head().seq == 0


@given(replicas=st.one_of(st.integers(), st.floats(), st.text(max_size=3), st.booleans()))
def test_a_bad_replication_factor_is_refused_before_connecting(replicas):
    if type(replicas) is int and 1 <= replicas <= 5:
        return
    from braidlog import ValidationError as VE

    with pytest.raises(VE, match="replicas: must be 1 to 5"):
        Stream("nats://127.0.0.1:1", "S", replicas=replicas)


def test_checkpoints_issued_by_the_command_line_reach_a_checking_replica(
        tmp_path, url, stream_name, capsys, rng):
    pytest.importorskip("cryptography")
    w = str(tmp_path / "w")
    with LmdbLog(w) as writer:
        writer.append_batch(random_deltas(rng, 30))
    assert main(["keygen", "example.org/agent", "--out", str(tmp_path / "sk")]) == 0
    key = capsys.readouterr().out.strip().splitlines()[-1]
    assert main(["--store", w, "checkpoint", "--key", str(tmp_path / "sk")]) == 0
    assert main(["--store", w, "ship", "--nats", url, "--stream", stream_name, "--once"]) == 0
    capsys.readouterr()
    assert main(["--store", str(tmp_path / "r"), "replica", "--nats", url, "--stream",
                 stream_name, "--once", "--checkpoint-key", key]) == 0
    assert "replica at 30:" in (out := capsys.readouterr().out)
    assert "held to 1 signed checkpoint(s)" in out
