"""Reads through an index check the record they land on; a damaged id index never lets an
idempotent retry write a delta twice. The damage is made with lmdb directly, entry by entry,
as a flipped byte in an index page leaves it (tests/lmdb/test_byteflip.py flips real bytes)."""

from __future__ import annotations

import lmdb
import pytest

from braidlog import IntegrityError, LmdbLog, Refs, StorageError
from braidlog.cli import main
from braidlog.lmdb.log import FORMAT_VERSION, id_digest
from tests.support import make_delta
from tests.support.oldformat import downgrade


def _store(path, n: int = 20, indexed: bool = True):
    """``n`` deltas; with ``indexed``, every one below the indexed-to mark (``repair_indexes``
    writes every entry and moves the mark to the head), else all in the log's tail."""
    deltas = [make_delta(i, braid=f"b{i % 2}", kind="message" if i % 3 else "tick",
                         refs=Refs(deltas=("ENTITY-7",)) if i % 5 == 0 else None)
              for i in range(n)]
    with LmdbLog(path) as log:
        log.append_batch(deltas)
        if indexed:
            log.repair_indexes()
        return deltas, log.head()


def _damage(path, fn):
    env = lmdb.open(str(path), max_dbs=16)
    with env.begin(write=True) as txn:
        fn(env, txn)
    env.close()


def _db(env, txn, name):
    return env.open_db(name.encode(), txn=txn, create=False, dupsort=name in ("braid", "kind", "refs"))


def test_an_id_entry_naming_another_record_is_an_integrity_error_and_a_retry_writes_nothing(lmdb_path):
    deltas, head = _store(lmdb_path)
    d = deltas[3]
    _damage(lmdb_path, lambda env, txn: txn.put(d.id.encode(), (9).to_bytes(8, "big"),
                                                  db=_db(env, txn, "ids")))
    with LmdbLog(lmdb_path) as log:
        with pytest.raises(IntegrityError, match=rf"id index maps '{d.id}' to seq 9, whose delta "
                                                 "does not have that id.*repair --indexes"):
            log.get(d.id)
        with pytest.raises(IntegrityError, match="id indexes disagree"):
            log.append(d)  # the digest index says seq 4, the id index seq 9
        with pytest.raises(IntegrityError):
            log.seq_of(d.id)
        assert log.head() == head


@pytest.mark.parametrize("lost", ["ids", "idh", "ids past the mark"])
def test_a_retry_never_writes_a_second_record_when_one_id_index_lost_the_entry(lmdb_path, lost):
    # past the indexed-to mark, the id's second witness is the log's tail, not the digest index
    deltas, head = _store(lmdb_path, indexed=lost != "ids past the mark")
    lost = lost.split()[0]
    d = deltas[7]
    key = d.id.encode() if lost == "ids" else id_digest(d.id)
    _damage(lmdb_path, lambda env, txn: txn.delete(key, db=_db(env, txn, lost)))
    with LmdbLog(lmdb_path) as log:
        with pytest.raises(IntegrityError, match=f"id indexes disagree on delta {d.id}.*nothing "
                                                 "was written"):
            log.append(d)
        with pytest.raises(IntegrityError, match=f"id indexes disagree on delta {d.id}"):
            log.append_batch([make_delta(100), d])
        assert log.head() == head
        if lost == "ids":
            with pytest.raises(IntegrityError, match="id index has no entry.*digest index maps it"):
                log.get(d.id)
        else:
            assert log.get(d.id).seq == 8  # the id index is intact and the record holds the id


def test_an_id_entry_naming_a_seq_past_the_head_is_an_integrity_error_not_a_type_error(lmdb_path):
    deltas, head = _store(lmdb_path)
    d = deltas[0]
    def fn(env, txn):
        for name, key in (("ids", d.id.encode()), ("idh", id_digest(d.id))):
            txn.put(key, (500).to_bytes(8, "big"), db=_db(env, txn, name))
    _damage(lmdb_path, fn)
    with LmdbLog(lmdb_path) as log:
        with pytest.raises(IntegrityError, match="to seq 500, which the log does not hold"):
            log.append(d)
        with pytest.raises(IntegrityError, match="to seq 500, which the log does not hold"):
            log.get(d.id)
        assert log.head() == head


