"""Ship a store's log to NATS JetStream, rebuild verified replicas from it, fail over safely.

The only package that imports ``nats`` (the optional extra ``braidlog[replication]``), and only
in ``stream``. docs/replication.md has the long form. One module per responsibility:

- ``wire``: what a message holds (headers, the watermark, the writer-epoch record); no I/O;
- ``stream``: the connection to one JetStream stream (create, scale, read, publish);
- ``checks``: what a writer checks about its stream's last record before it publishes;
- ``shipper``: asynchronous shipping of committed records, one batch in flight;
- ``sync``: synchronous writing, committed locally only once the stream acknowledged it;
- ``replica``: rebuilding a store from the stream, every record checked, transactions whole;
- ``epochs``: promotion, which starts a new writer epoch that fences the old writer.
"""

from __future__ import annotations

from ..errors import NotAcknowledged, ReplicationError, StaleWriter
from .epochs import Promotion, promote
from .replica import Replica
from .shipper import Shipper
from .stream import Stream
from .sync import SyncLog
from .wire import (
    EPOCH_BRAID,
    EPOCH_KIND,
    HDR_COMMIT,
    HDR_EPOCH,
    HDR_HASH,
    HDR_SEQ,
    MAX_BATCH,
    Watermark,
    WriterEpoch,
    braid_token,
)

__all__ = [
    "Stream",
    "Watermark",
    "Shipper",
    "SyncLog",
    "Replica",
    "promote",
    "Promotion",
    "WriterEpoch",
    "ReplicationError",
    "NotAcknowledged",
    "StaleWriter",
    "braid_token",
    "HDR_SEQ",
    "HDR_HASH",
    "HDR_COMMIT",
    "HDR_EPOCH",
    "EPOCH_KIND",
    "EPOCH_BRAID",
    "MAX_BATCH",
]
