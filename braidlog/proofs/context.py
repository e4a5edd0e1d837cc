"""A context receipt's export checked offline: no store, only this module, ``verify.py`` and
``exported.py`` (stdlib, and ``cryptography`` for the signature). Vendor the three files to
check what a braidlog operator hands you.

An export (``braidlog context export``, written by ``context_export.py``) is one JSON object:

- ``format``: ``braidlog-context-export/1``; ``origin``: the log's name (its key's);
- ``checkpoint``: a C2SP checkpoint note signed by the log's key;
- ``receipt``: the receipt's ``seq`` and ``delta_id``, its committed form ``entry`` (base64),
  its ``tlog_proof`` (a ``c2sp.org/tlog-proof@v1`` file against that checkpoint), its ``data``
  (the delta's bytes, which the committed form's commitment covers) and ``salt`` (base64), and
  its ``delta`` as JSON for people (checked against the bytes);
- ``items``: one per item of the receipt, in its order: ``seq``, ``delta_id``, ``role``,
  ``rank``, ``score``, the record's ``entry`` and ``tlog_proof`` against the same checkpoint;
  with ``disclosed``, its ``data``, ``salt`` and readable ``delta`` too; when the record was
  erased before the export, only its commitment travels, and ``erased`` holds the ``erased``
  record that says so (``seq``, ``delta_id``, ``entry``, ``tlog_proof``, ``data``, ``salt``,
  ``delta``: its payload names the item's seq).

``check_context_export`` checks the checkpoint's signature, every inclusion proof, the receipt's
and each disclosed item's bytes against their commitments, that the items listed are the
receipt's own, and the context bytes against the recorded digest when given. Any change to the
file is refused with a ``VerificationError`` naming what failed.
"""

from __future__ import annotations

import base64
import hashlib
import json
from typing import Any

from .exported import _first_difference
from .verify import (
    VerificationError,
    VerifierKey,
    check_commitment,
    check_tlog_proof,
    open_checkpoint,
    parse_verifier_key,
    read_entry,
    unpack,
)

__all__ = ["FORMAT", "check_context_export"]

FORMAT = "braidlog-context-export/1"
CONTEXT_USED = "context_used"
_ITEM_FIELDS = ("seq", "delta_id", "role", "rank", "score")
_PROVED = {"seq", "delta_id", "entry", "tlog_proof"}
_BYTES = {"data", "salt", "delta"}
_TOP = {"format", "origin", "disclosed", "checkpoint", "receipt", "items"}


def _keys(obj: dict[str, Any], allowed: set[str], what: str) -> None:
    unknown = sorted(set(obj) - allowed)
    if unknown:
        raise VerificationError(f"{what} has field(s) {unknown} no export writes: it was edited")


def _b64(value: Any, what: str) -> bytes:
    if not isinstance(value, str):
        raise VerificationError(f"{what} must be base64 text")
    try:
        data = base64.b64decode(value, validate=True)
    except ValueError:
        raise VerificationError(f"{what} is not base64: it was altered") from None
    if base64.b64encode(data).decode() != value:
        raise VerificationError(f"{what} is not canonical base64: it was altered")
    return data


def _record(obj: Any, what: str, key: VerifierKey, note: str, size: int) -> tuple[bytes, dict[str, Any]]:
    """A record of the export (the receipt or an item): its committed form, proved in the tree
    of the export's checkpoint by its own tlog-proof; (entry, the entry decoded)."""
    if not isinstance(obj, dict):
        raise VerificationError(f"{what} must be an object")
    entry = _b64(obj.get("entry"), f"{what}.entry")
    text = obj.get("tlog_proof")
    if not isinstance(text, str):
        raise VerificationError(f"{what}.tlog_proof must be the text of a tlog-proof")
    try:
        proof, cp = check_tlog_proof(text, key, entry)
    except VerificationError as e:
        raise VerificationError(f"{what}: {e}") from None
    if proof.note != note or cp.size != size:
        raise VerificationError(f"{what}: its tlog-proof is against another checkpoint than the "
                                "export's")
    fields = read_entry(entry)
    seq, did = obj.get("seq"), obj.get("delta_id")
    if fields["seq"] != seq or fields["id"] != did:
        raise VerificationError(f"{what} names seq {seq!r} and delta {did!r}; its committed form "
                                f"is seq {fields['seq']}, delta {fields['id']}")
    return entry, fields


def _disclosed(obj: dict[str, Any], entry: bytes, what: str) -> dict[str, Any]:
    """A record's disclosed bytes checked against its commitment; the delta they decode to."""
    missing = sorted(_BYTES - set(obj))
    if missing:
        raise VerificationError(f"{what} lacks {missing}: a record's bytes travel with their salt "
                                "and readable delta")
    data = _b64(obj.get("data"), f"{what}.data")
    salt = _b64(obj.get("salt"), f"{what}.salt")
    try:
        check_commitment(entry, salt, data)
        delta = unpack(data)
    except VerificationError as e:
        raise VerificationError(f"{what}: {e}") from None
    if not isinstance(delta, dict) or delta.get("id") != obj.get("delta_id"):
        raise VerificationError(f"{what}: its bytes are not the delta {obj.get('delta_id')!r}")
    diff = _first_difference(obj["delta"], delta, "")
    if diff is not None:
        path, shown, held = diff
        raise VerificationError(f"{what}: the readable delta's {path or 'delta'} is {shown}, "
                                f"its bytes say {held}: the export was edited")
    return delta