@pytest.mark.parametrize("index,key,scan", [
    ("braid", "b1", lambda log: list(log.scan_braid("b1"))),
    ("kind", "tick", lambda log: list(log.scan_kind("tick"))),
    ("refs", "ENTITY-7", lambda log: list(log.scan_refs("ENTITY-7"))),
])
@pytest.mark.parametrize("seq", [3, 400])  # seq 3: delta 2, braid b0, a message, no refs
def test_an_index_scan_landing_on_a_record_without_its_key_raises(lmdb_path, index, key, scan, seq):
    _store(lmdb_path)
    _damage(lmdb_path, lambda env, txn: txn.put(key.encode(), seq.to_bytes(8, "big"),
                                                 db=_db(env, txn, index), dupdata=True))
    with LmdbLog(lmdb_path) as log:
        name = {"refs": "refers-to"}.get(index, index)
        what = "whose delta does not" if seq == 3 else "which the log does not hold"
        with pytest.raises(IntegrityError, match=rf"the {name} index maps '{key}' to seq {seq}, {what}"):
            scan(log)


def test_a_braid_head_landing_on_another_braid_raises(lmdb_path):
    _store(lmdb_path)
    _damage(lmdb_path, lambda env, txn: txn.put(b"b0", (20).to_bytes(8, "big"),
                                                db=_db(env, txn, "braid"), dupdata=True))
    with LmdbLog(lmdb_path) as log:
        with pytest.raises(IntegrityError, match="braid index maps 'b0' to seq 20"):
            log.braid_head("b0")
        with pytest.raises(IntegrityError, match="braid index maps 'b0' to seq 20"):
            log.braids()


def test_a_format_2_store_gets_its_id_digest_index_on_its_first_writable_open(lmdb_path):
    deltas, head = _store(lmdb_path)

    downgrade(lmdb_path, 2)
    with LmdbLog(lmdb_path) as log:
        assert log.format_version == FORMAT_VERSION == 5
        head = log.head()  # re-chained over the committed forms
        assert log.append(deltas[5]) == 6  # an idempotent retry, checked by both indexes
        assert log.head() == head
    env = lmdb.open(str(lmdb_path), max_dbs=16, readonly=True)
    with env.begin() as txn:
        idh = dict(txn.cursor(_db(env, txn, "idh")))
    env.close()
    assert idh == {id_digest(d.id): (i + 1).to_bytes(8, "big") for i, d in enumerate(deltas)}


@pytest.mark.parametrize("ref", ["", "x" * 600])
def test_show_an_id_no_store_can_hold_is_a_clear_error(lmdb_path, capsys, ref):
    _store(lmdb_path)
    assert main(["--store", str(lmdb_path), "show", ref]) == 1
    err = capsys.readouterr().err
    assert err.startswith("braidlog: error: ") and "MDB_" not in err


def test_id_digest_keys_follow_the_ids_time_so_appends_in_time_order_add_at_the_right_edge():
    from ulid import ULID
    ids = [str(ULID.from_timestamp(1_700_000_000 + i / 1000)) for i in range(200)]
    assert sorted(ids, key=id_digest) == ids  # one id a millisecond: time order is key order
    assert len({id_digest(i)[10:] for i in ids}) == 200  # and the digest part tells them apart


def _old_keyed(path):
    """The store as a development build of format 4 wrote it: the id-digest index keyed by
    BLAKE2b-128 of the id alone, and no key scheme in meta."""
    import hashlib

    from braidlog.lmdb.format import IDH_KEYS

    def fn(env, txn):
        idh, id_of = _db(env, txn, "idh"), {bytes(v): bytes(k) for k, v in txn.cursor(_db(env, txn, "ids"))}
        rows = [(hashlib.blake2b(id_of[bytes(v)], digest_size=16).digest(), bytes(v))
                for v in txn.cursor(idh).iternext(keys=False)]
        txn.drop(idh, delete=False)
        txn.cursor(idh).putmulti(rows)
        assert txn.delete(IDH_KEYS, db=_db(env, txn, "meta"))
    _damage(path, fn)


def test_a_store_written_before_the_id_digest_keys_led_with_time_is_rekeyed_on_its_first_writable_open(
        lmdb_path):
    deltas, head = _store(lmdb_path)
    _old_keyed(lmdb_path)
    with pytest.raises(StorageError, match="id-digest index is keyed the old way") as e:
        LmdbLog(lmdb_path, readonly=True)
    assert f"`braidlog --store {lmdb_path} init`" in e.value.hint
    with LmdbLog(lmdb_path) as log:
        assert log.verify() == head  # every index checked both ways, the rebuilt one too
        assert log.append(deltas[5]) == 6  # an idempotent retry, checked by both indexes
        assert log.head() == head
    with LmdbLog(lmdb_path, readonly=True) as log:
        assert log.get(deltas[7].id).seq == 8
    env = lmdb.open(str(lmdb_path), max_dbs=16, readonly=True)
    with env.begin() as txn:
        idh = dict(txn.cursor(_db(env, txn, "idh")))
    env.close()
    assert idh == {id_digest(d.id): (i + 1).to_bytes(8, "big") for i, d in enumerate(deltas)}
