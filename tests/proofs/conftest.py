"""Fixtures for the tests of the verifiable log: the tree, notes, tlog-proof files, cosignatures and Go's
tlog checker."""
