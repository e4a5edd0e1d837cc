"""Signed checkpoints of a store: issue them, keep them beside the log, check the log against them.

A checkpoint is a C2SP tlog-checkpoint note (origin = the key's name, the tree size, the base64
root) signed as a C2SP signed note. Every note a store issues is kept in its ``notes`` table;
the log must extend each of them forever, and ``check_notes`` (run by ``braidlog verify``) says
so. Before signing, ``issue`` checks the same, so a store never signs two inconsistent trees.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence

from .. import tree as merkle
from ..errors import IntegrityError, ValidationError
from ..store import FullStore
from . import verify as v
from .keys import SigningKey
from .prove import InclusionProof, check_tree_extends, inclusion_proof, root, store_arg

__all__ = ["sign_note", "issue", "check_notes", "open_note", "check_checkpoint", "Checkpoint",
           "tlog_proof", "tlog_proof_text", "TLOG_PROOF"]

Checkpoint = v.Checkpoint


def sign_note(text: str, key: SigningKey) -> str:
    """``text`` (ending in a newline) as a signed note: a blank line, then
    ``— NAME base64(key id || Ed25519 signature of text)``."""
    if not isinstance(text, str) or not text.endswith("\n"):
        raise ValidationError("text", "a note's text is a string ending with a newline")
    if not isinstance(key, SigningKey):
        raise ValidationError("key", f"must be a SigningKey, not {type(key).__name__}")
    signature = key.verifier().id + key.sign(text.encode())
    return f"{text}\n{v.EM_DASH} {key.name} {base64.b64encode(signature).decode()}\n"


def _kept(store: FullStore, *, last: bool = False) -> list[tuple[int, v.Checkpoint]]:
    out = []
    for size, note in store.notes(last=last):
        text = note.decode("utf-8", errors="replace")
        split = text.rfind("\n\n")
        try:
            cp = v.parse_checkpoint_text(text[:split + 1] if split >= 0 else "")
        except v.VerificationError as e:
            raise IntegrityError(f"the checkpoint kept for size {size} is damaged: {e}",
                                 seq=size) from None
        if cp.size != size:
            raise IntegrityError(f"the checkpoint kept under size {size} is for size {cp.size}",
                                 seq=size)
        out.append((size, cp))
    return out


def check_notes(store: FullStore, *, last: bool = False) -> list[v.Checkpoint]:
    """Every checkpoint the store issued (with ``last``, those of the largest size), each
    checked: the log still holds its records and their root is the one signed. IntegrityError
    names the first that does not hold."""
    store_arg(store)
    out = []
    for size, cp in _kept(store, last=last):
        check_tree_extends(store, size, cp.root, f"the checkpoint {cp.origin} at size {size}")
        out.append(cp)
    return out


def issue(store: FullStore, key: SigningKey, *, keep: bool = True, size: int | None = None) -> str:
    """A signed checkpoint note of the store's head (or of its first ``size`` records), kept in
    the store unless ``keep=False``.

    Refuses (IntegrityError) when the log no longer extends the last checkpoint it issued.
    That one suffices: each checkpoint was issued only over a tree that extended the one before,
    so the tree that extends the last extends them all (``check_notes`` checks every one, and
    ``verify`` that the tree's nodes are those of the records)."""
    store_arg(store)
    check_notes(store, last=True)
    head = store.head().seq
    if size is None:
        size = head
    elif isinstance(size, bool) or not isinstance(size, int) or not 0 <= size <= head:
        raise ValidationError("size", f"must be a tree size from 0 to the head ({head}), "
                              f"got {size!r}")
    text = v.Checkpoint(key.name, size, root(store, size)).text()
    note = sign_note(text, key)
    if keep:
        store.put_note(size, note.encode())
    return note


def open_note(note: bytes | str, key: v.VerifierKey | str) -> v.Checkpoint:
    """The checkpoint in a signed note once ``key``'s signature verifies (IntegrityError if not)."""
    if not isinstance(note, (bytes, str)) or not isinstance(key, (v.VerifierKey, str)):
        raise ValidationError("note", f"open_note takes a note (bytes or text) and a verifier key (a "
                              f"VerifierKey or its text), not {type(note).__name__} and {type(key).__name__}")
    try:
        return v.open_checkpoint(note, key)
    except v.VerificationError as e:
        raise IntegrityError(f"checkpoint refused: {e}") from None


def check_checkpoint(store: FullStore, checkpoint: v.Checkpoint,
                     pending: Sequence[bytes] = ()) -> bool:
    """Does the store, followed by the records ``pending`` (their committed forms, not yet
    written), have ``checkpoint``'s root at its size? True when checked; False when the store and
    ``pending`` do not reach that size yet; IntegrityError when the records contradict it.

    A replica calls it with the records of a batch before it commits them, so a batch that
    contradicts a signed checkpoint is never written. O(log n) reads plus one hash per pending
    record up to the checkpoint's size.
    """
    store_arg(store)
    head = store.head().seq
    size = checkpoint.size
    if size <= head:
        check_tree_extends(store, size, checkpoint.root, f"the checkpoint {checkpoint.origin} at "
                           f"size {size}")
        return True
    if size > head + len(pending):
        return False
    frontier = merkle.Frontier(head, store.tree_hashes(merkle.peaks(head)))
    for body in pending[:size - head]:
        frontier.push(merkle.leaf_hash(body))
    found = frontier.root()
    if found != checkpoint.root:
        raise IntegrityError(
            f"records {head + 1}..{size} contradict the checkpoint {checkpoint.origin} at size "
            f"{size}: they give root {found.hex()}, it signs {checkpoint.root.hex()}",
            seq=size, expected=checkpoint.root, found=found)
    return True


TLOG_PROOF = "c2sp.org/tlog-proof@v1"


def tlog_proof(store: FullStore, seq: int, key: SigningKey, size: int | None = None, *,
               extra: bytes | None = None) -> str:
    """Record ``seq`` as a C2SP tlog-proof (``c2sp.org/tlog-proof@v1``): the header, the
    optional ``extra`` line, ``index seq - 1``, the inclusion path (base64, one hash a line, the
    leaf's sibling first), a blank line, and a checkpoint signed for the tree of ``size`` records
    (default: the head; a checkpoint of the head is kept in the store as ``issue`` keeps it). The
    proof is about the record's committed form (``braidlog show SEQ --entry``)."""
    store_arg(store)
    proof = inclusion_proof(store, seq, size)
    return tlog_proof_text(proof, issue(store, key, size=proof.tree_size, keep=size is None), extra)


def tlog_proof_text(proof: InclusionProof, note: str, extra: bytes | None = None) -> str:
    """An inclusion proof as a C2SP tlog-proof with ``note``, the signed checkpoint of its
    tree (``issue``): several proofs against one checkpoint share its note."""
    lines = [TLOG_PROOF]
    if extra:
        lines.append(f"extra {base64.b64encode(extra).decode()}")
    lines.append(f"index {proof.seq - 1}")
    lines.extend(base64.b64encode(h).decode() for h in proof.path)
    return "\n".join(lines) + "\n\n" + note
