"""Witness cosignatures (C2SP tlog-cosignature) and witness policies (C2SP tlog-policy).

A witness (a replica with a key of its own) cosigns a checkpoint note only after checking that
the checkpoint is consistent with the last one it cosigned. The cosignature is a signed-note
signature line::

    — NAME base64(key id || u64be(time) || Ed25519 signature)

over ``cosignature/v1\\ntime <time>\\n`` followed by the checkpoint's note text; the key id is
SHA-256(NAME || 0x0A || 0x04 || public key)[:4]. A policy says which witnesses count and how
many of them a checkpoint needs (its quorum). docs/proofs.md gives both byte for byte.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import struct
import time as _time
from collections.abc import Sequence
from dataclasses import dataclass

from ..errors import IntegrityError, ValidationError
from . import verify as v
from .keys import SigningKey

__all__ = ["COSIGNATURE_V1", "WitnessKey", "witness_key", "parse_witness_key", "cosign",
           "cosign_message", "cosign_checked", "verify_cosignature", "Policy", "parse_policy", "check_policy",
           "note_parts", "add_signatures"]

COSIGNATURE_V1 = 0x04
_SIG_SIZE = 4 + 8 + 64


def _witness_id(name: str, public: bytes) -> bytes:
    return hashlib.sha256(name.encode() + b"\n" + bytes([COSIGNATURE_V1]) + public).digest()[:4]


@dataclass(frozen=True)
class WitnessKey:
    """A cosigner's verifier key: ``NAME+<key id, 8 hex>+base64(0x04 || public key)``."""

    name: str
    id: bytes
    public: bytes

    def __str__(self) -> str:
        data = base64.b64encode(bytes([COSIGNATURE_V1]) + self.public).decode()
        return f"{self.name}+{self.id.hex()}+{data}"


def witness_key(key: SigningKey) -> WitnessKey:
    """The cosignature/v1 verifier key of an Ed25519 signing key (``braidlog keygen``)."""
    public = key.verifier().public
    return WitnessKey(key.name, _witness_id(key.name, public), public)


def parse_witness_key(text: str, what: str = "witness key") -> WitnessKey:
    """``NAME+<key id>+base64(0x04 || public key)``; ValidationError naming what is wrong."""
    name, _, rest = text.strip().partition("+")
    hexid, _, data = rest.partition("+")
    try:
        v._check_name(name, f"the {what} name")
        raw = base64.b64decode(data, validate=True)
    except v.VerificationError as e:
        raise ValidationError(what, str(e)) from None
    except binascii.Error:
        raise ValidationError(what, f"the key of {name!r} is not base64") from None
    if len(raw) != 33 or raw[0] != COSIGNATURE_V1 or base64.b64encode(raw).decode() != data:
        raise ValidationError(what, f"{name!r} is not a cosignature/v1 key (canonical base64 of "
                              "0x04 and 32 bytes)")
    if len(hexid) != 8 or _witness_id(name, raw[1:]).hex() != hexid:
        raise ValidationError(what, f"{name!r}: its key id {hexid!r} does not match its key")
    return WitnessKey(name, bytes.fromhex(hexid), raw[1:])


def note_parts(note: bytes | str) -> tuple[str, list[str]]:
    """A signed note's text (ending in a newline) and its signature lines (without newlines)."""
    try:
        text = note.decode("utf-8") if isinstance(note, bytes) else note
    except UnicodeDecodeError as e:
        raise IntegrityError(f"the note is not UTF-8 (byte {e.start})") from None
    split = text.rfind("\n\n")
    if split < 0 or not text.endswith("\n"):
        raise IntegrityError("the note has no blank line before its signature lines, or does not "
                             "end with a newline")
    return text[:split + 1], text[split + 2:-1].split("\n")


def add_signatures(note: bytes | str, lines: Sequence[str]) -> str:
    """``note`` with the signature ``lines`` it lacks appended, in order."""
    body, sigs = note_parts(note)
    out = list(sigs)
    out.extend(line for line in lines if line not in out)
    return body + "\n" + "".join(line + "\n" for line in out)


def cosign_message(body: str, when: int) -> bytes:
    """The bytes a cosignature/v1 signs: the header, the time line, the checkpoint's text."""
    return f"cosignature/v1\ntime {when}\n".encode() + body.encode()


