"""braidlog as the store of the frameworks its users already run, through their own interfaces.

One subpackage per framework, each importing braidlog's public API and its framework (installed
by the extra of the same name): ``braidlog.integrations.eventsourcing`` (a persistence module for
the ``eventsourcing`` library) and ``braidlog.integrations.langgraph`` (LangGraph's checkpointer
and long-term memory store). Nothing here is imported by ``import braidlog``.
"""
