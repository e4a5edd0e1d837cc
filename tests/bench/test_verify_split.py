"""The split-verify prototype (braidlog.bench.verify_split): the checks of ``verify`` in worker
processes at once, over a real store; it passes an intact store and stops at a changed record."""

import multiprocessing
from concurrent.futures import ProcessPoolExecutor

import lmdb
import pytest

from braidlog import BraidlogError, LmdbLog
from braidlog.bench import verify_split
from braidlog.bench.data import AgentSession


def test_split_verify_checks_what_verify_checks(tmp_path, monkeypatch):
    monkeypatch.setattr(verify_split, "RANGE", 700)  # several ranges, chained across
    path = str(tmp_path / "s")
    ds = AgentSession(7).deltas(2_000)
    with LmdbLog(path, durable=False) as log:
        for i in range(0, 2_000, 500):
            log.append_batch(ds[i:i + 500])
    with ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("spawn")) as pool:
        assert verify_split.split_verify(path, pool) == 2_000
        env = lmdb.open(path, max_dbs=16)
        with env.begin(write=True) as txn:  # record 1,500's chain hash changed
            db = env.open_db(b"log", txn=txn, create=False)
            key = (1_500).to_bytes(8, "big")
            value = bytearray(txn.get(key, db=db))
            value[0] ^= 1
            txn.put(key, bytes(value), db=db)
        env.close()
        with pytest.raises(BraidlogError, match="seq 1500"):
            verify_split.split_verify(path, pool)
