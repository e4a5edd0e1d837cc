"""BraidlogStore's index the way LangGraph's stores take it ({"dims", "embed", "fields"}, embed a
callable, LangChain Embeddings or a braidlog embedder or spec), documents embedded as documents
and queries as queries, the embedder recorded in the log, and keyword mode without an index
answering by keyword."""

from __future__ import annotations

import pytest

pytest.importorskip("langgraph.store.base")
pytest.importorskip("braidlog.recall")

import braidlog
from braidlog import ValidationError
from braidlog.integrations.langgraph import BraidlogStore
from braidlog.recall import HashingEmbedder, embedder, identity

ITEMS = {"a": "she takes her coffee as an oat milk flat white", "b": "allergic to peanuts and shellfish",
         "c": "the deploy failed with ERR-4012 on the canary"}


def fill(store: BraidlogStore) -> None:
    for key, text in ITEMS.items():
        store.put(("u",), key, {"text": text})


@pytest.mark.parametrize("embed", [HashingEmbedder(), "hashing", embedder("hashing")], ids=["object", "spec", "loaded"])
def test_a_braidlog_embedder_or_spec_is_an_index_embed(tmp_path, embed):
    with BraidlogStore(str(tmp_path / "s"), index={"embed": embed, "fields": ["text"]}) as store:
        assert store.index_config["dims"] == 512  # it knows its own dimension
        fill(store)
        assert store.search(("u",), query="peanut allergy", limit=1)[0].key == "b"
        got = braidlog.recorded_embedder(store._braid, "langgraph")
        assert (got.name, got.dim, got.digest) == ("hashing-v1-512", 512, identity(HashingEmbedder()).digest)


def test_dims_that_contradict_the_embedder_are_refused(tmp_path):
    with pytest.raises(ValidationError, match="index.dims: is 64 but hashing-v1-512 makes 512-dimensional"):
        BraidlogStore(str(tmp_path / "s"), index={"embed": "hashing", "dims": 64})


class Asymmetric:
    """LangChain-style embeddings that embed a query differently from a document (as e5 and bge
    do with their prefixes), counting what each path saw."""

    def __init__(self) -> None:
        self.h = HashingEmbedder(64)
        self.documents: list[list[str]] = []
        self.queries: list[str] = []

    def embed_documents(self, texts):
        self.documents.append(list(texts))
        return self.h.embed(["passage: " + t for t in texts]).tolist()

    def embed_query(self, text):
        self.queries.append(text)
        return self.h.embed(["query: " + text])[0].tolist()

    async def aembed_documents(self, texts):
        return self.embed_documents(texts)

    async def aembed_query(self, text):
        return self.embed_query(text)


@pytest.mark.parametrize("mode", ["vector", "hybrid"])
def test_documents_are_embedded_as_documents_in_one_batch_and_queries_as_queries(tmp_path, mode):
    from langgraph.store.base import PutOp

    emb = Asymmetric()
    with BraidlogStore(str(tmp_path / "s"), index={"embed": emb, "dims": 64, "fields": ["text"]}, mode=mode) as store:
        store.batch([PutOp(("u",), k, {"text": t}) for k, t in ITEMS.items()])
        assert emb.documents == [list(ITEMS.values())] and emb.queries == []
        assert store.search(("u",), query="ERR-4012 deploy", limit=1)[0].key == "c"
        assert emb.documents == [list(ITEMS.values())] and set(emb.queries) == {"ERR-4012 deploy"}
        assert braidlog.recorded_embedder(store._braid, "langgraph").name.endswith("Asymmetric")


def test_a_store_opened_with_another_embedder_is_refused_naming_both(tmp_path):
    path = str(tmp_path / "s")
    with BraidlogStore(path, index={"embed": "hashing", "fields": ["text"]}) as store:
        fill(store)
    with BraidlogStore(path, index={"embed": "hashing:256", "fields": ["text"]}) as store:
        head = store._braid.head()
        with pytest.raises(ValidationError, match="index.embed: space 'langgraph' holds vectors of hashing-v1-512 "
                           r".*hashing-v1-256 \(256 dimensions.* is another embedder"):
            store.search(("u",), query="coffee")
        with pytest.raises(ValidationError, match="is another embedder"):
            store.put(("u",), "d", {"text": "more"})
        assert store._braid.head() == head


def test_an_embed_that_is_none_of_the_forms_is_refused_on_open(tmp_path):
    with pytest.raises(ValidationError, match="index.embed: must be a function of texts, a LangChain "
                       "Embeddings, an init_embeddings string, or a braidlog embedder or spec, not int"):
        BraidlogStore(str(tmp_path / "s"), index={"embed": 42, "dims": 8})


def test_a_langchain_embeddings_is_used_as_it_is(tmp_path):
    from langchain_core.embeddings import Embeddings

    class Real(Asymmetric, Embeddings):
        pass

    emb = Real()
    with BraidlogStore(str(tmp_path / "s"), index={"embed": emb, "dims": 64, "fields": ["text"]}) as store:
        assert store.embeddings is emb
        fill(store)
        assert store.search(("u",), query="coffee oat milk", limit=1)[0].key == "a"
        assert emb.queries == ["coffee oat milk"] and len(emb.documents) == 3


def test_keyword_mode_without_an_index_answers_by_keyword(tmp_path):
    with BraidlogStore(str(tmp_path / "s"), mode="keyword") as store:
        fill(store)
        found = store.search(("u",), query="coffee")
        assert [(i.key, i.score is not None) for i in found] == [("a", True)]
        assert store.search(("u",), query="nothing matches this") == []
        assert {i.key for i in store.search(("u",))} == set(ITEMS)  # no query: every item, as before
