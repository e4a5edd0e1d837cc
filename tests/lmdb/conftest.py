"""Fixtures for the tests of the LMDB adapter: opening, creating, format upgrades, integrity checks, byte
flips and crashes."""
