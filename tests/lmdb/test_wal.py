"""durable="wal": one sync a commit through the write-ahead file, and what an OS crash or a
killed process leaves behind recovered in full.

An OS crash is made on disk as it would be found after the restart: the data file as the last
checkpoint synced it, with any of the pages written since (the meta pages among them) having
reached the disk or not, the write-ahead file as synced, and its header from an earlier boot."""

from __future__ import annotations

import os
import random
import shutil
import signal
import struct
import uuid
from pathlib import Path

import pytest
from blake3 import blake3

from braidlog import LmdbLog, StorageError, ValidationError
from braidlog.lmdb import wal
from tests.support.workers import planned, refused_in_child, spawn


def _from_an_earlier_boot(store: Path) -> None:
    """Rewrite the write-ahead file's newest header as if written before a restart."""
    path = store / wal.WAL
    raw = bytearray(path.read_bytes()[:wal.BODY])
    slots = []
    for slot in (0, 1):
        magic, gen, _, n = struct.unpack_from("<16sQ16sI", raw, slot * wal.SLOT)
        if magic == wal.MAGIC:
            slots.append((gen, slot, n))
    gen, slot, n = max(slots)
    at = slot * wal.SLOT
    raw[at + 24:at + 40] = uuid.uuid4().bytes
    end = at + 44 + 2 * n
    raw[end:end + 32] = blake3(bytes(raw[at:end])).digest()
    with open(path, "r+b") as f:
        f.write(raw)


def _crashed(synced: bytes, now: bytes, rng: random.Random, psize: int = 4096, *,
             metas: bool = False) -> bytes:
    """The data file after an OS crash: each page written since the sync reached the disk or
    not (a page past the synced end that did not is a hole: zeros); the meta pages did when
    ``metas``."""
    out = bytearray(now)
    for at in range(0, len(now), psize):
        old = synced[at:at + psize].ljust(len(now[at:at + psize]), b"\0")
        if old != now[at:at + psize] and rng.random() < 0.5 and not (metas and at < 2 * psize):
            out[at:at + psize] = old
    return bytes(out)


def _acked(log: LmdbLog, batches: list) -> list:
    for batch in batches:
        log.append_batch(batch)
    return [d for b in batches for d in b]


class Disk:
    """What the disk holds of a store written under durable="wal": its data file as the last
    checkpoint synced it (read after every commit that checkpointed)."""

    def __init__(self, log: LmdbLog) -> None:
        self.log, self.generation = log, -1
        self.seen()

    def seen(self) -> None:
        generation = self.log._alive().ahead.wal.header.generation
        if generation != self.generation:
            self.generation, self.synced = generation, (self.log.path / "data.mdb").read_bytes()

    def append(self, batches: list) -> list:
        for batch in batches:
            self.log.append_batch(batch)
            self.seen()
        return [d for b in batches for d in b]

    def crash(self, to: Path, rng: random.Random, *, metas: bool = False) -> None:
        """``to``: the store as found after an OS crash now."""
        shutil.copytree(self.log.path, to, ignore=shutil.ignore_patterns("lock.mdb"))
        (to / "data.mdb").write_bytes(_crashed(self.synced, (to / "data.mdb").read_bytes(), rng,
                                               metas=metas))
        _from_an_earlier_boot(to)


@pytest.mark.parametrize("reopen", [True, "wal"])
@pytest.mark.parametrize("map_size", [1 << 30, 1 << 16])  # the map grows under the pin
@pytest.mark.parametrize("round_", range(3))
def test_an_os_crash_keeps_every_acknowledged_commit(tmp_path, rng, reopen, map_size, round_):
    store, crashed = tmp_path / "store", tmp_path / "crashed"
    plan = planned(rng.randrange(2**32), 160)
    with LmdbLog(store, durable="wal") as log:
        expected = _acked(log, plan[:80])
    disk = Disk(LmdbLog(store, durable="wal", map_size=map_size))
    expected += disk.append(plan[80:])
    disk.crash(crashed, rng)
    disk.log.close()

    with LmdbLog(crashed, durable=reopen) as back:
        assert back.verify() == back.head()
        assert [r.delta for r in back.scan()] == expected
        assert back.seq_of(expected[-1].id) == len(expected)  # the indexes hold them too
    assert (crashed / wal.WAL).exists() == (reopen == "wal")


def test_checkpoints_start_the_file_again_and_lose_nothing(tmp_path, rng, monkeypatch):
    monkeypatch.setattr(wal, "SIZE", wal.BODY + 64 * 1024)  # a checkpoint every few commits
    disk = Disk(LmdbLog(tmp_path / "store", durable="wal"))
    expected = disk.append(planned(rng.randrange(2**32), 120))
    assert disk.generation > 4, "the file never filled: plan more"
    disk.crash(tmp_path / "crashed", rng)
    disk.log.close()
    with LmdbLog(tmp_path / "crashed") as back:
        assert [r.delta for r in back.scan()] == expected
        assert back.verify() == back.head()


@pytest.mark.slow
@pytest.mark.parametrize("round_", range(3))
def test_a_killed_writer_loses_no_acknowledged_commit(tmp_path, rng, round_):
    import time

    path = str(tmp_path / "store")
    seed, n_batches = rng.randrange(2**32), 5000
    plan = planned(seed, n_batches)
    proc = spawn("writer", path, str(seed), str(n_batches), "wal")
    first = proc.stdout.readline()
    time.sleep(rng.random() * 0.5)
    proc.send_signal(signal.SIGKILL)
    out, _ = proc.communicate(timeout=30)
    acked = [int(line.split()[1]) for line in (first + out).splitlines() if line.startswith("ack")]
    assert "done" not in out
    with LmdbLog(path, durable="wal") as log:
        assert log.verify() == log.head()
        stored = [r.delta for r in log.scan()]
    attempted = [d for batch in plan for d in batch]
    assert stored == attempted[:len(stored)]
    assert len(stored) >= sum(len(b) for b in plan[:max(acked, default=-1) + 1])


