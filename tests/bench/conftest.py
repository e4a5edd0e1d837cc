"""Fixtures for the tests of braidlog bench: its command, the pages counter and the report."""
