"""braidlog as LangGraph's storage: ``BraidlogSaver`` (a checkpointer) and ``BraidlogStore``
(long-term memory), both on a braidlog store, so a graph's threads and memories are deltas in
a hash-chained log: time travel, proofs, export and replication work on them (docs/langgraph.md).

``PROJECTIONS`` makes the threads and memories a projection the ``braidlog`` command shows:
``braidlog --app braidlog.integrations.langgraph state --projection langgraph``.

Needs the ``langgraph`` extra: ``pip install '.[langgraph]'``.
"""

from ...errors import MissingDependency

try:
    from .projection import PROJECTION, PROJECTIONS
    from .saver import BraidlogSaver
    from .store import BraidlogStore, ItemVersion, StoreAt
except ImportError as e:  # the extra not installed: say which to install, not a bare ModuleNotFoundError
    if (e.name or "").split(".")[0] not in ("langgraph", "langchain_core"):
        raise
    raise MissingDependency(f"braidlog.integrations.langgraph needs the langgraph extra, which is not "
                            f"installed here (no module {e.name}): pip install 'braidlog[langgraph]' "
                            "(from a braidlog clone: pip install '.[langgraph]')") from e

__all__ = ["BraidlogSaver", "BraidlogStore", "StoreAt", "ItemVersion", "PROJECTION", "PROJECTIONS"]
