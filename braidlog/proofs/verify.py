"""Check braidlog's proofs and signed checkpoints without a store: one module to read and vendor.

It imports only the standard library and (for signatures) ``cryptography``; nothing of
braidlog. Copy this file into a project of your own and check a braidlog log from what its
operator hands you: a checkpoint note, the log's verifier key, a proof, and a record's
committed form (``braidlog show SEQ --entry``).

The formats (docs/proofs.md has the long form):

- **Tree.** RFC 6962 (RFC 9162 section 2.1) with SHA-256: ``leaf = SHA-256(0x00 || entry)``
  (``entry``: the record's committed form, a MessagePack map of its envelope and a salted
  commitment to its delta bytes; what ``braidlog export`` writes base64-encoded as ``entry``),
  ``node = SHA-256(0x01 || left || right)``, leaf index = seq - 1. ``read_entry`` decodes one.
- **Proofs.** Inclusion ``{"seq", "tree_size", "leaf_hash", "path", "root"}`` and consistency
  ``{"old_size", "new_size", "old_root", "new_root", "path"}``, hashes in lowercase hex, paths as
  RFC 9162 sections 2.1.3 and 2.1.4 define them, checked by the RFC's own algorithms.
- **Checkpoints.** C2SP tlog-checkpoint notes (``origin``, tree size, base64 root, optional
  extension lines), signed as C2SP signed notes with Ed25519: the signature line is
  ``— NAME base64(key id || signature)`` over the note text; the verifier key is
  ``NAME+<key id, 8 hex>+base64(0x01 || public key)`` and
  ``key id = SHA-256(NAME || 0x0A || 0x01 || public key)[:4]``.

Every failure raises ``VerificationError`` (a ``ValueError``) that says what did not hold.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

__all__ = [
    "VerificationError", "HASH_SIZE", "leaf_hash", "node_hash", "root_from_inclusion",
    "unpack", "read_entry", "check_commitment",
    "verify_inclusion", "verify_consistency", "VerifierKey", "parse_verifier_key", "key_id",
    "Checkpoint", "open_checkpoint", "parse_checkpoint_text", "check_inclusion_proof",
    "check_consistency_proof", "check_state_proof", "check_proof", "entries_from_export",
    "TlogProof", "parse_tlog_proof", "check_tlog_proof",
]

HASH_SIZE = 32
#: A record's body (as exports and state proofs carry it): its 8-byte high-water time, then the
#: delta's bytes, which the committed form's commitment covers (docs/format.md).
BODY_HW_SIZE = 8
ED25519 = 0x01
MAX_SIGNATURES = 100
MAX_NOTE_SIZE = 1 << 20
EM_DASH = "\u2014"


class VerificationError(ValueError):
    """A proof, a checkpoint note or a key that does not check out; the message says why."""


# -- the tree: RFC 6962 with SHA-256 ----------------------------------------------------------------

def leaf_hash(entry: bytes) -> bytes:
    """The leaf hash of a record's committed form: SHA-256(0x00 || entry)."""
    return hashlib.sha256(b"\x00" + bytes(entry)).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    """An interior node: SHA-256(0x01 || left || right)."""
    return hashlib.sha256(b"\x01" + left + right).digest()


# -- MessagePack, as far as records use it -----------------------------------------------------------

class Timestamp(int):
    """A MessagePack timestamp (extension -1) read by ``unpack``: nanoseconds since the epoch."""


def unpack(data: bytes) -> Any:
    """One MessagePack value that spans all of ``data`` (maps as dicts in their order, bin as
    bytes, the timestamp extension as Timestamp); VerificationError on anything else."""
    data = bytes(data)
    value, end = _unpack(data, 0, 0)
    if end != len(data):
        raise VerificationError(f"{len(data) - end} byte(s) follow the MessagePack value")
    return value


def _take(data: bytes, at: int, n: int) -> bytes:
    if at + n > len(data):
        raise VerificationError("the MessagePack value is cut short")
    return data[at:at + n]


