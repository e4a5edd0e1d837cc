"""Ed25519 signing keys in C2SP signed-note form, kept in files only their owner can read.

A key file holds one line, the form Go's golang.org/x/mod/sumdb/note uses for signer keys:
``PRIVATE+KEY+NAME+<key id, 8 hex>+base64(0x01 || 32-byte Ed25519 seed)``. Its verifier key,
``NAME+<key id>+base64(0x01 || public key)``, is what you publish. Signing needs the
``cryptography`` package (``pip install '.[proofs]'``).
"""

from __future__ import annotations

import base64
import binascii
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import BraidlogError, ValidationError
from .verify import ED25519, VerificationError, VerifierKey, _check_name, key_id
from .verify import parse_verifier_key as _parse_verifier_key

__all__ = ["SigningKey", "generate", "write_key", "read_key", "parse_verifier_key"]

PREFIX = "PRIVATE+KEY+"


def _ed25519() -> Any:
    try:
        from cryptography.hazmat.primitives.asymmetric import ed25519
    except ImportError:
        raise BraidlogError("signing checkpoints needs the cryptography package: "
                            "pip install '.[proofs]'") from None
    return ed25519


@dataclass(frozen=True, repr=False)
class SigningKey:
    """An Ed25519 signing key with its signed-note name. ``repr`` never shows the secret."""

    name: str
    seed: bytes

    def __repr__(self) -> str:
        return f"SigningKey({self.name!r}, id={self.verifier().id.hex()})"

    def _private(self) -> Any:
        return _ed25519().Ed25519PrivateKey.from_private_bytes(self.seed)

    def verifier(self) -> VerifierKey:
        """The verifier key to publish: ``NAME+<key id>+base64(0x01 || public key)``."""
        private = self._private()  # first: it says how to install cryptography if it is missing
        from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

        public = private.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
        return VerifierKey(self.name, key_id(self.name, public), public)

    def sign(self, message: bytes) -> bytes:
        """The Ed25519 signature (RFC 8032) of ``message``."""
        if not isinstance(message, (bytes, bytearray)):
            raise ValidationError("message", f"must be bytes, not {type(message).__name__}")
        return self._private().sign(bytes(message))

    def encode(self) -> str:
        """The key file's line."""
        data = base64.b64encode(bytes([ED25519]) + self.seed).decode()
        return f"{PREFIX}{self.name}+{self.verifier().id.hex()}+{data}"


def parse_verifier_key(text: str) -> VerifierKey:
    """``NAME+<key id, 8 hex>+base64(0x01 || public key)``, as ``braidlog keygen`` prints it;
    ValidationError naming ``text`` when it is not one (``verify.parse_verifier_key``, the
    vendorable checker's, raises its own VerificationError)."""
    try:
        return _parse_verifier_key(text)
    except VerificationError as e:
        raise ValidationError("text", str(e)) from None


def _name(name: str) -> str:
    try:
        _check_name(name, "the key name")
    except VerificationError as e:
        raise ValidationError("name", str(e)) from None
    return name


def _path_arg(path: object) -> str | os.PathLike[str]:
    if not isinstance(path, (str, os.PathLike)) or not os.fspath(path) or "\x00" in os.fspath(path):
        raise ValidationError("path", f"must be a file path, not {path!r}"[:120])
    return path


def generate(name: str) -> SigningKey:
    """A new random Ed25519 key named ``name`` (non-empty, no spaces, no '+'; a schema-less URL
    such as ``example.com/agent-log`` avoids collisions)."""
    if not isinstance(name, str):
        raise ValidationError("name", f"must be a string, not {type(name).__name__}")
    ed25519 = _ed25519()  # first: it says how to install cryptography if it is missing
    from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat

    private = ed25519.Ed25519PrivateKey.generate()
    seed = private.private_bytes(Encoding.Raw, PrivateFormat.Raw, NoEncryption())
    return SigningKey(_name(name), seed)


def write_key(key: SigningKey, path: str | os.PathLike[str]) -> None:
    """Write ``key`` to a new file of mode 0600; an existing file is never overwritten."""
    if not isinstance(key, SigningKey):
        raise ValidationError("key", f"must be a SigningKey, not {type(key).__name__}")
    _path_arg(path)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        raise ValidationError("--out", f"{os.fspath(path)} exists; a key file is never "
                              "overwritten (give a new path)") from None
    with os.fdopen(fd, "w", encoding="ascii") as f:
        os.fchmod(f.fileno(), 0o600)  # whatever the umask
        f.write(key.encode() + "\n")


def read_key(path: str | os.PathLike[str]) -> SigningKey:
    """The signing key in ``path``; refused when the file is readable by anyone but its owner."""
    p = Path(_path_arg(path))
    try:
        mode = p.stat().st_mode
        text = p.read_text(encoding="ascii")
    except FileNotFoundError:
        raise ValidationError("--key", f"no key file at {p}; create one with `braidlog keygen NAME "
                              "--out FILE`") from None
    except (OSError, UnicodeDecodeError) as e:
        raise ValidationError("--key", f"cannot read key file {p}: {e}") from None
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise ValidationError("--key", f"key file {p} has mode {stat.S_IMODE(mode):04o}: others can "
                              f"reach it (only its owner may); run `chmod 600 {p}`, and make a new "
                              "key if it may have leaked")
    line = text.strip()
    parts = line[len(PREFIX):].split("+", 2) if line.startswith(PREFIX) else []
    if len(parts) != 3:
        raise ValidationError("--key", f"{p} is not a signing key (PRIVATE+KEY+NAME+ID+KEY)")
    name, hexid, data = parts
    try:
        raw = base64.b64decode(data, validate=True)
    except binascii.Error:
        raw = b""
    if len(raw) != 33 or raw[0] != ED25519:
        raise ValidationError("--key", f"{p} does not hold an Ed25519 key")
    key = SigningKey(_name(name), raw[1:])
    if key.verifier().id.hex() != hexid:
        raise ValidationError("--key", f"{p}: the key id {hexid} does not match the key")
    return key
