"""The LogStore contract, run against MemoryLog and LmdbLog (the ``log`` fixture)."""

from .store_contract import *  # noqa: F401,F403
