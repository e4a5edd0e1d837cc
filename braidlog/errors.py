"""The braidlog error hierarchy: every error the public API raises is one of these."""

from __future__ import annotations

from typing import NoReturn

__all__ = [
    "BraidlogError",
    "ValidationError",
    "DecodeError",
    "ConflictError",
    "StaleHead",
    "Rejected",
    "IntegrityError",
    "StorageError",
    "StoreFullError",
    "ReplicationError",
    "NotAcknowledged",
    "StaleWriter",
    "MissingDependency",
    "NoSuchSeq",
    "CheckpointWarning",
    "RecallWarning",
]


class BraidlogError(Exception):
    """Base class of every error braidlog raises."""


class ValidationError(BraidlogError, ValueError):
    """Bad input: names the field and the rule it broke; nothing was written."""

    def __init__(self, field: str, rule: str, *, index: int | None = None,
                 where: str | None = None) -> None:
        self.field = field
        self.rule = rule
        self.index = index
        where = where or (f"delta {index}" if index is not None else "")
        super().__init__(f"{where}: {field}: {rule}" if where else f"{field}: {rule}")


class DecodeError(BraidlogError, ValueError):
    """Bytes or text that do not decode to a delta."""


class ConflictError(BraidlogError):
    """An expected version or head is not the actual one, or an id was reused with other bytes."""

    def __init__(self, message: str, *, expected: object = None, actual: object = None) -> None:
        self.expected = expected
        self.actual = actual
        super().__init__(message)


class StaleHead(ConflictError):
    """The log head moved between a decision and its append; catch up and decide again."""


class Rejected(BraidlogError):
    """A decide() refusal the caller must act on; nothing was appended."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(reason)


class IntegrityError(BraidlogError):
    """The hash chain or a derived artifact does not match the log."""

    def __init__(self, message: str, *, seq: int | None = None,
                 expected: bytes | None = None, found: bytes | None = None) -> None:
        self.seq = seq
        self.expected = expected
        self.found = found
        super().__init__(message)


class StorageError(BraidlogError):
    """The storage layer failed; .hint says what to do about it."""

    def __init__(self, message: str, *, hint: str = "") -> None:
        self.hint = hint
        super().__init__(f"{message} ({hint})" if hint else message)


class StoreFullError(StorageError):
    """The store could not grow; .hint says how to make room."""


class ReplicationError(StorageError):
    """NATS JetStream could not be reached, timed out, or holds a stream braidlog cannot use."""


class NotAcknowledged(ReplicationError):
    """Appended to the local store, but the stream did not acknowledge it in time (.seqs)."""

    def __init__(self, message: str, *, seqs: list[int], hint: str = "") -> None:
        self.seqs = list(seqs)
        super().__init__(message, hint=hint)


class StaleWriter(ConflictError):
    """The stream holds records this store did not write: another writer owns it (error 10071)."""


class MissingDependency(BraidlogError, ImportError):
    """An optional capability was used without its extra installed; the message says how to install it."""


def require_extra(e: ImportError, package: str, extra: str, modules: tuple[str, ...]) -> NoReturn:
    """Raise, for ``e`` met importing ``package``: a MissingDependency naming ``extra`` when the
    module missing is one of the extra's ``modules``, else ``e`` itself (another fault)."""
    if (e.name or "").split(".")[0] not in modules:
        raise e
    raise MissingDependency(f"{package} needs the {extra} extra, which is not installed here (no module "
                            f"{e.name}): pip install 'braidlog[{extra}]' (from a braidlog clone: pip "
                            f"install '.[{extra}]')") from e


class NoSuchSeq(BraidlogError, IndexError):
    """A seq the log (or a view of it) does not hold; also an IndexError, as a missing index is."""


class CheckpointWarning(UserWarning):
    """A checkpoint was ignored and its projection rebuilt from the log; the message says why."""


class RecallWarning(UserWarning):
    """A recall index on disk was ignored and rebuilt from the log; the message says why."""
