"""The async methods' writes in batches: calls queued at once are appended together, each returns
once its record is durable, a bad call fails alone, and two puts of one thread queued at once are
placed one after the other (the second against the first, committed)."""

from __future__ import annotations

import asyncio

import pytest

pytest.importorskip("langgraph.checkpoint.base")

from langgraph.checkpoint.base import empty_checkpoint

import braidlog
from braidlog.integrations.langgraph import BraidlogSaver


def config(thread: str, checkpoint_id: str | None = None) -> dict:
    conf = {"thread_id": thread, "checkpoint_ns": ""}
    if checkpoint_id is not None:
        conf["checkpoint_id"] = checkpoint_id
    return {"configurable": conf}


def checkpoint(cid: str, notes: list[str], version: int) -> dict:
    cp = empty_checkpoint()
    cp["id"] = cid
    cp["channel_values"] = {"notes": notes}
    cp["channel_versions"] = {"notes": version}
    return cp


def counting(saver: BraidlogSaver, batches: list | None = None) -> list[int]:
    """The sizes of the saver's appends from now on (each one commit); each append's deltas
    go to ``batches`` too, when given."""
    sizes: list[int] = []
    append = saver._append

    def counted(deltas):
        sizes.append(len(deltas))
        if batches is not None:
            batches.append(list(deltas))
        return append(deltas)
    saver._append = counted  # type: ignore[method-assign]
    return sizes


def test_async_writes_queued_at_once_share_commits_and_each_is_durable(tmp_path):
    path = str(tmp_path / "s.lmdb")
    threads = [f"t{i}" for i in range(16)]
    with BraidlogSaver(path) as saver:
        sizes = counting(saver)

        async def steps() -> list:
            firsts = await asyncio.gather(*(
                saver.aput(config(t), checkpoint(f"1-{t}", [t], 1), {"step": 0}, {"notes": 1})
                for t in threads))
            seconds = await asyncio.gather(
                *(saver.aput_writes(f, [("notes", [f"w-{t}"])], f"task-{t}")
                  for f, t in zip(firsts, threads, strict=True)),
                *(saver.aput(f, checkpoint(f"2-{t}", [t, "x"], 2), {"step": 1}, {"notes": 2})
                  for f, t in zip(firsts, threads, strict=True)))
            return [firsts, seconds[16:]]
        firsts, seconds = asyncio.run(steps())
        assert sum(sizes) == 48  # every call's record
        assert len(sizes) < 12  # in a few commits, not 48
    with BraidlogSaver(path) as fresh:  # what each call returned for is on disk
        for t, first, second in zip(threads, firsts, seconds, strict=True):
            assert first["configurable"]["checkpoint_id"] == f"1-{t}"
            assert fresh.get_tuple(first).pending_writes == [(f"task-{t}", "notes", [f"w-{t}"])]
            latest = fresh.get_tuple(config(t))
            assert latest.config == {"configurable": second["configurable"]}
            assert latest.checkpoint["channel_values"] == {"notes": [t, "x"]}
            assert latest.parent_config["configurable"]["checkpoint_id"] == f"1-{t}"


class RefusedSaver(BraidlogSaver):
    """A saver that writes, for task "refused", a record its store's schema refuses (no
    ``writes``): what a batch holding a call the store will not take looks like."""

    def _writes_delta(self, config, writes, task_id, task_path):
        got = super()._writes_delta(config, writes, task_id, task_path)
        if task_id == "refused" and got is not None:
            payload = {k: v for k, v in got[1].payload.items() if k != "writes"}
            return got[0], self._delta(got[1].braid_id, "langgraph.writes", payload)
        return got


def test_a_bad_call_fails_alone_and_writes_nothing(tmp_path):
    """One whose arguments are bad fails before the batch is appended; one the store refuses
    makes the batch go again a call at a time: either way the others are durable."""
    with RefusedSaver(str(tmp_path / "s.lmdb")) as saver:
        first = saver.put(config("t"), checkpoint("1", ["a"], 1), {"step": 0}, {"notes": 1})
        before = saver.braid.head().seq
        batches: list = []
        sizes = counting(saver, batches)

        async def writes() -> list:
            return await asyncio.gather(
                *(saver.aput_writes(first, [("notes", [f"w{i}"])], f"task-{i}") for i in range(6)),
                saver.aput_writes(first, [("notes", ["x"])], "refused"),
                saver.aput_writes(first, [(7, "x")], "bad-channel"),  # a channel is a string
                return_exceptions=True)
        got = asyncio.run(writes())
        assert got[:6] == [None] * 6
        assert isinstance(got[6], braidlog.ValidationError) and "writes" in str(got[6])
        assert isinstance(got[7], braidlog.ValidationError) and "writes[0][0]" in str(got[7])
        assert saver.braid.head().seq == before + 6  # the good ones, and nothing of the bad
        assert sorted(w[0] for w in saver.get_tuple(first).pending_writes) == [f"task-{i}" for i in range(6)]
        # the refused call was tried alone: in a batch of its own, or again alone after the
        # batch that held it was refused (the others of that batch committed, each alone)
        held = [i for i, b in enumerate(batches)
                if any(d.kind == "langgraph.writes" and "writes" not in d.payload for d in b)]
        assert held and sizes[held[-1]] == 1, sizes
        assert sizes[held[0] + 1:].count(1) >= sizes[held[0]], sizes