@pytest.mark.parametrize(("here", "there"), [("wal", "wal"), ("wal", "True"), (True, "wal")])
def test_a_wal_writer_is_the_only_writing_process_and_readers_are_not_refused(tmp_path, here, there):
    path = tmp_path / "store"
    with LmdbLog(path, durable=here) as log:
        log.append_batch(planned(1, 1)[0])
        proc = spawn("writer", str(path), "2", "1", there)
        _, err = proc.communicate(timeout=60)
        assert proc.returncode != 0 and "durable='wal'" in err and "only writer" in err, err
        reader = spawn("reader", str(path), "0.2")
        _, err = reader.communicate(timeout=60)
        assert reader.returncode == 0, err
        assert log.head().seq == len(planned(1, 1)[0])


def test_read_only_after_a_restart_is_refused_until_a_writer_recovers(tmp_path, rng):
    crashed = tmp_path / "crashed"
    disk = Disk(LmdbLog(tmp_path / "store", durable="wal"))
    expected = disk.append(planned(3, 20))
    disk.crash(crashed, rng, metas=True)
    disk.log.close()
    with pytest.raises(StorageError, match="open it once for writing"):
        LmdbLog(crashed, readonly=True)
    LmdbLog(crashed).close()
    with LmdbLog(crashed, readonly=True) as back:
        assert [r.delta for r in back.scan()] == expected
    assert not (crashed / wal.WAL).exists()


def test_a_closed_store_reopens_read_only_after_a_restart(tmp_path):
    store = tmp_path / "store"
    with LmdbLog(store, durable="wal") as log:
        expected = _acked(log, planned(4, 5))
    _from_an_earlier_boot(store)
    with LmdbLog(store, readonly=True) as back:
        assert [r.delta for r in back.scan()] == expected


@pytest.mark.parametrize("bad", ["WAL", "yes", 1, 0, None, b"wal", 1.0])
def test_durable_takes_true_false_or_wal(tmp_path, bad):
    with pytest.raises(ValidationError, match="durable"):
        LmdbLog(tmp_path / "store", durable=bad)
    assert not os.path.exists(tmp_path / "store")


def test_erasing_asks_for_a_store_opened_durable(tmp_path):
    from braidlog import open as open_braid

    store = tmp_path / "store"
    with open_braid(store, projections=[], durable="wal") as braid:
        seqs = braid.append_batch(planned(6, 1)[0])
        with pytest.raises(StorageError, match="durable='wal'"):
            braid.erase(seqs=[seqs[0]], reason="a request to forget")
        assert braid.log.head().seq == len(seqs)


def test_a_forked_child_is_told_to_spawn_and_the_parents_hold_stays(tmp_path, rng):
    store = tmp_path / "store"
    disk = Disk(LmdbLog(store, durable="wal"))
    expected = disk.append(planned(7, 3))
    assert refused_in_child(lambda: LmdbLog(store, readonly=True), "'spawn'")
    expected += disk.append(planned(8, 40))  # the pin held: an OS crash now loses nothing
    disk.crash(tmp_path / "crashed", rng)
    disk.log.close()
    with LmdbLog(tmp_path / "crashed") as back:
        assert [r.delta for r in back.scan()] == expected


def test_group_commits_of_many_threads_survive_an_os_crash(tmp_path, rng):
    import threading

    disk = Disk(LmdbLog(tmp_path / "store", durable="wal"))
    plans = [planned(100 + k, 8) for k in range(6)]
    acked: list[list] = [[] for _ in plans]

    def work(k: int) -> None:
        for batch in plans[k]:
            disk.log.append_batch(batch)
            acked[k].extend(batch)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(len(plans))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert disk.log._alive().ahead.wal.header.generation == disk.generation, "a checkpoint came: plan less"
    disk.crash(tmp_path / "crashed", rng)
    disk.log.close()
    with LmdbLog(tmp_path / "crashed") as back:
        assert back.verify() == back.head()
        stored = {r.delta.id for r in back.scan()}
    assert all(d.id in stored for mine in acked for d in mine)
    assert len(stored) == sum(len(mine) for mine in acked)


def test_a_retry_writes_nothing_ahead_and_does_not_checkpoint(tmp_path):
    with LmdbLog(tmp_path / "store", durable="wal") as log:
        batch = planned(9, 1)[0]
        log.append_batch(batch)
        wal_state = log._alive().ahead.wal
        before = (wal_state.header.generation, wal_state.offset)
        assert log.append_batch(batch) == list(range(1, len(batch) + 1))  # a retry: the same seqs
        assert (wal_state.header.generation, wal_state.offset) == before


def test_the_pin_moves_often_enough_that_the_file_stays_near_its_size(tmp_path):
    """Under the pin LMDB reuses no page freed since the checkpoint: checkpoints must come by
    commits, not only by the file's growth, or the file grows by every page each commit writes."""
    from braidlog.bench.data import AgentSession

    deltas = AgentSession(seed=3).deltas(5000)
    pages = {}
    for mode in ("wal", False):
        with LmdbLog(tmp_path / str(mode), durable=mode) as log:
            for d in deltas:
                log.append(d)
            pages[mode] = log._env.info()["last_pgno"]
    assert pages["wal"] < pages[False] + 3000, pages
