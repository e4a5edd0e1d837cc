"""With opentelemetry-api installed, each recall is a ``search_memory`` span following the GenAI
memory conventions, its records carrying their seq, leaf index and receipt id; exported by the
real SDK's in-memory exporter."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("opentelemetry.sdk", reason="opentelemetry-sdk is in the test extra")

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from braidlog.recall import Recall


@pytest.fixture(scope="module")
def exporter():
    exporter = InMemorySpanExporter()
    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):
        provider = TracerProvider()
        trace.set_tracer_provider(provider)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield exporter
    exporter.shutdown()  # the provider stays (one a process); what it exports now is dropped


def test_a_recall_is_a_search_memory_span(braid, store_path, exporter, monkeypatch):
    monkeypatch.delenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", raising=False)
    exporter.clear()
    index = Recall(braid)
    hits = index.recall("coffee", 2, record=True, run="r", turn="1")
    (span,) = exporter.get_finished_spans()
    a = span.attributes
    assert span.name == "search_memory" and span.kind == trace.SpanKind.INTERNAL
    assert a["gen_ai.operation.name"] == "search_memory"
    assert a["gen_ai.memory.store.id"] == str(store_path.resolve())
    assert a["gen_ai.memory.record.count"] == 2 and "gen_ai.memory.query.text" not in a
    records = json.loads(a["gen_ai.memory.records"])
    assert [r["id"] for r in records] == [h.delta_id for h in hits]
    assert [r["metadata"] for r in records] == [
        {"seq": h.seq, "leaf_index": h.seq - 1, "rank": n, "receipt_id": hits.context_id}
        for n, h in enumerate(hits, 1)]
    assert all(r["content"] is None for r in records)  # content only when captured
    assert [r["score"] for r in records] == [h.score for h in hits]

    exporter.clear()
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true")
    plain = index.recall("coffee", 1)
    (span,) = exporter.get_finished_spans()
    records = json.loads(span.attributes["gen_ai.memory.records"])
    assert span.attributes["gen_ai.memory.query.text"] == "coffee"
    assert records[0]["content"] == plain[0].delta.payload["text"]
    assert records[0]["metadata"]["receipt_id"] is None
    index.close()


def test_a_failed_recall_ends_its_span_with_the_error(braid, exporter):
    exporter.clear()
    index = Recall(braid)
    with pytest.raises(Exception, match="run"):
        index.recall("coffee", 1, record=True)
    (span,) = exporter.get_finished_spans()
    assert span.attributes["error.type"] == "ValidationError"
    assert span.status.status_code == trace.StatusCode.ERROR
    index.close()


def test_without_an_sdk_configured_recall_makes_no_span():
    """In a fresh process with the API alone (its default provider): no tracer, no span."""
    import subprocess
    import sys

    code = ("import braidlog.recall.otel as o; assert o.ENABLED and o.tracer() is None; "
            "from opentelemetry import trace; from opentelemetry.sdk.trace import TracerProvider; "
            "trace.set_tracer_provider(TracerProvider()); assert o.tracer() is o.tracer() is not None")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
