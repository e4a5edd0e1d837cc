"""get_delta_channel_history (for LangGraph's beta DeltaChannel; its conformance tests are not in
a released suite yet): BraidlogSaver's own walk, which reads only the channels asked for, gives
what BaseCheckpointSaver's walk over get_tuple gives, on chains with snapshots, forks, pending
writes on the target and several channels."""

from __future__ import annotations

import asyncio
import random
from uuid import uuid4

import pytest

pytest.importorskip("langgraph.checkpoint.base")

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.base.id import uuid6
from langgraph.checkpoint.serde.types import _DeltaSnapshot

from braidlog.integrations.langgraph import BraidlogSaver


def chain(saver, rng, tid, steps, channels=("a", "b")):
    """A thread whose checkpoints sometimes store a snapshot of a channel and whose tasks write
    to the channels; now and then a fork from an earlier checkpoint."""
    configs = []
    parent = None
    for step in range(steps):
        config = {"configurable": {"thread_id": tid, "checkpoint_ns": ""}}
        if parent is not None:
            config["configurable"]["checkpoint_id"] = parent["configurable"]["checkpoint_id"]
        values, versions = {}, {}
        for ch in channels:
            if rng.random() < 0.3:
                values[ch] = _DeltaSnapshot([step, ch])
                versions[ch] = saver.get_next_version(None if not configs else str(step), None)
        cp = {"v": 4, "id": str(uuid6(clock_seq=step)), "ts": "", "channel_values": values,
              "channel_versions": versions, "versions_seen": {}, "updated_channels": None}
        stored = saver.put(config, cp, {"source": "loop", "step": step, "parents": {}}, versions)
        for t in range(rng.randrange(3)):
            saver.put_writes(stored, [(rng.choice(channels), f"{step}.{t}")], str(uuid4()), f"path{t}")
        configs.append(stored)
        parent = rng.choice(configs) if rng.random() < 0.2 else stored
    return configs


def test_the_walk_equals_the_base_walk(tmp_path):
    rng = random.Random(5)
    with BraidlogSaver(str(tmp_path / "history.lmdb")) as saver:
        for n in range(4):
            tid = f"t{n}"
            configs = chain(saver, rng, tid, 25)
            for config in rng.sample(configs, 8) + [{"configurable": {"thread_id": tid, "checkpoint_ns": ""}}]:
                for channels in (["a"], ["b"], ["a", "b"], ["a", "missing"], []):
                    ours = saver.get_delta_channel_history(config=config, channels=channels)
                    base = BaseCheckpointSaver.get_delta_channel_history(saver, config=config, channels=channels)
                    assert ours == dict(base), (config, channels)
        last = configs[-1]
        assert asyncio.run(saver.aget_delta_channel_history(config=last, channels=["a"])) == \
            saver.get_delta_channel_history(config=last, channels=["a"])
        # nothing there: no writes, no seed
        assert saver.get_delta_channel_history(
            config={"configurable": {"thread_id": "nobody"}}, channels=["a"]) == {"a": {"writes": []}}