def _unpack(data: bytes, at: int, depth: int) -> tuple[Any, int]:
    if depth > 64:
        raise VerificationError("the MessagePack value nests too deep")
    b = _take(data, at, 1)[0]
    at += 1
    if b <= 0x7F:
        return b, at
    if b >= 0xE0:
        return b - 0x100, at
    if 0xA0 <= b <= 0xBF:
        return _str(data, at, b & 0x1F)
    if 0x90 <= b <= 0x9F:
        return _array(data, at, b & 0x0F, depth)
    if 0x80 <= b <= 0x8F:
        return _map(data, at, b & 0x0F, depth)
    if b == 0xC0:
        return None, at
    if b in (0xC2, 0xC3):
        return b == 0xC3, at
    sizes = {0xCC: 1, 0xCD: 2, 0xCE: 4, 0xCF: 8, 0xD0: 1, 0xD1: 2, 0xD2: 4, 0xD3: 8}
    if b in sizes:
        n = sizes[b]
        return int.from_bytes(_take(data, at, n), "big", signed=b >= 0xD0), at + n
    if b in (0xCA, 0xCB):
        import struct
        n = 4 if b == 0xCA else 8
        return struct.unpack(">f" if n == 4 else ">d", _take(data, at, n))[0], at + n
    lengths = {0xD9: (1, "str"), 0xDA: (2, "str"), 0xDB: (4, "str"), 0xC4: (1, "bin"),
               0xC5: (2, "bin"), 0xC6: (4, "bin"), 0xDC: (2, "array"), 0xDD: (4, "array"),
               0xDE: (2, "map"), 0xDF: (4, "map")}
    if b in lengths:
        w, what = lengths[b]
        n, at = int.from_bytes(_take(data, at, w), "big"), at + w
        if what == "str":
            return _str(data, at, n)
        if what == "bin":
            return _take(data, at, n), at + n
        return (_array if what == "array" else _map)(data, at, n, depth)
    if b in (0xD6, 0xD7, 0xC7):  # the timestamp extension, type -1
        if b == 0xC7:
            n, at = _take(data, at, 1)[0], at + 1
        else:
            n = 4 if b == 0xD6 else 8
        kind, raw = _take(data, at, 1)[0], _take(data, at + 1, n)
        if kind != 0xFF or n not in (4, 8, 12):
            raise VerificationError(f"MessagePack extension type {kind} is not one records use")
        return _timestamp(raw), at + 1 + n
    raise VerificationError(f"MessagePack byte {b:#04x} is not one records use")


def _timestamp(raw: bytes) -> Timestamp:
    if len(raw) == 4:
        return Timestamp(int.from_bytes(raw, "big") * 10**9)
    if len(raw) == 8:
        v = int.from_bytes(raw, "big")
        return Timestamp((v & 0x3FFFFFFFF) * 10**9 + (v >> 34))
    nanos, secs = int.from_bytes(raw[:4], "big"), int.from_bytes(raw[4:], "big", signed=True)
    return Timestamp(secs * 10**9 + nanos)


def _str(data: bytes, at: int, n: int) -> tuple[str, int]:
    try:
        return _take(data, at, n).decode("utf-8"), at + n
    except UnicodeDecodeError:
        raise VerificationError("a MessagePack string is not UTF-8") from None


def _array(data: bytes, at: int, n: int, depth: int) -> tuple[list[Any], int]:
    out = []
    for _ in range(n):
        v, at = _unpack(data, at, depth + 1)
        out.append(v)
    return out, at


def _map(data: bytes, at: int, n: int, depth: int) -> tuple[dict[Any, Any], int]:
    out: dict[Any, Any] = {}
    for _ in range(n):
        k, at = _unpack(data, at, depth + 1)
        if not isinstance(k, str) or k in out:
            raise VerificationError(f"a MessagePack map key is {k!r}: keys are distinct strings")
        out[k], at = _unpack(data, at, depth + 1)
    return out, at


ENTRY_FIELDS = ("seq", "id", "braid_id", "kind", "ts", "provenance", "confidence", "refs", "tags",
                "commitment")


def read_entry(entry: bytes) -> dict[str, Any]:
    """A committed form decoded (docs/format.md#the-committed-form): a dict of its fields, in
    their order; VerificationError if the bytes are not one."""
    value = unpack(entry)
    if not isinstance(value, dict):
        raise VerificationError("a committed form is a MessagePack map")
    keys = list(value)
    if [k for k in ENTRY_FIELDS if k in value] != keys:
        raise VerificationError(f"the committed form's fields {keys} are not those of "
                                f"{ENTRY_FIELDS}, in that order")
    for k in ("seq", "id", "braid_id", "kind", "ts", "provenance", "confidence", "commitment"):
        if k not in value:
            raise VerificationError(f"the committed form has no {k!r}")
    commitment = value["commitment"]
    if not isinstance(commitment, bytes) or len(commitment) != HASH_SIZE:
        raise VerificationError("the committed form's commitment is not 32 bytes")
    return value


