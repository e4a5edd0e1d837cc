"""Embedder specs and the embedder each vector space records in the log: one spec everywhere
(Python, the shell), a model that is not on this machine refused at once, vectors and queries of
another embedder refused naming both, with nothing written."""

from __future__ import annotations

import json
import sys
import time

import pytest

pytest.importorskip("braidlog.recall")

import braidlog
from braidlog import ValidationError
from braidlog.cli import main
from braidlog.recall import (
    HashingEmbedder,
    Recall,
    append_embedded,
    embedder,
    identity,
    recorded_embedder,
    recorded_embedders,
)


def memories(*texts: str, braid: str = "me") -> list[braidlog.GenericDelta]:
    return [braidlog.delta(braid, "observation", {"text": t}) for t in texts]


@pytest.fixture
def braid(tmp_path):
    with braidlog.open(tmp_path / "store") as b:
        yield b


# -- specs --------------------------------------------------------------------------------------

def test_hashing_specs_name_the_hashing_embedder():
    assert embedder("hashing") is embedder(None) is embedder("hashing")  # loaded once
    e = embedder("hashing:128")
    assert isinstance(e, HashingEmbedder) and e.dim == 128 and e.spec == "hashing:128"
    assert identity(e).digest == identity(HashingEmbedder(128)).digest  # the same configuration
    assert identity(e).digest != identity(HashingEmbedder(128, pair_weight=0.7)).digest
    assert HashingEmbedder(128, pair_weight=0.7).spec == ""  # no spec loads other weights


def test_the_environment_names_the_default(monkeypatch):
    monkeypatch.setenv("BRAIDLOG_EMBEDDER", "hashing:64")
    assert embedder(None).dim == 64


@pytest.mark.parametrize("spec, message", [
    ("nope", "embedder: 'nope' is not a spec: an embedder spec is hashing, hashing:DIM, "
             "model2vec:NAME_OR_DIR, sentence-transformers:NAME_OR_DIR, fastembed:NAME, wordllama "
             "or module:attribute"),
    ("hashing:abc", "embedder: 'hashing:abc': 'abc' is not a dimension (an int)"),
    ("hashing:4", "dim: must be an int of at least 8, not 4"),
    ("os:path", "embedder: 'os:path' gives module, which has no name, dim and embed(texts): give an "
                "embedder, or a class or function that makes one"),
    ("os:nothing_here", "embedder: 'os:nothing_here': 'os' has no attribute 'nothing_here'"),
    ("model2vec:/no/such/dir", "embedder: 'model2vec:/no/such/dir': no directory '/no/such/dir' on this machine"),
])
def test_a_bad_spec_is_a_typed_error_naming_it(spec, message):
    pytest.importorskip("model2vec") if spec.startswith("model2vec") else None
    with pytest.raises(ValidationError) as e:
        embedder(spec)
    assert str(e.value) == message


def test_a_model_not_on_this_machine_is_refused_at_once_saying_how_to_get_it(tmp_path, monkeypatch):
    pytest.importorskip("model2vec")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))  # an empty cache
    start = time.monotonic()
    with pytest.raises(ValidationError, match="no such model in the Hugging Face cache; fetch it once "
                       "where there is network: `hf download minishlab/potion-base-8M`"):
        embedder("model2vec:minishlab/potion-base-8M")
    assert time.monotonic() - start < 5  # no retries against a network that is not there


@pytest.mark.parametrize("spec, extra", [
    ("sentence-transformers:all-MiniLM-L6-v2", "sentence-transformers"),
    ("fastembed:BAAI/bge-small-en-v1.5", "fastembed"),
])
def test_a_library_not_installed_says_which_extra_brings_it(spec, extra):
    module = extra.replace("-", "_")
    if module in sys.modules or _installed(module):
        pytest.skip(f"{module} is installed here")
    with pytest.raises(braidlog.MissingDependency, match=rf"install it with: pip install '\.\[{extra}\]'"):
        embedder(spec)


