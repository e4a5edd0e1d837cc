"""Everything that knows LMDB: the environment, the on-disk format, the log, its checks and the
file reader. The only importer of ``lmdb`` in braidlog (besides the bench's raw-LMDB peer)."""

from .log import LmdbLog

__all__ = ["LmdbLog"]