def check_commitment(entry: bytes, salt: bytes, data: bytes) -> None:
    """The committed form ``entry`` commits to delta bytes ``data`` with ``salt``:
    ``SHA-256(salt || data)`` is its commitment."""
    want = read_entry(entry)["commitment"]
    if hashlib.sha256(bytes(salt) + bytes(data)).digest() != want:
        raise VerificationError("the delta bytes and salt do not give the committed form's "
                                "commitment: the record's bytes or its salt were altered")


def _check_hash(value: Any, what: str) -> bytes:
    if not isinstance(value, (bytes, bytearray)) or len(value) != HASH_SIZE:
        raise VerificationError(f"{what} must be a {HASH_SIZE}-byte hash")
    return bytes(value)


def root_from_inclusion(index: int, size: int, leaf: bytes, path: list[bytes]) -> bytes:
    """The root that ``path`` proves ``leaf`` (at leaf ``index``) to be under, for a tree of
    ``size`` leaves: RFC 9162 section 2.1.3.2, steps 1 to 4."""
    if not 0 <= index < size:
        raise VerificationError(f"leaf index {index} is outside a tree of size {size}")
    fn, sn, r = index, size - 1, _check_hash(leaf, "the leaf hash")
    for n, p in enumerate(path):
        p = _check_hash(p, f"path[{n}]")
        if sn == 0:
            raise VerificationError(f"the inclusion path is too long: {len(path)} hashes")
        if fn & 1 or fn == sn:
            r = node_hash(p, r)
            if not fn & 1:
                while fn and not fn & 1:
                    fn >>= 1
                    sn >>= 1
        else:
            r = node_hash(r, p)
        fn >>= 1
        sn >>= 1
    if sn != 0:
        raise VerificationError(f"the inclusion path is too short: {len(path)} hashes")
    return r


def verify_inclusion(index: int, size: int, leaf: bytes, path: list[bytes], root: bytes) -> None:
    """RFC 9162 section 2.1.3.2: ``leaf`` is leaf ``index`` of the tree of ``size`` with ``root``."""
    computed = root_from_inclusion(index, size, leaf, path)
    if computed != _check_hash(root, "the root"):
        raise VerificationError(
            f"the inclusion proof of leaf {index} leads to root {computed.hex()}, not "
            f"{bytes(root).hex()}: the record or the proof differs from the log")


def verify_consistency(old_size: int, new_size: int, old_root: bytes, new_root: bytes,
                       path: list[bytes]) -> None:
    """RFC 9162 section 2.1.4.2: the tree of ``new_size`` with ``new_root`` extends the tree of
    ``old_size`` with ``old_root`` (both sizes equal: the path is empty and the roots equal)."""
    old_root, new_root = _check_hash(old_root, "the old root"), _check_hash(new_root, "the new root")
    path = [_check_hash(p, f"path[{n}]") for n, p in enumerate(path)]
    if not 0 <= old_size <= new_size:
        raise VerificationError(f"no consistency from size {old_size} to size {new_size}")
    if old_size == new_size or old_size == 0:
        if path:
            raise VerificationError(f"a consistency proof from size {old_size} to {new_size} "
                                    "must be empty")
        if old_size == new_size and old_root != new_root:
            raise VerificationError(f"two different roots for tree size {old_size}: "
                                    f"{old_root.hex()} and {new_root.hex()}")
        return
    if not path:
        raise VerificationError("the consistency path is empty")
    if old_size & (old_size - 1) == 0:  # a power of two: the old root is the first node
        path = [old_root, *path]
    fn, sn = old_size - 1, new_size - 1
    while fn & 1:
        fn >>= 1
        sn >>= 1
    fr = sr = path[0]
    for c in path[1:]:
        if sn == 0:
            raise VerificationError(f"the consistency path is too long: {len(path)} hashes")
        if fn & 1 or fn == sn:
            fr = node_hash(c, fr)
            sr = node_hash(c, sr)
            if not fn & 1:
                while fn and not fn & 1:
                    fn >>= 1
                    sn >>= 1
        else:
            sr = node_hash(sr, c)
        fn >>= 1
        sn >>= 1
    if sn != 0:
        raise VerificationError(f"the consistency path is too short: {len(path)} hashes")
    if fr != old_root:
        raise VerificationError(f"the consistency proof leads to old root {fr.hex()}, not "
                                f"{old_root.hex()}: the log rewrote its first {old_size} records")
    if sr != new_root:
        raise VerificationError(f"the consistency proof leads to new root {sr.hex()}, not "
                                f"{new_root.hex()}")