def _installed(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


class Shouting:
    """A user's own embedder, loaded by module:attribute."""

    name, dim = "shouting", 8

    def embed(self, texts):
        import numpy as np

        return np.array([[len(t), t.count("!"), 1, 0, 0, 0, 0, 1] for t in texts], dtype=np.float32)


def test_module_attribute_loads_the_users_object():
    e = embedder(f"{__name__}:Shouting")  # a class: made with no arguments
    assert isinstance(e, Shouting) and e.spec == f"{__name__}:Shouting"
    assert identity(e).spec == f"{__name__}:Shouting"


# -- the record in the log --------------------------------------------------------------------

def test_a_spaces_first_vectors_declare_their_embedder_in_the_same_batch(braid):
    seqs = append_embedded(braid, memories("she likes oat milk flat whites", "allergic to peanuts"))
    assert seqs == [2, 3]
    decl = braid.log.read(1).delta
    assert (decl.kind, decl.braid_id) == ("embedder_declared", "embedders")
    got = recorded_embedder(braid, "default")
    h = embedder("hashing")
    assert (got.space, got.name, got.dim, got.digest, got.spec) == ("default", h.name, 512, h.digest, "hashing")
    assert braidlog.recorded_embedder(braid.log) == got  # the core's, no numpy needed
    assert recorded_embedders(braid) == {"default": (1, got)}
    append_embedded(braid, memories("prefers window seats"))  # the same embedder: no second declaration
    assert [r.seq for r in braid.log.scan_kind("embedder_declared")] == [1]
    assert recorded_embedder(braid.at(1), "default") == got and recorded_embedder(braid, "other") is None


@pytest.mark.parametrize("other", [HashingEmbedder(512, pair_weight=0.7), "hashing:256", f"{__name__}:Shouting"])
def test_vectors_of_another_embedder_are_refused_naming_both_and_nothing_is_written(braid, other):
    append_embedded(braid, memories("she likes oat milk flat whites"))
    head = braid.head()
    with pytest.raises(ValidationError) as e:
        append_embedded(braid, memories("the deploy failed"), other)
    recorded, theirs = embedder("hashing"), embedder(other)
    assert e.value.field == "embedder"
    assert f"space 'default' holds vectors of {recorded.name} ({recorded.dim} dimensions, digest " \
           f"{recorded.digest[:12]}) (load it with 'hashing'); {theirs.name} ({theirs.dim} dimensions, " \
           f"digest {identity(theirs).digest[:12]}) is another embedder" in str(e.value)
    assert braid.head() == head


def test_a_query_through_another_embedder_is_refused_naming_both(braid):
    append_embedded(braid, memories("she likes oat milk flat whites"))
    other = HashingEmbedder(512, pair_weight=0.7)
    with pytest.raises(ValidationError, match="holds vectors of hashing-v1-512 .* is another embedder"):
        Recall(braid, embedder=other).recall("coffee")
    assert Recall(braid, embedder=other).recall([1.0] * 512, 1)  # a vector query needs no embedder


def test_another_space_takes_another_embedder(braid):
    append_embedded(braid, memories("she likes oat milk flat whites"))
    append_embedded(braid, memories("she likes oat milk flat whites"), "hashing:64", space="small")
    assert recorded_embedder(braid, "small").dim == 64
    assert Recall(braid, "small").recall("milk", 1)[0].seq == 4  # the recorded one, loaded by its spec


def test_a_recorded_embedder_that_cannot_be_loaded_says_which_to_pass(braid):
    append_embedded(braid, memories("the deploy failed"), Shouting(), space="own")
    with pytest.raises(ValidationError, match="space 'own' holds vectors of shouting .*, an embedder given "
                       r"as a Python object: pass it \(embedder=...\)"):
        Recall(braid, "own").recall("deploy")
    assert Recall(braid, "own", embedder=Shouting()).recall("deploy!", 1)[0].seq == 2


def test_a_bad_delta_in_an_embedded_batch_is_named_by_its_own_index(braid):
    import msgspec

    deltas = memories("fine", "also fine")
    deltas.append(msgspec.structs.replace(deltas[0], payload={"text": "the same id, another text"}))
    with pytest.raises(ValidationError) as e:
        append_embedded(braid, deltas)
    assert e.value.index == 2 and "appears twice in the batch" in str(e.value)
    assert braid.head().seq == 0  # nothing written, not even the declaration


def test_export_and_import_carry_the_declaration(tmp_path):
    store, out = str(tmp_path / "orig"), tmp_path / "export.jsonl"
    with braidlog.open(store) as b:
        append_embedded(b, memories("she likes oat milk flat whites", "allergic to peanuts"))
    assert main(["--store", store, "export", str(out)]) == 0
    assert main(["--store", str(tmp_path / "copy"), "import", str(out)]) == 0
    with braidlog.open(tmp_path / "copy", readonly=True) as copy, braidlog.LmdbLog(store, readonly=True) as orig:
        assert recorded_embedder(copy) == recorded_embedder(orig) is not None
        with pytest.raises(ValidationError, match="is another embedder"):
            Recall(copy, embedder="hashing:256", directory=False).recall("coffee")


def test_erasing_a_memory_keeps_the_declaration(braid):
    append_embedded(braid, memories("she likes oat milk flat whites") + memories("secret", braid="gone"))
    braid.erase(braid="gone", reason="asked to forget")
    assert recorded_embedder(braid).spec == "hashing"
    assert [h.seq for h in Recall(braid, directory=False).recall("milk", 5)] == [2]


# -- the shell ------------------------------------------------------------------------------------

def run(args, capsys):
    code = main(args)
    out, err = capsys.readouterr()
    return code, out, err


def test_the_shell_takes_a_spec_and_uses_the_recorded_one(tmp_path, capsys):
    store = str(tmp_path / "s")
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps({"braid_id": "me", "kind": "observation", "payload": {"text": t}}) + "\n"
                           for t in ("she likes oat milk flat whites", "allergic to peanuts")))
    assert run(["--store", store, "init"], capsys)[0] == 0
    code, out, err = run(["--store", store, "append", str(src), "--embed", "--embedder", "hashing:128", "--json"],
                         capsys)
    assert code == 0, err
    assert json.loads(out)["seqs"] == [2, 3]
    code, out, err = run(["--store", store, "recall", "oat milk", "--json"], capsys)  # no --embedder: recorded
    assert code == 0, err
    assert json.loads(out)["hits"][0]["seq"] == 2
    code, out, err = run(["--store", store, "recall", "oat milk", "--embedder", "hashing"], capsys)
    assert code == 1 and out == ""
    assert err.startswith("braidlog: error: embedder: space 'default' holds vectors of hashing-v1-128 ")
    assert "hashing-v1-512 (512 dimensions" in err
    code, out, err = run(["--store", store, "append", str(src), "--embed", "--embedder", "hashing"], capsys)
    assert code == 1 and "is another embedder" in err
    code, out, err = run(["--store", store, "append", str(src), "--embedder", "hashing"], capsys)
    assert code != 0 and "--embedder: applies with --embed only" in err
    code, out, err = run(["--store", store, "recall", "x", "--embedder", "nope"], capsys)
    assert code == 1 and "'nope' is not a spec" in err
    with braidlog.open(store, readonly=True) as b:
        assert b.head().seq == 3


