"""Embedders: text to vectors. The offline ``HashingEmbedder`` needs no model; any object with
``name``, ``dim`` and ``embed(texts)`` plugs in, and ``specs.embedder(spec)`` loads real models
from the local disk (docs/recall.md).

An embedder may also have ``embed_documents(texts)`` and ``embed_queries(texts)`` (asymmetric
models embed a query differently from a document: ``documents`` and ``queries`` here use them
when present, ``embed`` otherwise), ``digest`` (of its weights or configuration) and ``spec``
(what loads it again): the log records them with a space's first vectors (braidlog.kind_schema, ``recorded_embedder``).
"""

from __future__ import annotations

import hashlib
import math
import numbers
import re
import unicodedata
from collections.abc import Iterator, Sequence
from typing import Any, NamedTuple, Protocol, runtime_checkable

import blake3
import msgspec
import numpy as np

from ..delta import GenericDelta, Vector
from ..errors import BraidlogError, ValidationError
from ..kinds import REGISTRY, Registry
from ..store.arguments import _delta, whole
from ..store.arguments import name as _text

__all__ = ["Embedder", "HashingEmbedder", "DEFAULT_DIM", "default_embedder", "delta_text", "embed_delta",
           "documents", "queries", "identity", "Identity"]

DEFAULT_DIM = 512


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into vectors: ``embed(texts)`` is a float32 array of shape (len(texts), dim)."""

    name: str
    dim: int

    def embed(self, texts: Sequence[str]) -> np.ndarray: ...


_WORD = re.compile(r"\w+")
_STOPWORDS = frozenset(
    "a an and are as at be but by for from has have i in is it its of on or that the this to was "
    "we were will with you our your they them their which what who how should would can".split())


def _hash64(feature: str) -> int:
    return int.from_bytes(hashlib.blake2b(feature.encode(), digest_size=8).digest(), "little")


class HashingEmbedder:
    """Hashed words, word pairs and character n-grams in ``dim`` signed buckets, L2-normalised.

    Deterministic, offline and model-free: the same text gives the same vector on every machine.
    It matches shared words and word pieces (``databases`` ~ ``database``), not meaning; plug in
    a real model for that (see docs/recall.md).
    """

    def __init__(self, dim: int = DEFAULT_DIM, *, char_ngrams: tuple[int, ...] = (3, 4, 5),
                 word_weight: float = 1.0, pair_weight: float = 0.5, char_weight: float = 0.6,
                 stopword_weight: float = 0.1) -> None:
        if isinstance(dim, bool) or not isinstance(dim, int) or dim < 8:
            raise ValidationError("dim", f"must be an int of at least 8, not {dim!r}")
        self.dim = dim
        if isinstance(char_ngrams, (str, bytes)) or not isinstance(char_ngrams, Sequence):
            raise ValidationError("char_ngrams", "must be a sequence of n-gram lengths, not "
                                  f"{type(char_ngrams).__name__}")
        self.char_ngrams = tuple(whole(n, "char_ngrams", least=1) for n in char_ngrams)
        for field, weight in (("word_weight", word_weight), ("pair_weight", pair_weight),
                              ("char_weight", char_weight), ("stopword_weight", stopword_weight)):
            if isinstance(weight, bool) or not isinstance(weight, numbers.Real) or not math.isfinite(weight):
                raise ValidationError(field, f"must be a finite number, not {weight!r}")
        self.word_weight = word_weight
        self.pair_weight = pair_weight
        self.char_weight = char_weight
        self.stopword_weight = stopword_weight
        self.name = f"hashing-v1-{dim}"
        self._cache: dict[str, tuple[np.ndarray, np.ndarray]] = {}

    @property
    def spec(self) -> str:
        """What loads it again: ``hashing`` at the default settings, else ``hashing:DIM``
        (other weights or n-grams have no spec: pass the object)."""
        if self.config() != HashingEmbedder(self.dim).config():
            return ""
        return "hashing" if self.dim == DEFAULT_DIM else f"hashing:{self.dim}"

    def config(self) -> str:
        """Everything its vectors depend on, as text."""
        return (f"hashing-v1 dim={self.dim} char_ngrams={list(self.char_ngrams)} word={self.word_weight} "
                f"pair={self.pair_weight} char={self.char_weight} stopword={self.stopword_weight}")

    @property
    def digest(self) -> str:
        """blake3 of its configuration: the same vectors on every machine, so no weights."""
        return blake3.blake3(self.config().encode()).hexdigest()

    def __repr__(self) -> str:
        return f"HashingEmbedder(dim={self.dim})"

    def _bucket(self, feature: str, weight: float) -> tuple[int, float]:
        h = _hash64(feature)
        return h % self.dim, weight if (h >> 63) & 1 else -weight

    def _word(self, word: str) -> tuple[np.ndarray, np.ndarray]:
        hit = self._cache.get(word)
        if hit is not None:
            return hit
        feats = [self._bucket("w:" + word, self.stopword_weight if word in _STOPWORDS else self.word_weight)]
        padded = f"<{word}>"
        grams = [padded[i:i + n] for n in self.char_ngrams for i in range(len(padded) - n + 1)]
        if grams:
            w = self.char_weight / math.sqrt(len(grams))
            feats.extend(self._bucket("c:" + g, w) for g in grams)
        idx = np.fromiter((f[0] for f in feats), dtype=np.intp, count=len(feats))
        val = np.fromiter((f[1] for f in feats), dtype=np.float32, count=len(feats))
        if len(self._cache) < 200_000:
            self._cache[word] = (idx, val)
        return idx, val

    def words(self, text: str) -> list[str]:
        """The normalised words of a text (NFKC, case-folded)."""
        return _WORD.findall(unicodedata.normalize("NFKC", _text(text, "text")).casefold())

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """One L2-normalised float32 row per text; a text without words gives a zero row."""
        texts = _texts(texts)
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in zip(out, texts, strict=False):
            words = self.words(text)
            for w in words:
                idx, val = self._word(w)
                np.add.at(row, idx, val)
            for a, b in zip(words, words[1:], strict=False):
                if a in _STOPWORDS or b in _STOPWORDS:
                    continue
                i, v = self._bucket(f"p:{a} {b}", self.pair_weight)
                row[i] += v
            norm = float(np.linalg.norm(row))
            if norm > 0:
                row /= norm
        return out


_TEXT_KEYS = ("title", "text", "content", "summary", "rationale", "statement", "value", "note",
              "description", "output", "label")


def delta_text(d: GenericDelta, registry: Registry = REGISTRY) -> str:
    """The text of a delta, for embedding and the keyword index.

    A kind declared with ``text=(field, ...)`` says which payload fields are its text (a field
    may be a dotted path into nested objects; a list field contributes its strings). A kind that
    says nothing gives its common text fields (title, text, content, summary, rationale ...),
    else every string in its payload except ids.
    """
    p = _delta(d, "d").payload
    if not isinstance(registry, Registry):
        raise ValidationError("registry", f"must be a Registry, not {type(registry).__name__}")
    spec = registry.get(d.kind)
    fields = getattr(spec, "text", ()) if spec is not None else ()
    if fields:
        return "\n".join(s for f in fields for s in _strings(_field(p, f)) if s.strip())
    parts = [p[k] for k in _TEXT_KEYS if isinstance(p.get(k), str) and p[k].strip()]
    if not parts:
        parts = [s for s in _strings(p) if s.strip()]
    return "\n".join(parts)


def _field(payload: Any, path: str) -> Any:
    for part in path.split("."):
        if not isinstance(payload, dict):
            return None
        payload = payload.get(part)
    return payload


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key in sorted(value, key=str):
            if not (isinstance(key, str) and (key == "id" or key.endswith("_id") or key.startswith("_"))):
                yield from _strings(value[key])
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _strings(item)


def embed_delta(d: GenericDelta, embedder: Embedder | None = None, *, space: str = "default") -> GenericDelta:
    """The delta with its vector filled from its text (unchanged if it already has one).

    The vector becomes part of the delta, stored and covered by the hash chain, so recall is
    reproducible from the log alone, without the embedder.
    """
    _delta(d, "d")
    _text(space, "space")
    if d.vector is not None:
        return d
    text = delta_text(d)
    if not text:
        raise ValidationError("payload", f"kind {d.kind!r} delta {d.id} has no text to embed; "
                              "give it a text field or pass a vector")
    embedder = embedder or default_embedder()
    row = documents(embedder, [text])
    return msgspec.structs.replace(d, vector=Vector.of(row[0], space))


class Identity(NamedTuple):
    """What the log records of an embedder: name, dimension, digest and the spec that loads it."""

    name: str
    dim: int
    digest: str
    spec: str


def identity(embedder: Embedder) -> Identity:
    """The embedder's identity: its own ``digest`` and ``spec`` when it has them; otherwise the
    digest of its name and dimension (all an object says of itself) and no spec."""
    name, dim = getattr(embedder, "name", None), getattr(embedder, "dim", None)
    if not isinstance(name, str) or not name or isinstance(dim, bool) or not isinstance(dim, int) or dim < 1:
        raise ValidationError("embedder", f"{type(embedder).__name__} needs a name (a non-empty str) and "
                              f"dim (an int >= 1), not name={name!r}, dim={dim!r}")
    digest = getattr(embedder, "digest", None)
    if not isinstance(digest, str) or not digest:
        digest = blake3.blake3(f"{name}\0{dim}".encode()).hexdigest()
    spec = getattr(embedder, "spec", None)
    return Identity(name, dim, digest, spec if isinstance(spec, str) else "")


def _texts(texts: Any) -> list[str]:
    """``texts`` as a list of strings, else ValidationError naming ``texts``."""
    if isinstance(texts, str):
        raise ValidationError("texts", "must be a sequence of strings; wrap one text in a list")
    if not isinstance(texts, Sequence) or not all(isinstance(t, str) for t in texts):
        raise ValidationError("texts", f"must be a sequence of strings, not {type(texts).__name__}")
    return list(texts)


def _embedded(embedder: Embedder, how: str, texts: Sequence[str]) -> np.ndarray:
    identity(embedder)
    texts = _texts(texts)
    fn = getattr(embedder, how, None) or getattr(embedder, "embed", None)
    if not callable(fn):
        raise ValidationError("embedder", f"{type(embedder).__name__} has no embed(texts) method")
    try:
        rows = np.asarray(fn(list(texts)), dtype=np.float32)
    except BraidlogError:
        raise
    except Exception as e:  # the model's own failure: say whose
        raise ValidationError("embedder", f"{getattr(embedder, 'name', embedder)!r} failed to embed "
                              f"{len(texts)} text(s): {type(e).__name__}: {e}") from e
    if rows.shape != (len(texts), embedder.dim):
        raise ValidationError("embedder", f"{embedder.name} returned shape {rows.shape}, expected "
                              f"({len(texts)}, {embedder.dim})")
    if not np.isfinite(rows).all():
        raise ValidationError("embedder", f"{embedder.name} returned a NaN or infinity")
    return rows


def documents(embedder: Embedder, texts: Sequence[str]) -> np.ndarray:
    """``texts`` embedded as documents (stored): ``embed_documents`` if it has one, else ``embed``."""
    return _embedded(embedder, "embed_documents", texts)


def queries(embedder: Embedder, texts: Sequence[str]) -> np.ndarray:
    """``texts`` embedded as queries: ``embed_queries`` if it has one, else ``embed``."""
    return _embedded(embedder, "embed_queries", texts)


_DEFAULT: list[HashingEmbedder] = []


def default_embedder() -> HashingEmbedder:
    """One shared default embedder (its word cache is worth keeping)."""
    if not _DEFAULT:
        _DEFAULT.append(HashingEmbedder())
    return _DEFAULT[0]