# -- keys and signed notes (C2SP signed-note, Ed25519) ----------------------------------------------

def key_id(name: str, public: bytes) -> bytes:
    """The 4-byte key id: SHA-256(name || 0x0A || 0x01 || public key)[:4]."""
    return hashlib.sha256(name.encode() + b"\n" + bytes([ED25519]) + public).digest()[:4]


def _check_name(name: str, what: str) -> None:
    if not name or any(c.isspace() or c == "+" for c in name) or not name.isprintable():
        raise VerificationError(f"{what} {name!r} must be non-empty, with no spaces and no '+'")


@dataclass(frozen=True)
class VerifierKey:
    """A signed-note verifier key: name, 4-byte key id, Ed25519 public key."""

    name: str
    id: bytes
    public: bytes

    def __str__(self) -> str:
        data = base64.b64encode(bytes([ED25519]) + self.public).decode()
        return f"{self.name}+{self.id.hex()}+{data}"


def parse_verifier_key(text: str) -> VerifierKey:
    """``NAME+<key id, 8 hex>+base64(0x01 || public key)``, as ``braidlog keygen`` prints it."""
    if not isinstance(text, str):
        raise VerificationError(f"a verifier key is a string, not {type(text).__name__}")
    text = text.strip()
    name, plus, rest = text.partition("+")
    hexid, plus2, data = rest.partition("+")
    if not plus or not plus2:
        raise VerificationError(f"a verifier key is NAME+KEYID+KEY, got {text[:80]!r}")
    _check_name(name, "the key name")
    if len(hexid) != 8 or any(c not in "0123456789abcdef" for c in hexid):
        raise VerificationError(f"the key id of verifier key {name!r} must be 8 lowercase hex digits")
    try:
        raw = base64.b64decode(data, validate=True)
    except binascii.Error:
        raise VerificationError(f"the key of verifier key {name!r} is not base64") from None
    if len(raw) != 33 or raw[0] != ED25519:
        raise VerificationError(f"verifier key {name!r} is not an Ed25519 key (0x01 and 32 bytes)")
    if base64.b64encode(raw).decode() != data:
        raise VerificationError(f"the key of verifier key {name!r} is not canonical base64")
    public = raw[1:]
    if key_id(name, public) != bytes.fromhex(hexid):
        raise VerificationError(f"verifier key {name!r}: its key id {hexid} does not match its key")
    return VerifierKey(name, bytes.fromhex(hexid), public)


def _ed25519_verify(public: bytes, signature: bytes, message: bytes) -> bool:
    try:
        from cryptography.exceptions import InvalidSignature
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
    except ImportError:  # pragma: no cover - the test extra installs it
        raise VerificationError("checking signatures needs the cryptography package: "
                                "pip install '.[proofs]' (or pip install cryptography)") from None
    try:
        Ed25519PublicKey.from_public_bytes(public).verify(signature, message)
    except InvalidSignature:
        return False
    except ValueError as e:  # a malformed public key
        raise VerificationError(f"the verifier key is not a valid Ed25519 key ({e})") from None
    return True


