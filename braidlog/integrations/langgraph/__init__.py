"""braidlog as LangGraph's storage: ``BraidlogSaver`` (a checkpointer) and ``BraidlogStore``
(long-term memory), both on a braidlog store, so a graph's threads and memories are deltas in
a hash-chained log: time travel, proofs, export and replication work on them (docs/langgraph.md).

``PROJECTIONS`` makes the threads and memories a projection the ``braidlog`` command shows:
``braidlog --app braidlog.integrations.langgraph state --projection langgraph``.

Needs the ``langgraph`` extra: ``pip install '.[langgraph]'``.
"""

from ...errors import require_extra

try:
    from .projection import PROJECTION, PROJECTIONS
    from .saver import BraidlogSaver
    from .store import BraidlogStore, ItemVersion, StoreAt
except ImportError as e:  # the extra not installed: say which to install, not a bare ModuleNotFoundError
    require_extra(e, "braidlog.integrations.langgraph", "langgraph", ("langgraph", "langchain_core"))

__all__ = ["BraidlogSaver", "BraidlogStore", "StoreAt", "ItemVersion", "PROJECTION", "PROJECTIONS"]
