"""Embedding with the log's record of each space's embedder (braidlog.kind_schema, ``recorded_embedder``): writes that
embed declare it with a space's first vectors and refuse another one; a query by text finds the
recorded embedder, or refuses one that is not it, naming both.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import msgspec

from ..delta import GenericDelta, Vector
from ..errors import BraidlogError, ValidationError
from ..kind_schema import EmbedderDeclared, append_with_embedder, embedder_mismatch, recorded_embedder
from .embedder import Embedder, delta_text, documents, identity
from .specs import embedder as load_embedder

__all__ = ["append_embedded", "append_vectors", "embed_deltas", "embedder_for", "check_embedder"]


def embed_deltas(deltas: Iterable[GenericDelta], embedder: Embedder, space: str = "default"
                 ) -> tuple[list[GenericDelta], int]:
    """Each delta that has text and no vector, with ``embedder``'s vector in ``space`` (the texts
    embedded as documents, in one batch); and how many were embedded."""
    if isinstance(deltas, (GenericDelta, str, bytes)) or not isinstance(deltas, Iterable):
        raise ValidationError("deltas", f"must be a list of GenericDelta, not {type(deltas).__name__}")
    if not isinstance(space, str) or not space:
        raise ValidationError("space", f"must be a non-empty string, not {type(space).__name__}")
    out = list(deltas)
    bad = [i for i, d in enumerate(out) if not isinstance(d, GenericDelta)]
    if bad:
        raise ValidationError("deltas", f"must hold GenericDelta, not {type(out[bad[0]]).__name__}", index=bad[0])
    todo = [(i, text) for i, d in enumerate(out) if d.vector is None and (text := delta_text(d))]
    if todo:
        rows = documents(embedder, [t for _, t in todo])
        for (i, _), row in zip(todo, rows, strict=True):
            out[i] = msgspec.structs.replace(out[i], vector=Vector.of(row, space))
    return out, len(todo)


def check_embedder(source: Any, space: str, embedder: Embedder) -> EmbedderDeclared | None:
    """The space's recorded embedder; ValidationError naming both if ``embedder`` is not it."""
    recorded = recorded_embedder(source, space)
    if recorded is not None:
        why = _mismatch(recorded, embedder)
        if why is not None:
            raise ValidationError("embedder", why)
    return recorded


def _mismatch(recorded: EmbedderDeclared, embedder: Embedder) -> str | None:
    """Why ``embedder`` is not the space's ``recorded`` one, or None when it is."""
    ident = identity(embedder)
    return embedder_mismatch(recorded, ident.name, ident.dim, ident.digest)


def append_embedded(target: Any, deltas: Iterable[GenericDelta], embedder: Embedder | str | None = None, *,
                    space: str = "default", expected_version: int | Mapping[str, int] | None = None
                    ) -> list[int]:
    """Append ``deltas`` to ``target`` (a Braid or a store), each with text and no vector
    embedded by ``embedder`` (an embedder or a spec; None: the space's recorded embedder, else
    ``$BRAIDLOG_EMBEDDER``, else hashing) in ``space``; return their seqs.

    A space's first vectors come with its declaration, in the same batch; a space declared with
    another embedder refuses them (ValidationError naming both), and nothing is written."""
    if not isinstance(space, str) or not space:
        raise ValidationError("space", f"must be a non-empty string, not {space!r}")
    chosen = embedder_for(target, space, embedder)
    batch, _ = embed_deltas(deltas, chosen, space)
    return append_vectors(target, batch, chosen, space, expected_version)


def append_vectors(target: Any, batch: list[GenericDelta], chosen: Embedder, space: str,
            expected_version: int | Mapping[str, int] | None = None) -> list[int]:
    """Append ``batch`` (its vectors of ``space`` made by ``chosen``), with the space's
    declaration first if it has none; refused naming both if it has another."""
    if not any(d.vector is not None and d.vector.space == space for d in batch):
        return list(target.append_batch(batch, expected_version=expected_version))
    ident = identity(chosen)
    if isinstance(expected_version, int) and not isinstance(expected_version, bool):
        braids = {d.braid_id for d in batch}
        if len(braids) == 1:  # the declaration goes to its own braid: say which braid it is for
            expected_version = {braids.pop(): expected_version}
    return append_with_embedder(target, batch, space, ident.name, ident.dim, ident.digest, ident.spec,
                           expected_version=expected_version)


_UNREAD: Any = object()


def embedder_for(source: Any, space: str = "default", embedder: Embedder | str | None = None, *,
                 recorded: EmbedderDeclared | None = _UNREAD) -> Embedder:
    """The embedder to use with ``space`` of ``source``: ``embedder`` (an object or a spec),
    checked against the space's record; with None, the recorded embedder (loaded from its
    spec), else ``$BRAIDLOG_EMBEDDER``, else hashing. ValidationError naming both when the
    given one is not the recorded one, or naming the recorded one when it cannot be loaded.
    ``recorded``: the space's record when the caller has read it already."""
    if recorded is _UNREAD:
        recorded = recorded_embedder(source, space)
    elif recorded is not None and not isinstance(recorded, EmbedderDeclared):
        raise ValidationError("recorded", f"must be an EmbedderDeclared or None, not {type(recorded).__name__}")
    if embedder is not None:
        chosen = load_embedder(embedder)
        if recorded is not None:
            why = _mismatch(recorded, chosen)
            if why is not None:
                raise ValidationError("embedder", why)
        return chosen
    if recorded is None:
        return load_embedder(None)
    if not recorded.spec:
        raise ValidationError("embedder", f"space {space!r} holds vectors of {recorded}, an embedder "
                              "given as a Python object: pass it (embedder=...)")
    try:
        chosen = load_embedder(recorded.spec)
    except BraidlogError as e:
        raise ValidationError("embedder", f"space {space!r} holds vectors of {recorded}, whose spec "
                              f"{recorded.spec!r} does not load here ({e}); pass that embedder "
                              "(--embedder SPEC, embedder=...)") from None
    why = _mismatch(recorded, chosen)
    if why is not None:
        raise ValidationError("embedder", f"the recorded spec {recorded.spec!r} loads another model "
                              f"here: {why}")
    return chosen
