"""The ``embed`` of BraidlogStore's index, whatever form it takes, as LangChain ``Embeddings``
(documents through ``embed_documents`` in one batch, queries through ``embed_query``), with the
identity the log records for the store's vector space (braidlog.kind_schema's embedder
declaration).

``embed`` may be LangGraph's own forms (a function of texts, a LangChain ``Embeddings``, an
``init_embeddings`` string such as ``"openai:text-embedding-3-small"``) or braidlog's (an
embedder object, or a spec whose scheme is braidlog's: ``hashing``, ``model2vec:DIR``,
``sentence-transformers:DIR``, ``fastembed:NAME``, ``wordllama``). A ``module:attribute`` spec
is read as LangChain's provider string: pass the object instead.
"""

from __future__ import annotations

import asyncio
from typing import Any

import blake3

from ...errors import BraidlogError, ValidationError

__all__ = ["embeddings_of", "BRAIDLOG_SCHEMES"]

BRAIDLOG_SCHEMES = ("hashing", "model2vec", "sentence-transformers", "sentence_transformers", "fastembed",
                    "wordllama")


class BraidlogEmbeddings:
    """A braidlog embedder as LangChain ``Embeddings``: documents and queries each through the
    embedder's own form (``embed_documents`` / ``embed_queries`` where it has them)."""

    def __init__(self, embedder: Any) -> None:
        self.embedder = embedder

    def __repr__(self) -> str:
        return f"BraidlogEmbeddings({self.embedder!r})"

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        from ...recall import documents

        return documents(self.embedder, list(texts)).tolist()

    def embed_query(self, text: str) -> list[float]:
        from ...recall import queries

        return queries(self.embedder, [text])[0].tolist()

    async def aembed_documents(self, texts: list[str]) -> list[list[float]]:
        return await asyncio.to_thread(self.embed_documents, texts)

    async def aembed_query(self, text: str) -> list[float]:
        return await asyncio.to_thread(self.embed_query, text)


def _has_methods(embed: Any) -> bool:
    return callable(getattr(embed, "embed_documents", None)) and callable(getattr(embed, "embed_query", None))


def _is_langchain(embed: Any) -> bool:
    try:
        from langchain_core.embeddings import Embeddings
    except ImportError:
        return False
    return isinstance(embed, Embeddings)


class _Methods:
    """An object with ``embed_documents`` and ``embed_query`` that is not a LangChain
    ``Embeddings``: used as one, its async forms run the sync ones in a thread where it has none."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.embed_documents, self.embed_query = inner.embed_documents, inner.embed_query

    async def aembed_documents(self, texts: list[str]) -> list[list[float]]:
        if hasattr(self.inner, "aembed_documents"):
            return await self.inner.aembed_documents(texts)
        return await asyncio.to_thread(self.inner.embed_documents, texts)

    async def aembed_query(self, text: str) -> list[float]:
        if hasattr(self.inner, "aembed_query"):
            return await self.inner.aembed_query(text)
        return await asyncio.to_thread(self.inner.embed_query, text)


def _is_braidlog_embedder(embed: Any) -> bool:
    return (not callable(embed) and not hasattr(embed, "embed_query")
            and isinstance(getattr(embed, "name", None), str) and isinstance(getattr(embed, "dim", None), int)
            and callable(getattr(embed, "embed", None)))


def embeddings_of(embed: Any, dims: Any) -> tuple[Any, int | None, tuple[str, int, str, str] | None]:
    """(LangChain Embeddings, dims, identity (name, dim, digest, spec)) of an index's ``embed``;
    ``dims`` may be left out for a braidlog embedder (it knows its own)."""
    if embed is None:
        return None, dims, None
    if isinstance(embed, str) and embed.split(":", 1)[0] in BRAIDLOG_SCHEMES or _is_braidlog_embedder(embed):
        from ...recall import embedder, identity

        chosen = embedder(embed)
        ident = identity(chosen)
        if dims is not None and dims != ident.dim:
            raise ValidationError("index.dims", f"is {dims!r} but {ident.name} makes {ident.dim}-dimensional "
                                  "vectors; leave dims out or give its dimension")
        return BraidlogEmbeddings(chosen), ident.dim, tuple(ident)  # type: ignore[return-value]  # tuple(ident): its four fields
    from langgraph.store.base.embed import ensure_embeddings

    if isinstance(dims, bool) or not isinstance(dims, int) or dims < 1:
        raise ValidationError("index.dims", f"must be an int of at least 1 (the dimension {embed!r} "
                              f"makes), not {dims!r}"[:200])
    if not (isinstance(embed, str) or callable(embed) or _has_methods(embed)):
        raise ValidationError("index.embed", f"must be a function of texts, a LangChain Embeddings, an "
                              f"init_embeddings string, or a braidlog embedder or spec, not {type(embed).__name__}")
    try:
        embeddings = _Methods(embed) if _has_methods(embed) and not _is_langchain(embed) else ensure_embeddings(embed)
    except BraidlogError:
        raise
    except Exception as e:
        raise ValidationError("index", f"LangGraph cannot use it ({type(e).__name__}: {e})") from None
    inner = (getattr(embeddings, "inner", None) or getattr(embeddings, "func", None)
             or getattr(embeddings, "afunc", None) or embeddings)
    model = next((getattr(embeddings, a) for a in ("model", "model_name", "model_id")
                  if isinstance(getattr(embeddings, a, None), str)), None)
    name = getattr(inner, "__qualname__", None) or type(inner).__qualname__
    name = f"{getattr(inner, '__module__', '') or type(inner).__module__}.{name}" + (f"({model})" if model else "")
    spec = embed if isinstance(embed, str) else ""
    return embeddings, dims, (name, dims, blake3.blake3(f"{name}\0{dims}".encode()).hexdigest(), spec)
