"""Fixtures for the tests of the storage port: the contract suites every store passes, one per
role and capability (as eventsourcing's shared recorder tests are).

``log`` is each store in turn (MemoryLog, LmdbLog); a suite names its port in ``ROLE``, and the
fixture checks that the store implements it before the suite runs against it."""

from __future__ import annotations

import pytest

from braidlog import LmdbLog, MemoryLog


@pytest.fixture(params=["memory", "lmdb"])
def log(request, tmp_path):
    store = MemoryLog() if request.param == "memory" else LmdbLog(tmp_path / "store")
    role = getattr(request.module, "ROLE", None)
    try:
        if role is not None:
            assert isinstance(store, role), f"{type(store).__name__} does not implement {role.__name__}"
        yield store
    finally:
        store.close()
