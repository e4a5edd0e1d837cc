"""Shared fixtures: a ``log`` for each store, seeded random deltas that print their seed.

The helpers the tests share live in ``tests.support``; the NATS fixtures in ``tests.support.nats``."""

from __future__ import annotations

import os
import random

import pytest

from braidlog import LmdbLog, MemoryLog

pytest_plugins = ["tests.support.nats"]


@pytest.fixture(params=["memory", "lmdb"])
def log(request, tmp_path):
    store = MemoryLog() if request.param == "memory" else LmdbLog(tmp_path / "store")
    yield store
    store.close()


@pytest.fixture
def lmdb_path(tmp_path):
    return tmp_path / "store"


@pytest.fixture
def rng(request):
    seed = int(os.environ.get("BRAIDLOG_SEED", random.randrange(2**32)))
    print(f"\n[seed] BRAIDLOG_SEED={seed} reproduces {request.node.nodeid}")
    return random.Random(seed)