def test_fastembed_without_the_model_in_its_cache_is_refused_at_once(tmp_path):
    pytest.importorskip("fastembed", reason="fastembed is the braidlog[fastembed] extra, not in the test extra")
    start = time.monotonic()
    spec = f"fastembed:BAAI/bge-small-en-v1.5@{tmp_path / 'cache'}"
    with pytest.raises(ValidationError) as e:
        embedder(spec)
    assert time.monotonic() - start < 5
    assert str(e.value).startswith(f"embedder: {spec!r}: not in fastembed's cache {tmp_path / 'cache'} (")
    assert "fetch it once where there is network: python -c \"from fastembed import TextEmbedding; " \
           f"TextEmbedding('BAAI/bge-small-en-v1.5', cache_dir='{tmp_path / 'cache'}')\"" in str(e.value)


def test_any_spec_gives_an_embedder_or_a_braidlog_error():
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    schemes = st.sampled_from(["", "hashing", "hashing:", "model2vec:", "model2vec:~", "sentence-transformers:",
                               "fastembed:", "wordllama", "wordllama:", ":", "no_such_module_here:"])

    @settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
    @given(schemes, st.text(max_size=16))
    def check(scheme, rest):
        try:
            e = embedder(scheme + rest)
        except braidlog.BraidlogError:
            return
        assert e.dim >= 1 and isinstance(e.name, str)

    check()


@pytest.mark.parametrize("deltas, space, field", [(None, "default", "deltas"), (5, "default", "deltas"),
                                                  ([1], "default", "deltas"), ([], "", "space"), ([], 5, "space")])
def test_bad_arguments_to_append_embedded_are_typed_errors(braid, deltas, space, field):
    with pytest.raises(ValidationError) as e:
        append_embedded(braid, deltas, space=space)
    assert e.value.field == field and braid.head().seq == 0