def cosign(note: bytes | str, key: SigningKey, *, log_key: v.VerifierKey | str,
           last: v.Checkpoint | None = None, proof: Sequence[bytes] = (),
           when: int | None = None) -> str:
    """The cosignature line (ending in a newline) of ``key`` for the checkpoint ``note``.

    The note must be signed by ``log_key``; when ``last`` (the checkpoint this witness cosigned
    before) is given, ``proof`` must be the RFC 9162 consistency proof from ``last`` to the
    note's tree: a checkpoint of another origin, of a smaller tree, or not consistent with
    ``last`` is refused (IntegrityError) and nothing is signed."""
    try:
        cp = v.open_checkpoint(note, log_key)
    except v.VerificationError as e:
        raise IntegrityError(f"not cosigned: {e}") from None
    return cosign_checked(note_parts(note)[0], cp, key, last=last, proof=proof, when=when)


def cosign_checked(body: str, cp: v.Checkpoint, key: SigningKey, *,
                   last: v.Checkpoint | None = None, proof: Sequence[bytes] = (),
                   when: int | None = None) -> str:
    """``cosign`` of a note whose log signature the caller has checked (``cp`` is its text)."""
    if last is not None:
        if last.origin != cp.origin:
            raise IntegrityError(f"not cosigned: the checkpoint is of log {cp.origin!r}, the last "
                                 f"one cosigned of {last.origin!r}")
        try:
            v.verify_consistency(last.size, cp.size, last.root, cp.root, list(proof))
        except v.VerificationError as e:
            raise IntegrityError(f"not cosigned: the checkpoint at size {cp.size} is not "
                                 f"consistent with the one cosigned at size {last.size}: {e}",
                                 seq=cp.size) from None
    when = int(_time.time()) if when is None else when
    if not 0 <= when < 1 << 63:
        raise ValidationError("when", f"must be a Unix time in seconds, got {when}")
    wk = witness_key(key)
    sig = wk.id + struct.pack(">Q", when) + key.sign(cosign_message(body, when))
    return f"{v.EM_DASH} {wk.name} {base64.b64encode(sig).decode()}\n"


def verify_cosignature(note: bytes | str, witness: WitnessKey | str) -> int:
    """The time of ``witness``'s cosignature on ``note`` once it verifies; IntegrityError naming
    what failed (no such line, altered, cut short)."""
    if isinstance(witness, str):
        witness = parse_witness_key(witness)
    body, lines = note_parts(note)
    label = f"{witness.name}+{witness.id.hex()}"
    for line in lines:
        dash, _, rest = line.partition(" ")
        name, _, data = rest.partition(" ")
        if dash != v.EM_DASH or name != witness.name:
            continue
        try:
            sig = base64.b64decode(data, validate=True)
        except binascii.Error:
            sig = b""
        if sig[:4] != witness.id:
            continue  # another key of the same name
        if len(sig) != _SIG_SIZE or base64.b64encode(sig).decode() != data:
            raise IntegrityError(f"the cosignature of {label} holds {len(sig)} bytes (a "
                                 f"cosignature/v1 holds {_SIG_SIZE}) or is not canonical base64: "
                                 "it was altered or cut short")
        (when,) = struct.unpack(">Q", sig[4:12])
        if not v._ed25519_verify(witness.public, sig[12:], cosign_message(body, when)):
            raise IntegrityError(f"the cosignature of {label} does not verify: the checkpoint or "
                                 "the cosignature was altered after it was signed")
        return int(when)
    raise IntegrityError(f"the note has no cosignature of {label}")


# -- policies (C2SP tlog-policy) ------------------------------------------------------------------

@dataclass(frozen=True)
class Policy:
    """Log keys, witnesses by name, groups (name -> (threshold, members)), the quorum."""

    logs: tuple[v.VerifierKey, ...]
    witnesses: dict[str, WitnessKey]
    groups: dict[str, tuple[int, tuple[str, ...]]]
    quorum: str | None


