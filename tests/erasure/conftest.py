"""Fixtures for the tests of erase: payloads gone from every file, commitments kept, receipts."""
