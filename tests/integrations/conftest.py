"""Fixtures for the framework integrations: eventsourcing's shipped test cases and LangGraph's conformance
suite on braidlog."""
