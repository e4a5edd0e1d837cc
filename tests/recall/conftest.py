"""Fixtures for the tests of recall: vectors, the HNSW and keyword indexes, the shell's recall."""
