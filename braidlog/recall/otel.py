"""The OpenTelemetry span of a recall, following the GenAI memory conventions
(semantic-conventions-genai: span ``gen_ai.memory.client``, operation ``search_memory``).

With ``opentelemetry-api`` installed (``pip install 'braidlog[otel]'``) each ``Recall.recall``
runs inside a span named ``search_memory`` (kind INTERNAL: the store runs in the process) with
``gen_ai.operation.name`` ``search_memory``, ``gen_ai.memory.store.id`` (the store's directory,
or ``memory`` for an in-memory store), ``gen_ai.memory.record.count`` and
``gen_ai.memory.records``, a JSON array (the conventions allow a JSON string where attributes
cannot nest) of ``{id, score, content, metadata}``: the delta id, the score, and metadata with
the record's ``seq``, its ``leaf_index`` in the Merkle tree (seq - 1), its ``rank``, and the
``receipt_id`` of the receipt recorded for the recall (null when none was). The record content
and ``gen_ai.memory.query.text`` are sensitive and captured only when
``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`` is ``true`` (content is null otherwise).
Without opentelemetry-api installed nothing here runs, and with it but no SDK configured (the
API's default provider) no span is made. Spans are sampled and exported by the application's
SDK; a span it does not record gets no records built.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

__all__ = ["ENABLED", "OPERATION", "tracer", "search_span", "describe", "capture_content"]

try:
    from opentelemetry import trace as _trace
except ImportError:  # the otel extra is not installed: recall runs without spans
    _trace = None  # type: ignore[assignment]  # None: the otel extra is not installed

ENABLED = _trace is not None
_NO_SDK = (_trace.ProxyTracerProvider, _trace.NoOpTracerProvider) if _trace is not None else ()
_tracers: dict[int, tuple[Any, Any]] = {}  # id(provider) -> (provider, its tracer)
OPERATION = "search_memory"
CAPTURE_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"


def capture_content() -> bool:
    """Whether content (query text, record text) goes into spans: the conventions' opt-in."""
    return os.environ.get(CAPTURE_ENV, "").strip().lower() == "true"


def store_id(store: Any) -> str:
    """What ``gen_ai.memory.store.id`` maps to: the store's directory, or ``memory``."""
    path = getattr(store, "path", None)
    return os.path.abspath(os.fspath(path)) if path is not None else "memory"


def tracer() -> Any:
    """braidlog's tracer from the application's tracer provider, or None when there is none to
    export spans (opentelemetry-api without an SDK configured): then recall makes no span at
    all, which would cost it a third of a query's time for nothing."""
    if _trace is None:
        return None
    provider = _trace.get_tracer_provider()
    if isinstance(provider, _NO_SDK):
        return None
    got = _tracers.get(id(provider))
    if got is None or got[0] is not provider:
        got = _tracers[id(provider)] = (provider, provider.get_tracer("braidlog.recall"))
    return got[1]


@contextmanager
def search_span(tracer: Any, store: Any) -> Iterator[Any]:
    """A ``search_memory`` span around a recall (the current span inside it)."""
    assert _trace is not None
    with tracer.start_as_current_span(OPERATION, kind=_trace.SpanKind.INTERNAL, attributes={
            "gen_ai.operation.name": OPERATION, "gen_ai.memory.store.id": store_id(store)}) as span:
        try:
            yield span
        except Exception as e:
            span.set_attribute("error.type", type(e).__name__)
            raise


def describe(span: Any, query: Any, hits: Sequence[Any], receipt_id: str | None,
             text: Any = None) -> None:
    """The span's record attributes, once the hits (and the receipt) are known; ``text(delta)``
    gives a record's content when content is captured."""
    if not span.is_recording():
        return
    capture = capture_content()
    span.set_attribute("gen_ai.memory.record.count", len(hits))
    if capture and isinstance(query, str):
        span.set_attribute("gen_ai.memory.query.text", query)
    records = []
    for rank, h in enumerate(hits, 1):
        content = text(h.delta) if capture and text is not None and h.delta is not None else None
        records.append({"id": h.delta_id, "score": float(h.score), "content": content,
                        "metadata": {"seq": h.seq, "leaf_index": h.seq - 1, "rank": rank,
                                     "receipt_id": receipt_id}})
    span.set_attribute("gen_ai.memory.records", json.dumps(records, ensure_ascii=False))
