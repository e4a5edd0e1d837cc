"""Fixtures for the projection families (given deltas / when command / then deltas: tests/projections/given.py)."""
