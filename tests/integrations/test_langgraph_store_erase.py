"""LangGraph's store with ``erase=True``: TTL expiry erases every version of the items it
expires, so their values leave every file of the store (docs/forgetting.md)."""

from __future__ import annotations

import time

import pytest

pytest.importorskip("langgraph")

from braidlog.integrations.langgraph import BraidlogStore
from tests.support.forgetting import files_holding

SECRET = "the-user-said-their-pin-is-4921"


def test_ttl_expiry_erases_every_version_of_the_item_with_erase_true(tmp_path):
    path = tmp_path / "items.lmdb"
    with BraidlogStore(str(path), ttl={}, erase=True) as store:
        store.put(("users", "alice"), "pin", {"v": SECRET}, ttl=0.002)
        store.put(("users", "alice"), "pin", {"v": SECRET + "-v2"}, ttl=0.002)
        store.put(("users", "bob"), "pin", {"v": "bob-1234"}, ttl=None)
        time.sleep(0.2)
        assert store.sweep_ttl() == 1
        assert store.get(("users", "alice"), "pin") is None
        assert [v.expired for v in store.history(("users", "alice"), "pin")] == [True]
        assert store.get(("users", "bob"), "pin").value == {"v": "bob-1234"}
        store.put(("users", "alice"), "pin", {"v": "fresh"})
        assert store.get(("users", "alice"), "pin").value == {"v": "fresh"}
    assert files_holding(path, SECRET) == {}
    assert files_holding(path, "bob-1234")
