"""Real models, built by the tests and loaded through each library's own loading code from a
directory (no network, no mock): a model2vec ``StaticModel`` and WordLlama's shipped weights,
from Python, the shell and MCP."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("braidlog.recall")
pytest.importorskip("model2vec", reason="model2vec is in the test extra: pip install '.[test]'")

import braidlog
from braidlog import ValidationError
from braidlog.cli import main
from braidlog.recall import Model2VecEmbedder, Recall, append_embedded, embedder, identity, recorded_embedder
from tests.support.models import model2vec_dir

MEMORIES = ["she takes her coffee as an oat milk flat white", "she is allergic to peanuts",
            "her terrier is called Biscuit", "the release failed on the canary, rolled back",
            "prefers a window seat on long flights"]
QUESTIONS = {"what espresso drink does she like?": 0, "food allergies": 1, "does she have a dog?": 2,
             "why was the deployment reverted": 3, "aisle or window?": 4}


@pytest.fixture(scope="module")
def model(tmp_path_factory) -> Path:
    return model2vec_dir(tmp_path_factory.mktemp("m2v") / "tiny-m2v")


def remember(b, spec: str | None, space: str = "default") -> list[int]:
    return append_embedded(b, [braidlog.delta("me", "observation", {"text": t}) for t in MEMORIES], spec,
                           space=space)


def test_a_model2vec_directory_loads_through_model2vec(model):
    e = embedder(f"model2vec:{model}")
    assert isinstance(e, Model2VecEmbedder) and type(e.model).__module__ == "model2vec.model"
    assert (e.name, e.dim, e.spec) == ("model2vec:tiny-m2v", 32, f"model2vec:{model}")
    assert len(e.digest) == 64 and embedder(f"model2vec:{model}") is e
    assert e.embed(["coffee", "espresso"]).shape == (2, 32)


def test_a_real_model_finds_by_meaning_where_hashing_cannot(tmp_path, model):
    with braidlog.open(tmp_path / "s") as b:
        remember(b, f"model2vec:{model}", "m2v")
        remember(b, "hashing", "hash")
        top = {space: [Recall(b, space).recall(q, 1)[0].seq for q in QUESTIONS] for space in ("m2v", "hash")}
    first = {"m2v": 2, "hash": 8}  # each space: its declaration, then the five memories
    right = {s: sum(seq - first[s] == want for seq, want in zip(top[s], QUESTIONS.values(), strict=True))
             for s in top}
    assert right["m2v"] == 5 and right["hash"] < 5, right


def test_the_weights_not_the_path_are_the_identity(tmp_path, model):
    same = shutil.copytree(model, tmp_path / "same")
    other = shutil.copytree(model, tmp_path / "other")
    import safetensors.numpy as stn

    tensors = stn.load_file(str(other / "model.safetensors"))
    tensors["embeddings"][5] += 0.5  # one word's vector changed
    stn.save_file(tensors, str(other / "model.safetensors"))
    with braidlog.open(tmp_path / "s") as b:
        remember(b, f"model2vec:{model}")
        append_embedded(b, [braidlog.delta("me", "observation", {"text": "latte"})], f"model2vec:{same}")
        head = b.head()
        with pytest.raises(ValidationError) as e:
            append_embedded(b, [braidlog.delta("me", "observation", {"text": "latte"})], f"model2vec:{other}")
        assert b.head() == head
        d1, d2 = identity(embedder(f"model2vec:{model}")).digest, identity(embedder(f"model2vec:{other}")).digest
        assert str(e.value) == (
            f"embedder: space 'default' holds vectors of model2vec:tiny-m2v (32 dimensions, digest {d1[:12]}) "
            f"(load it with 'model2vec:{model}'); model2vec:other (32 dimensions, digest {d2[:12]}) is another "
            "embedder: use the recorded one, or another space")


def test_a_directory_that_is_no_model_is_refused_naming_it(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValidationError, match=f"embedder: 'model2vec:{tmp_path / 'empty'}': {tmp_path / 'empty'} "
                       "is not a model2vec model"):
        embedder(f"model2vec:{tmp_path / 'empty'}")


def run(args, capsys):
    code = main(args)
    out, err = capsys.readouterr()
    return code, out, err


def test_the_shell_embeds_with_a_model_and_recalls_with_the_recorded_one(tmp_path, model, capsys):
    store, src = str(tmp_path / "s"), tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps({"braid_id": "me", "kind": "observation", "payload": {"text": t}}) + "\n"
                           for t in MEMORIES))
    moved = shutil.copytree(model, tmp_path / "mine")
    assert run(["--store", store, "init"], capsys)[0] == 0
    code, out, err = run(["--store", store, "append", str(src), "--embed", "--embedder", f"model2vec:{moved}",
                          "--json"], capsys)
    assert code == 0, err
    assert json.loads(out) == {"seqs": [2, 3, 4, 5, 6], "head": json.loads(out)["head"], "embedded": 5}
    code, out, err = run(["--store", store, "recall", "what espresso drink does she like?", "--k", "1", "--json"],
                         capsys)
    assert code == 0, err
    assert [h["seq"] for h in json.loads(out)["hits"]] == [2]
    shutil.rmtree(moved)  # the recorded spec no longer loads (in a new process): say which embedder to pass
    p = subprocess.run([sys.executable, "-m", "braidlog", "--store", store, "recall", "coffee", "--json"],
                       capture_output=True, text=True, timeout=120)
    code, out, err = p.returncode, p.stdout, p.stderr
    assert code == 1 and out == ""
    assert err.startswith("braidlog: error: embedder: space 'default' holds vectors of model2vec:mine (32 "
                          "dimensions, digest ") and f"whose spec 'model2vec:{moved}' does not load here" in err
    assert "pass that embedder (--embedder SPEC, embedder=...)" in err
    code, out, err = run(["--store", store, "recall", "coffee", "--embedder", f"model2vec:{model}", "--k", "1",
                          "--json"], capsys)  # the same weights elsewhere: accepted
    assert code == 0, err
    assert json.loads(out)["hits"][0]["seq"] == 2


def test_wordllama_runs_from_the_weights_its_wheel_ships():
    pytest.importorskip("wordllama", reason="wordllama is in the test extra: pip install '.[test]'")
    e = embedder("wordllama")
    assert (e.name, e.dim, e.spec) == ("wordllama:l2_supercat-256", 256, "wordllama")
    v = e.embed(["she likes oat milk flat whites", "what coffee does she like?", "the deploy failed"])
    assert v.shape == (3, 256) and v[0] @ v[1] > v[0] @ v[2]
    assert embedder("wordllama:64").dim == 64 and identity(embedder("wordllama:64")).digest != identity(e).digest


def test_mcp_serves_with_the_embedder_it_is_given(tmp_path, model):
    pytest.importorskip("mcp", reason="the MCP SDK is the braidlog[mcp] extra (the test extra has it)")
    from anyio.from_thread import start_blocking_portal
    from mcp import Client, StdioServerParameters

    store = tmp_path / "s"
    params = StdioServerParameters(command=sys.executable, args=[
        "-m", "braidlog", "--store", str(store), "mcp", "--embedder", f"model2vec:{model}"])
    with start_blocking_portal() as portal:
        client = portal.call(lambda: Client(params))
        with portal.wrap_async_context_manager(client) as c:
            for text in MEMORIES:
                out = portal.call(c.call_tool, "append", {"braid_id": "me", "kind": "observation",
                                                          "payload": {"text": text}})
                assert not out.is_error and out.structured_content["embedded"] is True
            got = portal.call(c.call_tool, "recall", {"query": "what espresso drink does she like?", "k": 1})
            assert got.structured_content["hits"][0]["delta"]["payload"]["text"] == MEMORIES[0]
    assert recorded_embedder(braidlog.LmdbLog(store, readonly=True)).spec == f"model2vec:{model}"


def test_mcp_refuses_to_start_with_a_model_that_is_not_here(tmp_path):
    p = subprocess.run([sys.executable, "-m", "braidlog", "--store", str(tmp_path / "s"), "mcp", "--embedder",
                        f"model2vec:{tmp_path / 'nowhere'}"], capture_output=True, text=True, timeout=60,
                       stdin=subprocess.DEVNULL)
    assert p.returncode == 1
    assert p.stderr == (f"braidlog: error: embedder: 'model2vec:{tmp_path / 'nowhere'}': no directory "
                        f"'{tmp_path / 'nowhere'}' on this machine\n")