def _open_note(note: bytes | str, key: VerifierKey) -> str:
    """The text of a signed note once a signature of ``key`` over it has verified."""
    raw = note.encode() if isinstance(note, str) else bytes(note)
    if len(raw) > MAX_NOTE_SIZE:
        raise VerificationError(f"the note is {len(raw)} bytes, more than {MAX_NOTE_SIZE}")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise VerificationError(f"the note is not UTF-8 (byte {e.start})") from None
    bad = next((i for i, c in enumerate(text) if c < " " and c != "\n"), None)
    if bad is not None:
        raise VerificationError(f"the note has a control character at offset {bad}; notes allow "
                                "only newline")
    if not text.endswith("\n"):
        raise VerificationError("the note does not end with a newline: it was cut short")
    split = text.rfind("\n\n")
    if split < 0:
        raise VerificationError("the note has no blank line before its signatures")
    body, sigs = text[:split + 1], text[split + 2:]
    lines = sigs[:-1].split("\n") if sigs else []
    if not lines:
        raise VerificationError("the note has no signature line")
    if len(lines) > MAX_SIGNATURES:
        raise VerificationError(f"the note has {len(lines)} signatures, more than {MAX_SIGNATURES}")
    seen: list[str] = []
    verified = False
    for n, line in enumerate(lines, 1):
        dash, sp, rest = line.partition(" ")
        name, sp2, data = rest.partition(" ")
        if dash != EM_DASH or not sp or not sp2 or not name or " " in data:
            raise VerificationError(f"signature line {n} is malformed: it must be "
                                    f"'{EM_DASH} NAME BASE64'")
        try:
            sig = base64.b64decode(data, validate=True)
        except binascii.Error:
            raise VerificationError(f"signature line {n} ({name}) is not base64: it was altered "
                                    "or cut short") from None
        if base64.b64encode(sig).decode() != data:  # one encoding per signature: no spare bits
            raise VerificationError(f"signature line {n} ({name}) is not canonical base64: it was "
                                    "altered")
        if len(sig) < 5:
            raise VerificationError(f"signature line {n} ({name}) holds {len(sig)} bytes: it was "
                                    "cut short")
        seen.append(f"{name}+{sig[:4].hex()}")
        if name != key.name or sig[:4] != key.id:
            continue  # an unknown key: ignored, as signed notes require
        if len(sig) != 4 + 64:
            raise VerificationError(f"the signature of {name}+{key.id.hex()} holds {len(sig) - 4} "
                                    "bytes, an Ed25519 signature 64: it was cut short or altered")
        if not _ed25519_verify(key.public, sig[4:], body.encode()):
            raise VerificationError(f"the signature of {name}+{key.id.hex()} does not verify: "
                                    "the note was altered after it was signed")
        verified = True
    if not verified:
        raise VerificationError(f"the note has no signature of key {key.name}+{key.id.hex()} "
                                f"(it is signed by {', '.join(seen)})")
    return body


@dataclass(frozen=True)
class Checkpoint:
    """A C2SP tlog-checkpoint: the origin, the tree size, the root hash, any extension lines."""

    origin: str
    size: int
    root: bytes
    extensions: tuple[str, ...] = ()

    def text(self) -> str:
        """The note text that is signed: origin, size, base64 root, extensions, each + newline."""
        lines = [self.origin, str(self.size), base64.b64encode(self.root).decode(), *self.extensions]
        return "".join(line + "\n" for line in lines)


def parse_checkpoint_text(body: str) -> Checkpoint:
    """A checkpoint from its note text (origin, size, root, extension lines, each ending in \\n)."""
    lines = body[:-1].split("\n") if body.endswith("\n") else []
    if len(lines) < 3 or any(not line for line in lines):
        raise VerificationError("a checkpoint is at least three non-empty lines: origin, tree "
                                "size, root hash")
    origin, size_text, root_text, *ext = lines
    if not size_text.isascii() or not size_text.isdigit() or (size_text != "0"
                                                              and size_text[0] == "0"):
        raise VerificationError(f"the tree size {size_text!r} is not a decimal without leading "
                                "zeros")
    try:
        root = base64.b64decode(root_text, validate=True)
    except binascii.Error:
        raise VerificationError(f"the root hash {root_text!r} is not base64") from None
    if len(root) != HASH_SIZE or base64.b64encode(root).decode() != root_text:
        raise VerificationError(f"the root hash {root_text!r} is not the base64 of "
                                f"{HASH_SIZE} bytes")
    return Checkpoint(origin, int(size_text), root, tuple(ext))


def open_checkpoint(note: bytes | str, key: VerifierKey | str, *, origin: str | None = None
                    ) -> Checkpoint:
    """The checkpoint in a signed note, once ``key``'s signature over it verifies. Its origin
    must be ``origin`` (default: the key's name, as braidlog issues them)."""
    if isinstance(key, str):
        key = parse_verifier_key(key)
    cp = parse_checkpoint_text(_open_note(note, key))
    want = key.name if origin is None else origin
    if cp.origin != want:
        raise VerificationError(f"the checkpoint is of log {cp.origin!r}, not {want!r}")
    return cp


# -- the JSON proofs of `braidlog prove` against checkpoints ----------------------------------------

def _hex(value: Any, what: str) -> bytes:
    if not isinstance(value, str) or len(value) != 2 * HASH_SIZE or value.lower() != value:
        raise VerificationError(f"{what} must be {2 * HASH_SIZE} lowercase hex digits")
    try:
        return bytes.fromhex(value)
    except ValueError:
        raise VerificationError(f"{what} must be {2 * HASH_SIZE} lowercase hex digits") from None