def _erasure(obj: Any, seq: int, what: str, key: VerifierKey, note: str, size: int) -> int:
    """The ``erased`` record an erased item carries: proved, disclosed, of kind ``erased``, its
    payload naming ``seq``; the erasure's seq."""
    where = f"{what}.erased"
    if not isinstance(obj, dict):
        raise VerificationError(f"{where} must be the erasure's record")
    _keys(obj, _PROVED | _BYTES, where)
    entry, fields = _record(obj, where, key, note, size)
    erasure = _disclosed(obj, entry, where)
    seqs = erasure.get("payload", {}).get("seqs") if isinstance(erasure.get("payload"), dict) else None
    if fields["kind"] != "erased" or not isinstance(seqs, list) or seq not in seqs:
        raise VerificationError(f"{where} is not an erasure of seq {seq}")
    return fields["seq"]


def check_context_export(export: bytes | str | dict[str, Any], key: VerifierKey | str, *,
                         context_bytes: bytes | None = None) -> dict[str, Any]:
    """Check a context export offline against the log's verifier key (and the exact context
    bytes given to the model, when you have them); what it proves, as a dict. VerificationError
    names the first thing that does not hold."""
    if isinstance(key, str):
        key = parse_verifier_key(key)
    if isinstance(export, (bytes, str)):
        try:
            export = json.loads(export)
        except ValueError:
            raise VerificationError("the context export is not JSON") from None
    if not isinstance(export, dict) or export.get("format") != FORMAT:
        raise VerificationError(f"not a context export: its format is not {FORMAT!r}")
    _keys(export, _TOP, "the export")
    if not isinstance(export.get("disclosed"), bool):
        raise VerificationError("the export's disclosed must be true or false")
    note = export.get("checkpoint")
    if not isinstance(note, str):
        raise VerificationError("the export has no checkpoint note")
    try:
        cp = open_checkpoint(note, key)
    except VerificationError as e:
        raise VerificationError(f"the export's checkpoint: {e}") from None
    if export.get("origin") != cp.origin:
        raise VerificationError(f"the export says origin {export.get('origin')!r}, its checkpoint "
                                f"{cp.origin!r}")
    r = export.get("receipt")
    if isinstance(r, dict):
        _keys(r, _PROVED | _BYTES, "receipt")
    entry, fields = _record(r, "receipt", key, note, cp.size)
    if fields["kind"] != CONTEXT_USED:
        raise VerificationError(f"the receipt's committed form is of kind {fields['kind']!r}, not "
                                f"{CONTEXT_USED!r}")
    delta = _disclosed(r, entry, "receipt")  # type: ignore[arg-type]  # _record refused a receipt that is no dict
    payload = delta.get("payload")
    if not isinstance(payload, dict) or not isinstance(payload.get("items"), list):
        raise VerificationError("the receipt's payload is not a context receipt")
    listed = export.get("items")
    if not isinstance(listed, list) or len(listed) != len(payload["items"]):
        raise VerificationError(f"the export lists {len(listed) if isinstance(listed, list) else 'no'} "
                                f"item(s); the receipt has {len(payload['items'])}")
    items = []
    for n, (want, obj) in enumerate(zip(payload["items"], listed, strict=True)):
        what = f"items[{n}]"
        if not isinstance(want, dict):
            raise VerificationError(f"the receipt's {what} is not an object")
        want = {"role": "retrieved", "score": None, **want}
        if not isinstance(obj, dict) or any(obj.get(f) != want.get(f) for f in _ITEM_FIELDS):
            raise VerificationError(f"{what} is not the receipt's {what} (seq {want.get('seq')}, "
                                    f"delta {want.get('delta_id')}): the export was edited")
        _keys(obj, set(_ITEM_FIELDS) | _PROVED | ({"erased"} if "erased" in obj else _BYTES), what)
        item_entry, _ = _record(obj, what, key, note, cp.size)
        shown = {f: want[f] for f in _ITEM_FIELDS} | {"leaf_index": want["seq"] - 1}
        if "erased" in obj:
            shown["erased"] = _erasure(obj["erased"], want["seq"], what, key, note, cp.size)
        elif export["disclosed"]:
            item = _disclosed(obj, item_entry, what)
            shown["disclosed"] = True
            shown["kind"], shown["payload"] = item.get("kind"), item.get("payload")
        elif set(obj) & _BYTES:
            raise VerificationError(f"{what} carries bytes in an export that discloses none")
        items.append(shown)
    result: dict[str, Any] = {
        "origin": cp.origin, "tree_size": cp.size, "receipt_seq": r["seq"],  # type: ignore[index]  # _record refused a receipt that is no dict
        "receipt_id": r["delta_id"], "run": payload.get("run"),  # type: ignore[index]  # _record refused a receipt that is no dict
        "turn": payload.get("turn"), "model": payload.get("model"),
        "request": payload.get("request"), "items": items, "context_checked": False}
    if context_bytes is not None:
        digest, size = payload.get("context_sha256"), payload.get("context_size")
        if digest is None:
            raise VerificationError("the receipt records no digest of the context bytes")
        found = hashlib.sha256(bytes(context_bytes)).hexdigest()
        if found != digest or len(context_bytes) != size:
            raise VerificationError(f"the context bytes given ({len(context_bytes)} bytes, SHA-256 "
                                    f"{found}) are not those the receipt records ({size} bytes, "
                                    f"{digest})")
        result["context_checked"] = True
    return result
