"""A replica takes no writes until it is promoted, and a writer whose stream ends in a forged,
rechained record is told the safe remedy (ship its intact log to a new stream), on a real
nats-server."""

from __future__ import annotations

import pytest

nats = pytest.importorskip("nats")

from braidlog import to_json  # noqa: E402  (after the importorskip above)
from braidlog.cli import main  # noqa: E402  (after the importorskip above)
from braidlog.replication import Replica, ReplicationError, Shipper, StaleWriter, SyncLog, promote  # noqa: E402  (after the importorskip above)
from tests.support import make_delta  # noqa: E402  (after the importorskip above)
from tests.support.nats import forged, raw_messages, republish, shipped  # noqa: E402  (after the importorskip above)

pytestmark = pytest.mark.nats


def test_a_replica_refuses_every_write_until_it_is_promoted(stores, open_stream, url, tmp_path, capsys):
    writer, stream = stores("w"), open_stream()
    log = SyncLog(writer, stream)
    for i in range(3):
        log.append(make_delta(i))
    replica = stores("r")
    assert Replica(replica, stream).catch_up(timeout=10) == writer.head()
    head, last = replica.head(), stream.info()["last_seq"]
    for write in (lambda: SyncLog(replica, stream), lambda: Shipper(replica, stream)):
        with pytest.raises(ReplicationError, match=rf"this store is a replica of stream {stream.name} and "
                                                   r"was never promoted: it cannot ship"):
            write()
    line = to_json(make_delta(50)).decode()
    (tmp_path / "d.jsonl").write_text(line + "\n")
    where = ["--store", str(replica.path)]
    nats_args = ["--nats", url, "--stream", stream.name, "--prefix", stream.prefix]
    for args in (["sync-append", str(tmp_path / "d.jsonl"), *nats_args], ["append", str(tmp_path / "d.jsonl")],
                 ["ship", "--once", *nats_args], ["erase", "--seq", "1", "--reason", "test"]):
        assert main(where + args) == 1, args
        assert "was never promoted" in capsys.readouterr().err
    assert (replica.head(), stream.info()["last_seq"]) == (head, last)  # nothing written anywhere
    log.append(make_delta(4))  # the live writer still ships: no replica knocked it out
    # promoted, it is the writer: it takes writes, the old writer is fenced
    assert Replica(replica, stream).catch_up(timeout=10) == writer.head()
    promote(replica, stream, writer="r", quiet=0.2)
    assert SyncLog(replica, stream).append(make_delta(5)) == replica.head().seq
    with pytest.raises(StaleWriter):
        log.append(make_delta(6))


def test_a_forged_and_rechained_tail_names_the_safe_remedy(stores, open_stream, stream_name):
    writer, stream, messages = shipped(stores, open_stream, n=6)
    copy = open_stream(stream_name + "copy", prefix=stream.prefix + "copy")
    republish(copy.servers, copy.name, [(s.replace(stream.prefix, copy.prefix, 1), h, d)
                                        for s, h, d in forged(messages, 6, "rechained")])
    assert len(raw_messages(copy.servers, copy.name)) == 6
    head = writer.head()
    with pytest.raises(StaleWriter) as err:
        SyncLog(writer, copy).append(make_delta(99))
    text = str(err.value)
    assert "not this log's: another writer's, or forged and rechained" in text
    assert "This store's log is intact" in text and "ship it to a new stream (`braidlog ship --stream NEW`)" in text
    assert "do not throw it away" in text and "rebuild this store as a replica" not in text
    assert writer.head() == head