def test_two_puts_of_one_thread_queued_at_once_are_placed_in_turn(tmp_path):
    """The second names the version the first stored and does not store it again: it finds it in
    the first's record, committed before the second is placed."""
    with BraidlogSaver(str(tmp_path / "s.lmdb")) as saver:
        sizes = counting(saver)
        second = checkpoint("2", ["a"], 1)
        second["channel_values"] = {}  # unchanged: named by version only

        async def both() -> list:
            return await asyncio.gather(
                saver.aput(config("t"), checkpoint("1", ["a"], 1), {"step": 0}, {"notes": 1}),
                saver.aput(config("t", "1"), second, {"step": 1}, {}))
        one, two = asyncio.run(both())
        assert len(sizes) == 2  # two commits: the second waited for the first
        assert two["configurable"]["checkpoint_id"] == "2"
        latest = saver.get_tuple(config("t"))
        assert latest.checkpoint["id"] == "2"
        assert latest.checkpoint["channel_values"] == {"notes": ["a"]}
        record = saver.log.read(saver.braid.head().seq).delta.payload
        assert record["values"] == {} and record["at"] == {"notes": saver.braid.head().seq - 1}


def test_sync_and_async_calls_of_one_thread_mix(tmp_path):
    with BraidlogSaver(str(tmp_path / "s.lmdb")) as saver:
        first = saver.put(config("t"), checkpoint("1", ["a"], 1), {"step": 0}, {"notes": 1})
        second = asyncio.run(saver.aput(first, checkpoint("2", ["a", "b"], 2), {"step": 1}, {"notes": 2}))
        asyncio.run(saver.aput_writes(second, [("notes", ["c"])], "task"))
        third = saver.put(second, checkpoint("3", ["a", "b", "c"], 3), {"step": 2}, {"notes": 3})
        assert saver.get_tuple(second).pending_writes == [("task", "notes", ["c"])]
        assert [t.checkpoint["id"] for t in saver.list(config("t"))] == ["3", "2", "1"]
        assert saver.get_tuple(third).checkpoint["channel_values"] == {"notes": ["a", "b", "c"]}


def test_close_commits_what_is_queued_first(tmp_path):
    path = str(tmp_path / "s.lmdb")
    saver = BraidlogSaver(path)

    async def put_then_close() -> list:
        tasks = [asyncio.ensure_future(saver.aput(config(f"t{i}"), checkpoint("1", [str(i)], 1),
                                                  {"step": 0}, {"notes": 1})) for i in range(8)]
        await asyncio.sleep(0)  # the calls are queued
        await asyncio.to_thread(saver.close)
        return await asyncio.gather(*tasks)
    done = asyncio.run(put_then_close())
    assert [d["configurable"]["thread_id"] for d in done] == [f"t{i}" for i in range(8)]
    with BraidlogSaver(path) as fresh:
        for i in range(8):
            assert fresh.get_tuple(config(f"t{i}")).checkpoint["channel_values"] == {"notes": [str(i)]}


def test_the_batch_threads_stop_when_idle_and_start_again(tmp_path, monkeypatch):
    """A saver left unclosed does not keep its batch threads: they stop after IDLE seconds
    without work, and the next call starts them again."""
    import time

    from braidlog.integrations.langgraph import _batch

    monkeypatch.setattr(_batch, "IDLE", 0.05)
    with BraidlogSaver(str(tmp_path / "s.lmdb")) as saver:
        first = asyncio.run(saver.aput(config("t"), checkpoint("1", ["a"], 1), {"step": 0}, {"notes": 1}))
        assert saver._batches._threads
        deadline = time.monotonic() + 5
        while saver._batches._threads and time.monotonic() < deadline:
            time.sleep(0.02)
        assert not saver._batches._threads
        asyncio.run(saver.aput(first, checkpoint("2", ["a", "b"], 2), {"step": 1}, {"notes": 2}))
        assert saver.get_tuple(config("t")).checkpoint["channel_values"] == {"notes": ["a", "b"]}