def parse_policy(text: str) -> Policy:
    """A tlog-policy: ``log <vkey> [url]``, ``witness <name> <vkey> [url]``,
    ``group <name> <all|any|K> <member>...``, ``quorum <name|none>``; ``#`` starts a comment.
    ValidationError naming the line and the rule."""
    logs: list[v.VerifierKey] = []
    witnesses: dict[str, WitnessKey] = {}
    groups: dict[str, tuple[int, tuple[str, ...]]] = {}
    quorum: list[str] = []

    def bad(n: int, why: str) -> ValidationError:
        return ValidationError("policy", f"line {n}: {why}")

    for n, raw in enumerate(text.split("\n"), 1):
        words = raw.split("#", 1)[0].split()
        if not words:
            continue
        kw, args = words[0], words[1:]
        if kw == "log" and len(args) in (1, 2):
            try:
                logs.append(v.parse_verifier_key(args[0]))
            except v.VerificationError as e:
                raise bad(n, f"log key: {e}") from None
        elif kw == "witness" and len(args) in (2, 3):
            if args[0] in witnesses or args[0] in groups:
                raise bad(n, f"the name {args[0]!r} is defined twice")
            try:
                witnesses[args[0]] = parse_witness_key(args[1])
            except ValidationError as e:
                raise bad(n, str(e)) from None
        elif kw == "group" and len(args) >= 3:
            name, k, members = args[0], args[1], tuple(args[2:])
            if name in witnesses or name in groups:
                raise bad(n, f"the name {name!r} is defined twice")
            unknown = [m for m in members if m not in witnesses and m not in groups]
            if unknown or len(set(members)) != len(members):
                raise bad(n, f"group {name!r}: members must be distinct witnesses or groups "
                          f"defined above ({', '.join(unknown) or 'a member is repeated'})")
            if k == "all":
                t = len(members)
            elif k == "any":
                t = 1
            elif k.isascii() and k.isdigit() and 1 <= int(k) <= len(members):
                t = int(k)
            else:
                raise bad(n, f"group {name!r}: the threshold must be all, any or 1 to "
                          f"{len(members)}, got {k!r}")
            groups[name] = (t, members)
        elif kw == "quorum" and len(args) == 1:
            if quorum:
                raise bad(n, "a policy has one quorum line")
            if args[0] != "none" and args[0] not in witnesses and args[0] not in groups:
                raise bad(n, f"quorum {args[0]!r} names no witness or group defined above")
            quorum.append(args[0])
        else:
            raise bad(n, f"{raw.strip()[:60]!r} is not 'log VKEY', 'witness NAME VKEY', "
                      "'group NAME all|any|K MEMBER...' or 'quorum NAME|none'")
    if not logs:
        raise ValidationError("policy", "names no log: add a 'log VKEY' line")
    if not quorum:
        raise ValidationError("policy", "has no quorum line ('quorum NAME' or 'quorum none')")
    return Policy(tuple(logs), witnesses, groups, None if quorum[0] == "none" else quorum[0])


@dataclass(frozen=True)
class PolicyResult:
    checkpoint: v.Checkpoint
    log: str
    cosigned: tuple[str, ...]  # witnesses whose cosignature verified


def check_policy(note: bytes | str, policy: Policy | str) -> PolicyResult:
    """The checkpoint of ``note`` once it is signed by a log of ``policy`` and cosigned by its
    quorum; IntegrityError naming each witness's failure when the quorum is not met."""
    if isinstance(policy, str):
        policy = parse_policy(policy)
    cp, log, why = None, "", []
    for key in policy.logs:
        try:
            cp, log = v.open_checkpoint(note, key), str(key)
            break
        except v.VerificationError as e:
            why.append(f"{key.name}: {e}")
    if cp is None:
        raise IntegrityError(f"checkpoint refused: not signed by a log of the policy ({'; '.join(why)})")
    status: dict[str, str | None] = {}
    for name, wk in policy.witnesses.items():
        try:
            verify_cosignature(note, wk)
            status[name] = None
        except IntegrityError as e:
            status[name] = str(e)

    def met(name: str) -> bool:
        if name in status:
            return status[name] is None
        t, members = policy.groups[name]
        return sum(met(m) for m in members) >= t

    cosigned = tuple(n for n, s in status.items() if s is None)
    if policy.quorum is not None and not met(policy.quorum):
        detail = "; ".join(f"{n}: {s}" for n, s in status.items() if s is not None)
        need = (f"group {policy.quorum!r} needs {policy.groups[policy.quorum][0]} of "
                f"{', '.join(policy.groups[policy.quorum][1])}" if policy.quorum in policy.groups
                else f"witness {policy.quorum!r} must cosign")
        raise IntegrityError(f"checkpoint of {cp.origin} at size {cp.size} lacks its quorum: "
                             f"{need}; cosigned by {', '.join(cosigned) or 'none'} ({detail})",
                             seq=cp.size)
    return PolicyResult(cp, log, cosigned)
