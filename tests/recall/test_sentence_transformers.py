"""A sentence-transformers model the test builds (a one-layer BERT initialised locally, mean
pooling), saved to a directory and loaded through ``SentenceTransformer`` with downloads off.
torch is heavy, so this suite is not in the test extra: it skips, saying how to install it."""

from __future__ import annotations

import importlib.util

import pytest

if importlib.util.find_spec("sentence_transformers") is None or importlib.util.find_spec("torch") is None:
    pytest.skip("sentence-transformers and torch are not installed; to run these: "
                "pip install '.[sentence-transformers]'", allow_module_level=True)

import braidlog
from braidlog.recall import Recall, SentenceTransformerEmbedder, append_embedded, embedder, recorded_embedder
from tests.support.models import sentence_transformers_dir


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    return sentence_transformers_dir(tmp_path_factory.mktemp("st") / "tiny-st")


def test_a_directory_loads_through_sentence_transformers(model):
    e = embedder(f"sentence-transformers:{model}")
    assert isinstance(e, SentenceTransformerEmbedder)
    assert type(e.model).__name__ == "SentenceTransformer"
    assert (e.name, e.dim, e.spec) == ("sentence-transformers:tiny-st", 32, f"sentence-transformers:{model}")
    docs, queries = e.embed_documents(["coffee with oat milk", "a terrier"]), e.embed_queries(["espresso"])
    assert docs.shape == (2, 32) and queries.shape == (1, 32) and len(e.digest) == 64


def test_its_vectors_are_recorded_and_recalled(tmp_path, model):
    with braidlog.open(tmp_path / "s") as b:
        append_embedded(b, [braidlog.delta("me", "observation", {"text": t})
                            for t in ("coffee with oat milk", "a terrier called Biscuit")],
                        f"sentence-transformers:{model}")
        assert recorded_embedder(b).name == "sentence-transformers:tiny-st"
        hits = Recall(b).recall("coffee with oat milk", 1)  # the recorded one, loaded by its spec
        assert hits[0].seq == 2


def test_a_missing_model_is_refused_at_once(tmp_path):
    with pytest.raises(braidlog.ValidationError, match="no directory .* on this machine"):
        embedder(f"sentence-transformers:{tmp_path / 'nowhere'}")