def _int(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise VerificationError(f"{what} must be a non-negative integer")
    return value


def _path(proof: dict[str, Any]) -> list[bytes]:
    path = proof.get("path")
    if not isinstance(path, list):
        raise VerificationError("path must be a list of hashes")
    return [_hex(p, f"path[{n}]") for n, p in enumerate(path)]


_BEFORE_4 = ("; a checkpoint signed before the log was upgraded to braidlog's format 4 signs "
             "the root of its earlier BLAKE3 tree, which no proof matches now: ask for one "
             "signed after the upgrade")


def check_inclusion_proof(proof: dict[str, Any], checkpoint: Checkpoint,
                          body: bytes | None = None) -> None:
    """An inclusion proof of ``braidlog prove inclusion --json`` holds against ``checkpoint``
    (same tree size and root), and, given the record's committed form ``body``, its leaf hash
    is theirs."""
    if not isinstance(proof, dict):
        raise VerificationError("an inclusion proof is a JSON object")
    seq, size = _int(proof.get("seq"), "seq"), _int(proof.get("tree_size"), "tree_size")
    leaf, root = _hex(proof.get("leaf_hash"), "leaf_hash"), _hex(proof.get("root"), "root")
    if size != checkpoint.size:
        raise VerificationError(f"the proof is for tree size {size}, the checkpoint for "
                                f"{checkpoint.size}")
    if root != checkpoint.root:
        raise VerificationError(f"the proof's root {root.hex()} is not the checkpoint's "
                                f"{checkpoint.root.hex()}{_BEFORE_4}")
    if body is not None and leaf_hash(body) != leaf:
        raise VerificationError(f"the record's committed form hashes to leaf "
                                f"{leaf_hash(body).hex()}, not the proof's {leaf.hex()}: the "
                                "record was altered")
    if seq < 1:
        raise VerificationError("seq must be 1 or more")
    verify_inclusion(seq - 1, size, leaf, _path(proof), checkpoint.root)


def check_consistency_proof(proof: dict[str, Any], old: Checkpoint | None,
                            new: Checkpoint | None) -> None:
    """A consistency proof of ``braidlog prove consistency --json`` holds, and its roots are
    those of the checkpoints given (at least one: the one you trust and the one to check)."""
    if not isinstance(proof, dict):
        raise VerificationError("a consistency proof is a JSON object")
    if old is None and new is None:
        raise VerificationError("give at least one checkpoint to check a consistency proof against")
    old_size, new_size = _int(proof.get("old_size"), "old_size"), _int(proof.get("new_size"), "new_size")
    old_root = _hex(proof.get("old_root"), "old_root")
    new_root = _hex(proof.get("new_root"), "new_root")
    for cp, size, root, which in ((old, old_size, old_root, "old"), (new, new_size, new_root, "new")):
        if cp is None:
            continue
        if cp.size != size or cp.root != root:
            raise VerificationError(
                f"the proof's {which} tree ({size}, {root.hex()}) is not the checkpoint's "
                f"({cp.size}, {cp.root.hex()})" + (_BEFORE_4 if cp.size == size else ""))
    verify_consistency(old_size, new_size, old_root, new_root, _path(proof))


def _body(value: Any, what: str) -> bytes:
    if not isinstance(value, str):
        raise VerificationError(f"{what} must be base64 text")
    try:
        return base64.b64decode(value, validate=True)
    except binascii.Error:
        raise VerificationError(f"{what} is not base64") from None


def check_state_proof(proof: dict[str, Any], checkpoints: list[Checkpoint]) -> int:
    """A proof of ``braidlog prove state --json``: every record it lists is, byte for byte, the
    record at its seq (all at or before ``at``) in the tree of a checkpoint given; with a
    consistency proof when that tree is larger than ``at``. Returns the number of records.

    It does not prove that the list is complete (docs/proofs.md says why and what does)."""
    if not isinstance(proof, dict) or not isinstance(proof.get("records"), list):
        raise VerificationError("a state proof is a JSON object with a list of records")
    at, size = _int(proof.get("at"), "at"), _int(proof.get("tree_size"), "tree_size")
    root = _hex(proof.get("root"), "root")
    cp = next((c for c in checkpoints if c.size == size), None)
    if cp is None:
        raise VerificationError(f"the state proof is against tree size {size}; give the checkpoint "
                                "of that size")
    if cp.root != root:
        raise VerificationError(f"the state proof's root {root.hex()} is not the checkpoint's "
                                f"{cp.root.hex()}")
    if at > size:
        raise VerificationError(f"the state at seq {at} cannot be proved in a tree of size {size}")
    if size > at:
        cons = proof.get("consistency")
        if not isinstance(cons, dict):
            raise VerificationError(f"a state at seq {at} proved in a tree of size {size} needs "
                                    "a consistency proof from size at")
        if _int(cons.get("old_size"), "consistency.old_size") != at:
            raise VerificationError("the consistency proof does not start at the state's seq")
        old = next((c for c in checkpoints if c.size == at), None)
        check_consistency_proof(cons, old, cp)
    last = 0
    for n, rec in enumerate(proof["records"]):
        if not isinstance(rec, dict):
            raise VerificationError(f"records[{n}] must be an object")
        seq = _int(rec.get("seq"), f"records[{n}].seq")
        if not last < seq <= at:
            raise VerificationError(f"records[{n}] has seq {seq}: seqs must increase and be at "
                                    f"most {at}")
        last = seq
        entry = _body(rec.get("entry"), f"records[{n}].entry")
        body = _body(rec.get("body"), f"records[{n}].body")
        salt = _body(rec.get("salt"), f"records[{n}].salt")
        path = rec.get("path")
        if not isinstance(path, list):
            raise VerificationError(f"records[{n}].path must be a list of hashes")
        try:
            verify_inclusion(seq - 1, size, leaf_hash(entry),
                             [_hex(h, f"records[{n}].path[{i}]") for i, h in enumerate(path)], root)
            if read_entry(entry)["seq"] != seq:
                raise VerificationError("its committed form names another seq")
            check_commitment(entry, salt, body[BODY_HW_SIZE:])
        except VerificationError as e:
            raise VerificationError(f"records[{n}] (seq {seq}): {e}") from None
    return len(proof["records"])


def export_records(lines: Iterable[str]) -> Iterator[tuple[int, int, dict[str, Any]]]:
    """(line number, seq, object) of every record line of a ``braidlog export`` (JSON Lines);
    its header and trailer lines are passed over."""
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except ValueError:
            raise VerificationError(f"export line {n} is not JSON") from None
        if isinstance(obj, dict) and "body" in obj and "seq" in obj:
            yield n, _int(obj["seq"], f"export line {n}: seq"), obj


def entries_from_export(lines: Iterable[str]) -> dict[int, bytes]:
    """The committed form of every record of a ``braidlog export`` (JSON Lines), by seq."""
    return {seq: _body(obj["entry"], f"export line {n}: entry")
            for n, seq, obj in export_records(lines) if "entry" in obj}


def check_proof(proof: dict[str, Any], checkpoints: list[Checkpoint],
                bodies: dict[int, bytes] | None = None) -> dict[str, Any]:
    """Check any proof ``braidlog prove`` prints against opened checkpoints (and, for an inclusion
    proof, the record's committed form from ``bodies`` if given); what was proved, as a dict."""
    if not isinstance(proof, dict):
        raise VerificationError("a proof is a JSON object")
    if "leaf_hash" in proof:
        size = proof.get("tree_size")
        cp = next((c for c in checkpoints if c.size == size), None)
        if cp is None:
            raise VerificationError(f"the proof is for tree size {size!r}; the checkpoints given "
                                    f"are for {sorted(c.size for c in checkpoints)}")
        body = None
        if bodies is not None:
            seq = _int(proof.get("seq"), "seq")
            body = bodies.get(seq)
            if body is None:
                raise VerificationError(f"the export has no record at seq {seq}")
        check_inclusion_proof(proof, cp, body)
        what = "and its bytes are the export's" if body is not None else ""
        return {"kind": "inclusion", "seq": proof["seq"], "tree_size": size,
                "proved": f"record {proof['seq']} is in the log {cp.origin} at size {size} "
                          f"{what}".rstrip()}
    if "old_size" in proof:
        old = next((c for c in checkpoints if c.size == proof.get("old_size")), None)
        new = next((c for c in checkpoints if c.size == proof.get("new_size")), None)
        check_consistency_proof(proof, old, new)
        log = (new or old).origin  # type: ignore[union-attr]  # check_consistency_proof found one
        return {"kind": "consistency", "old_size": proof["old_size"], "new_size": proof["new_size"],
                "proved": f"the log {log} at size {proof['new_size']} extends its first "
                          f"{proof['old_size']} records"}
    if "records" in proof:
        n = check_state_proof(proof, checkpoints)
        return {"kind": "state", "at": proof["at"], "records": n,
                "proved": f"the {n} record(s) listed for {proof.get('entity')!r} are the log's, at "
                          f"seqs up to {proof['at']} (not that no other record about it exists)"}
    raise VerificationError("not a braidlog proof: no leaf_hash, old_size or records")


# -- C2SP tlog-proof (c2sp.org/tlog-proof@v1) --------------------------------------------------------

TLOG_PROOF = "c2sp.org/tlog-proof@v1"


@dataclass(frozen=True)
class TlogProof:
    """A parsed tlog-proof: extra data (unauthenticated), leaf index, inclusion path, the note."""

    extra: bytes | None
    index: int
    path: tuple[bytes, ...]
    note: str


def parse_tlog_proof(text: bytes | str) -> TlogProof:
    """A ``c2sp.org/tlog-proof@v1`` file parsed (nothing checked but its shape)."""
    raw = text.encode() if isinstance(text, str) else bytes(text)
    if len(raw) > MAX_NOTE_SIZE + 64 * 100:
        raise VerificationError(f"the tlog-proof is {len(raw)} bytes: too large to be one")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise VerificationError(f"the tlog-proof is not UTF-8 (byte {e.start})") from None
    head, sep, note = text.partition("\n\n")
    if not sep:
        raise VerificationError("the tlog-proof has no blank line between its proof and its "
                                "checkpoint")
    lines = head.split("\n")
    if lines[0] != TLOG_PROOF:
        raise VerificationError(f"the tlog-proof's first line is {lines[0][:60]!r}, not "
                                f"{TLOG_PROOF!r}")
    at, extra = 1, None
    if len(lines) > at and lines[at].startswith("extra "):
        extra = _b64(lines[at][6:], "the extra line")
        at += 1
    if len(lines) <= at or not lines[at].startswith("index "):
        raise VerificationError("the tlog-proof has no 'index N' line after its header")
    digits = lines[at][6:]
    if not digits.isascii() or not digits.isdigit() or (digits != "0" and digits[0] == "0"):
        raise VerificationError(f"the tlog-proof's index {digits[:30]!r} is not a decimal without "
                                "leading zeros")
    path = []
    for n, line in enumerate(lines[at + 1:], 1):
        h = _b64(line, f"inclusion proof line {n}")
        if len(h) != HASH_SIZE:
            raise VerificationError(f"inclusion proof line {n} holds {len(h)} bytes, not a "
                                    f"{HASH_SIZE}-byte SHA-256 hash")
        path.append(h)
    if len(path) > 64:
        raise VerificationError(f"the inclusion proof has {len(path)} hashes: more than any tree "
                                "has levels")
    return TlogProof(extra, int(digits), tuple(path), note)


def _b64(text: str, what: str) -> bytes:
    try:
        data = base64.b64decode(text, validate=True)
    except binascii.Error:
        raise VerificationError(f"{what} is not base64: it was altered") from None
    if base64.b64encode(data).decode() != text:
        raise VerificationError(f"{what} is not canonical base64: it was altered")
    return data


def check_tlog_proof(text: bytes | str, key: VerifierKey | str, entry: bytes, *,
                     origin: str | None = None) -> tuple[TlogProof, Checkpoint]:
    """A tlog-proof holds for ``entry`` (the record's committed form): its checkpoint is signed
    by ``key`` for ``origin`` (default: the key's name), and its inclusion path leads from
    ``SHA-256(0x00 || entry)`` at its index to the checkpoint's root. For a braidlog entry, the
    seq it names must be the index + 1."""
    proof = parse_tlog_proof(text)
    try:
        cp = open_checkpoint(proof.note, key, origin=origin)
    except VerificationError as e:
        raise VerificationError(f"the tlog-proof's checkpoint: {e}") from None
    if proof.index >= cp.size:
        raise VerificationError(f"the tlog-proof is for index {proof.index}, outside the "
                                f"checkpoint's tree of {cp.size} entries")
    try:
        verify_inclusion(proof.index, cp.size, leaf_hash(entry), list(proof.path), cp.root)
    except VerificationError as e:
        raise VerificationError(f"the entry is not entry {proof.index} of the checkpoint's tree: "
                                f"{e}") from None
    try:
        seq = read_entry(entry)["seq"]
    except VerificationError:
        seq = None
    if seq is not None and seq != proof.index + 1:
        raise VerificationError(f"the entry names seq {seq}, the proof index {proof.index} "
                                f"(seq {proof.index + 1})")
    return proof, cp
