"""Fixtures for the tests of the storage port: the contract suites every store passes."""
