"""A ``put``'s arguments, checked and serialized before the saver places its values: the part of
a put that needs nothing of the store, so that the async methods' batches (``_async``) can do
it for many puts before committing them together."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from langgraph.checkpoint.base import CheckpointMetadata, get_serializable_checkpoint_metadata

from ...errors import ValidationError
from ._checks import text as _text
from ._checks import versions as _versions
from ._checks import where as _where
from ._encoding import checkpoint_key, dump, dump_any, head_key
from ._heads import Head

__all__ = ["Put", "put_args"]


class Put:
    """A put on its way: its record's payload, and what placing and keeping it need."""

    __slots__ = ("payload", "tid", "ns", "parent", "versions", "new", "fresh", "returned", "head", "indexed",
                 "gen")

    def __init__(self, payload: dict[str, Any], tid: str, ns: str, parent: str | None,
                 versions: dict[str, Any], new: dict[str, Any], fresh: dict[str, tuple[str, bytes]],
                 returned: Any) -> None:
        self.payload, self.tid, self.ns, self.parent = payload, tid, ns, parent
        self.versions, self.new, self.fresh, self.returned = versions, new, fresh, returned
        self.head: Head | None = None
        self.indexed = False
        self.gen = 0  # the generation of its thread's Known its head was read in



def put_args(serde: Any, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Put:
    """A put's arguments checked and serialized: everything of its record but where its
    values are (``BraidlogSaver._put_delta``)."""
    given, tid, ns, parent = _where(config)
    if not isinstance(checkpoint, Mapping):
        raise ValidationError("checkpoint", f"must be a Checkpoint (a dict), not {type(checkpoint).__name__}")
    cid = _text(checkpoint.get("id"), "checkpoint.id")
    channel_values = checkpoint.get("channel_values", {})
    if not isinstance(channel_values, Mapping):
        raise ValidationError("checkpoint.channel_values", "must be a dict of channel values")
    versions = _versions(checkpoint.get("channel_versions", {}), "checkpoint.channel_versions")
    seen = checkpoint.get("versions_seen", {})
    if not isinstance(seen, Mapping):
        raise ValidationError("checkpoint.versions_seen", "must be a dict of dicts of versions")
    for node, vs in seen.items():
        _versions(vs, f"checkpoint.versions_seen.{node}")
    if not isinstance(metadata, Mapping):
        raise ValidationError("metadata", f"must be a dict, not {type(metadata).__name__}")
    new = _versions(new_versions, "new_versions")
    try:
        md = get_serializable_checkpoint_metadata(config, cast(CheckpointMetadata, dict(metadata)))
    except (AttributeError, TypeError) as e:
        raise ValidationError("metadata", f"cannot be read as checkpoint metadata ({e})") from None
    rest = {k: v for k, v in checkpoint.items() if k != "channel_values"}
    fresh: dict[str, tuple[str, bytes]] = {}
    for ch in new:
        if ch in channel_values:
            fresh[ch] = dump(serde, channel_values[ch], f"checkpoint.channel_values.{ch}")
    run = md.get("run_id")
    payload: dict[str, Any] = {
        "thread_id": tid, "ns": ns, "checkpoint_id": cid, "parent_id": parent,
        "run_id": None if run is None else str(run), "checkpoint": dump_any(serde, rest, "checkpoint"),
        "metadata": dump_any(serde, md, "metadata"), "values": {},
        "key": checkpoint_key(tid, ns, cid), "head": head_key(tid, ns)}
    return Put(payload, tid, ns, parent, versions, new, fresh,
                {"configurable": {"thread_id": given, "checkpoint_ns": ns, "checkpoint_id": cid}})
