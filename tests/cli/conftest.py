"""Fixtures for the tests of the shell: every command's output, errors, help and docs."""
