"""delete_thread on a store that can erase: the thread's records keep their envelopes and lose
their payloads, other threads keep theirs; with another process holding the store open the
thread is only hidden, and erase_deleted() erases it once this process holds the store alone."""

from __future__ import annotations

import logging
import subprocess
import sys

import pytest

import braidlog

pytest.importorskip("langgraph.checkpoint.base")
if not hasattr(braidlog.Braid, "erase"):  # erasure lands with braidlog's forgetting
    pytest.skip("this braidlog cannot erase", allow_module_level=True)

from langgraph.checkpoint.conformance.test_utils import generate_checkpoint

from braidlog.integrations.langgraph import BraidlogSaver


def fill(saver, tid, n=3):
    config = {"configurable": {"thread_id": tid, "checkpoint_ns": ""}}
    for i in range(n):
        cp = generate_checkpoint(channel_values={"secret": f"{tid} said {i}"})
        cp["channel_versions"] = {"secret": saver.get_next_version(None if i == 0 else str(i), None)}
        config = saver.put(config, cp, {"source": "loop", "step": i, "parents": {}}, cp["channel_versions"])
        saver.put_writes(config, [("secret", f"{tid} wrote {i}")], f"task{i}")
    return config


def payloads(saver, tid):
    return [(r.delta.kind, bool(r.delta.payload)) for r in saver.log.scan_braid(f"langgraph/thread/{tid}")]


def test_delete_thread_erases_the_threads_records(tmp_path):
    with BraidlogSaver(str(tmp_path / "erase.lmdb")) as saver:
        fill(saver, "a")
        kept = fill(saver, "b")
        saver.delete_thread("a")
        assert saver.get_tuple({"configurable": {"thread_id": "a"}}) is None
        shown = payloads(saver, "a")
        assert shown[-1] == ("langgraph.deleted", True)  # the tombstone says what happened
        assert shown[:-1] and all(not has for _, has in shown[:-1])  # every other record: erased
        assert all(has for _, has in payloads(saver, "b"))
        assert saver.get_tuple(kept).checkpoint["channel_values"] == {"secret": "b said 2"}
        fill(saver, "a", 1)  # the thread id can be used again
        assert saver.get_tuple({"configurable": {"thread_id": "a"}}).checkpoint["channel_values"] == {
            "secret": "a said 0"}
        assert saver.erase_deleted() == []


def test_a_store_open_elsewhere_is_not_erased_until_erase_deleted(tmp_path, caplog):
    path = str(tmp_path / "shared.lmdb")
    with BraidlogSaver(path) as saver:
        fill(saver, "a")
        other = subprocess.Popen(
            [sys.executable, "-c", "import braidlog, sys; b = braidlog.open(sys.argv[1], projections=[]);"
             " print('open', flush=True); sys.stdin.read(); b.close()", path],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        try:
            assert other.stdout.readline().strip() == "open"
            with caplog.at_level(logging.WARNING):
                saver.delete_thread("a")
            assert "not erased yet" in caplog.text
            assert saver.get_tuple({"configurable": {"thread_id": "a"}}) is None  # hidden at once
            assert all(has for _, has in payloads(saver, "a"))  # but still in the store
            with pytest.raises(braidlog.StorageError):
                saver.erase_deleted()
        finally:
            other.communicate("", timeout=60)
        assert saver.erase_deleted() == ["a"]
        assert [has for _, has in payloads(saver, "a")][:-1] == [False] * (len(payloads(saver, "a")) - 1)


def test_erase_can_be_turned_off(tmp_path):
    with BraidlogSaver(str(tmp_path / "keep.lmdb"), erase=False) as saver:
        fill(saver, "a")
        saver.delete_thread("a")
        assert saver.get_tuple({"configurable": {"thread_id": "a"}}) is None
        assert all(has for _, has in payloads(saver, "a"))
    with pytest.raises(braidlog.ValidationError):
        BraidlogSaver(str(tmp_path / "keep.lmdb"), erase="yes")
