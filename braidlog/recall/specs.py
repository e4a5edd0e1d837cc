"""Embedder specs: one string names an embedder everywhere one is taken (Python, the command
line, the MCP server, LangGraph's store).

==================================  ==========================================================
``hashing`` (``hashing:DIM``)       the offline hashing embedder (the default; no model)
``model2vec:NAME_OR_DIR``           a model2vec ``StaticModel`` (``braidlog[model2vec]``)
``sentence-transformers:NAME_OR_DIR``  a ``SentenceTransformer`` (``braidlog[sentence-transformers]``)
``fastembed:NAME`` (``NAME@CACHE``)  a fastembed ``TextEmbedding`` from its cache directory
                                    (``braidlog[fastembed]``; default cache: ``$FASTEMBED_CACHE_PATH``)
``wordllama`` (``wordllama:DIM``)   WordLlama's l2_supercat weights, shipped in its wheel
``module:attribute``                your own object (or a class or function giving one) with
                                    ``name``, ``dim`` and ``embed(texts)``
==================================  ==========================================================

Hazards first: every model loads from the local disk only. A directory is read as it is; a
name is looked up in the Hugging Face cache with downloads off (each library's offline switch
set while it loads: ``HF_HUB_OFFLINE``, ``TRANSFORMERS_OFFLINE``, ``local_files_only``), so a
model that is not there is an error at once, naming the spec and the command that fetches it,
never minutes of retries. Loading a ``module:attribute`` runs that module's code.

Each embedder made here carries ``spec`` (what loads it again) and ``digest`` (blake3 of its
weight files, or of its configuration), which the log records with a space's first vectors
(braidlog.kind_schema, ``recorded_embedder``).
"""

from __future__ import annotations

import contextlib
import importlib
import inspect
import os
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import blake3
import numpy as np

from ..errors import BraidlogError, MissingDependency, ValidationError
from .embedder import Embedder, HashingEmbedder, default_embedder

__all__ = ["embedder", "ENV", "SCHEMES", "Model2VecEmbedder", "SentenceTransformerEmbedder",
           "FastEmbedEmbedder", "WordLlamaEmbedder", "directory_digest"]

#: The environment variable that names the default embedder spec (default: hashing).
ENV = "BRAIDLOG_EMBEDDER"
SCHEMES = ("hashing", "model2vec", "sentence-transformers", "fastembed", "wordllama")
_HELP = ("an embedder spec is hashing, hashing:DIM, model2vec:NAME_OR_DIR, sentence-transformers:NAME_OR_DIR, "
         "fastembed:NAME, wordllama or module:attribute")

_loaded: dict[str, Embedder] = {}
_lock = threading.Lock()


def embedder(spec: str | Embedder | None = None) -> Embedder:
    """The embedder ``spec`` names (see the module doc); None: ``$BRAIDLOG_EMBEDDER``, else
    the hashing embedder. An embedder object is returned as it is. A spec loads once per process.

    Raises ValidationError (a bad spec, a model that is not on this machine) or
    MissingDependency (its library is not installed), each naming the spec and the remedy."""
    if spec is None:
        spec = os.environ.get(ENV, "").strip() or "hashing"
    if not isinstance(spec, str):
        if isinstance(spec, Embedder):
            return spec
        raise ValidationError("embedder", f"must be a spec string or an object with name, dim and "
                              f"embed(texts), not {type(spec).__name__}")
    spec = spec.strip()
    with _lock:
        got = _loaded.get(spec)
        if got is None:
            got = _loaded[spec] = _load(spec)
    return got


def _load(spec: str) -> Embedder:
    scheme, sep, rest = spec.partition(":")
    if scheme == "hashing":
        return _hashing(rest if sep else "")
    if scheme == "wordllama":
        return WordLlamaEmbedder(_dim_of(spec, rest) if sep else None)
    if not sep or not rest:
        raise ValidationError("embedder", f"{spec!r} is not a spec: {_HELP}")
    if scheme == "model2vec":
        return Model2VecEmbedder(rest)
    if scheme in ("sentence-transformers", "sentence_transformers"):
        return SentenceTransformerEmbedder(rest)
    if scheme == "fastembed":
        name, at, cache = rest.partition("@")
        return FastEmbedEmbedder(name, cache if at else None)
    return _object(spec, scheme, rest)


def _dim_of(spec: str, text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise ValidationError("embedder", f"{spec!r}: {text!r} is not a dimension (an int)") from None


def _hashing(rest: str) -> Embedder:
    if not rest:
        return default_embedder()
    return HashingEmbedder(_dim_of(f"hashing:{rest}", rest))


def _object(spec: str, module: str, attribute: str) -> Embedder:
    try:
        obj: Any = importlib.import_module(module)
    except ImportError as e:
        raise ValidationError("embedder", f"{spec!r}: cannot import module {module!r} ({e}); "
                              f"{_HELP}") from None
    except Exception as e:  # the module's own code failed: say whose
        raise ValidationError("embedder", f"{spec!r}: importing {module!r} failed: {type(e).__name__}: {e}") from e
    for part in attribute.split("."):
        if not hasattr(obj, part):
            raise ValidationError("embedder", f"{spec!r}: {module!r} has no attribute {attribute!r}")
        obj = getattr(obj, part)
    if isinstance(obj, type) or not isinstance(obj, Embedder) and callable(obj):
        try:
            obj = obj()
        except BraidlogError:
            raise
        except Exception as e:
            raise ValidationError("embedder", f"{spec!r}: calling {attribute} failed: {type(e).__name__}: {e}") from e
    if not isinstance(obj, Embedder):
        raise ValidationError("embedder", f"{spec!r} gives {type(obj).__name__}, which has no name, dim "
                              "and embed(texts): give an embedder, or a class or function that makes one")
    if not getattr(obj, "spec", None):
        with contextlib.suppress(AttributeError, TypeError):
            obj.spec = spec  # type: ignore[attr-defined]  # named when the object allows it
    return obj


# -- loading from the local disk only ------------------------------------------------------------

_OFFLINE = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
_env_lock = threading.Lock()


@contextlib.contextmanager
def offline() -> Iterator[None]:
    """Hugging Face's offline switches on while a model loads (and huggingface_hub's constant,
    read once at its import), as they were after."""
    with _env_lock:
        saved = {k: os.environ.get(k) for k in _OFFLINE}
        os.environ.update(_OFFLINE)
        constants: Any = None
        try:
            constants = importlib.import_module("huggingface_hub.constants")
        except ImportError:
            pass
        was = getattr(constants, "HF_HUB_OFFLINE", None)
        if constants is not None:
            constants.HF_HUB_OFFLINE = True
        try:
            yield
        finally:
            if constants is not None:
                constants.HF_HUB_OFFLINE = was
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v


def local_model(spec: str, name: str) -> Path:
    """The directory of model ``name``: itself if it is one, else its snapshot in the Hugging
    Face cache, looked up with downloads off. ValidationError (at once) when it is in neither."""
    try:
        path = Path(name).expanduser()
        is_dir, exists = path.is_dir(), path.exists()
    except (RuntimeError, ValueError, OSError) as e:  # no home for ~, a name the system refuses
        raise ValidationError("embedder", f"{spec!r}: {name!r} is not a path here ({e})") from None
    if is_dir:
        return path
    if exists:
        raise ValidationError("embedder", f"{spec!r}: {name} is a file; give the model's directory")
    looks_local = name.startswith((".", "/", "~")) or name.count("/") > 1
    found = None
    if not looks_local:
        snapshot_download: Any = None
        try:
            from huggingface_hub import snapshot_download
        except ImportError:
            pass
        if snapshot_download is not None:
            with offline():
                try:
                    found = snapshot_download(name, local_files_only=True)
                except Exception:  # not cached (LocalEntryNotFoundError), or not a repo id
                    found = None
    if found is None:
        fetch = "" if looks_local else (f"; fetch it once where there is network: `hf download {name}` "
                                        f"(it lands in the Hugging Face cache), or save it to a directory "
                                        f"and give that")
        raise ValidationError("embedder", f"{spec!r}: no directory {name!r} on this machine"
                              + ("" if looks_local else " and no such model in the Hugging Face cache") + fetch)
    return Path(str(found))


def directory_digest(path: Path) -> str:
    """blake3 over the names and bytes of a model directory's files (README and dot files left
    out: they describe the model, they are not it)."""
    h = blake3.blake3(max_threads=blake3.blake3.AUTO)
    for f in sorted(p for p in path.rglob("*") if p.is_file()):
        rel = f.relative_to(path).as_posix()
        if rel.startswith(".") or "/." in rel or rel.lower() in ("readme.md", "modelcard.md"):
            continue
        h.update(rel.encode() + b"\0")
        if f.stat().st_size:
            h.update_mmap(f)
        h.update(b"\0")
    return h.hexdigest()


def _need(module: str, extra: str, spec: str) -> Any:
    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise MissingDependency(f"embedder {spec!r} needs {module}, which is not installed ({e}); "
                                f"install it with: pip install '.[{extra}]'") from None


def _rows(values: Any, n: int, dim: int, who: str) -> np.ndarray:
    out = np.asarray(values, dtype=np.float32)
    if out.shape != (n, dim):
        raise ValidationError("embedder", f"{who} returned shape {out.shape}, expected ({n}, {dim})")
    return out


class _Loaded:
    """What the model embedders share: name, dim, spec, digest; ``embed`` is ``embed_documents``."""

    name: str
    dim: int
    spec: str
    digest: str

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.spec!r}, dim={self.dim})"

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return self.embed_documents(texts)

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        raise NotImplementedError

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self.embed_documents(texts)


class Model2VecEmbedder(_Loaded):
    """A model2vec ``StaticModel`` loaded from a directory (or the Hugging Face cache) through
    model2vec's own ``StaticModel.from_pretrained``."""

    def __init__(self, name_or_dir: str) -> None:
        self.spec = f"model2vec:{name_or_dir}"
        model2vec = _need("model2vec", "model2vec", self.spec)
        path = local_model(self.spec, name_or_dir)
        with offline():
            try:
                load = model2vec.StaticModel.from_pretrained
                # force_download (model2vec >= 0.5) is moot for a directory; older ones lack it
                self.model = (load(path, force_download=False)
                              if "force_download" in inspect.signature(load).parameters else load(path))
            except (OSError, ValueError, KeyError) as e:
                raise ValidationError("embedder", f"{self.spec!r}: {path} is not a model2vec model "
                                      f"({type(e).__name__}: {e})") from None
        self.dim = int(self.model.dim)
        self.name = f"model2vec:{path.name}"
        self.digest = directory_digest(path)

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        return _rows(self.model.encode(list(texts), show_progress_bar=False), len(texts), self.dim, self.spec)


class SentenceTransformerEmbedder(_Loaded):
    """A ``SentenceTransformer`` loaded from a directory (or the Hugging Face cache) with
    ``local_files_only``; queries go through ``encode_query`` and documents through
    ``encode_document`` where the library has them (asymmetric models use their prompts)."""

    def __init__(self, name_or_dir: str) -> None:
        self.spec = f"sentence-transformers:{name_or_dir}"
        st = _need("sentence_transformers", "sentence-transformers", self.spec)
        path = local_model(self.spec, name_or_dir)
        with offline():
            try:
                self.model = st.SentenceTransformer(str(path), device="cpu", local_files_only=True)
            except (OSError, ValueError, KeyError) as e:
                raise ValidationError("embedder", f"{self.spec!r}: {path} is not a sentence-transformers "
                                      f"model ({type(e).__name__}: {e})") from None
        get_dim = (getattr(self.model, "get_sentence_embedding_dimension", None)
                   or getattr(self.model, "get_embedding_dimension", None))
        dim = get_dim() if get_dim is not None else None
        self.dim = int(dim) if dim else int(np.asarray(self.model.encode(["dim"])).shape[1])
        self.name = f"sentence-transformers:{path.name}"
        self.digest = directory_digest(path)

    def _encode(self, how: str, texts: Sequence[str]) -> np.ndarray:
        fn = getattr(self.model, how, None) or self.model.encode
        return _rows(fn(list(texts), convert_to_numpy=True, show_progress_bar=False), len(texts), self.dim, self.spec)

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        return self._encode("encode_document", texts)

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self._encode("encode_query", texts)


class FastEmbedEmbedder(_Loaded):
    """A fastembed ``TextEmbedding`` from its cache directory (``cache``, else
    ``$FASTEMBED_CACHE_PATH``, else fastembed's default) with ``local_files_only``; queries
    through ``query_embed``, documents through ``passage_embed``."""

    def __init__(self, name: str, cache: str | None = None) -> None:
        self.spec = f"fastembed:{name}" + (f"@{cache}" if cache else "")
        fastembed = _need("fastembed", "fastembed", self.spec)
        cache = cache or os.environ.get("FASTEMBED_CACHE_PATH") or None
        with offline():
            try:
                self.model = fastembed.TextEmbedding(model_name=name, cache_dir=cache, local_files_only=True)
            except Exception as e:  # fastembed raises plain ValueError/ OSError subclasses
                raise ValidationError("embedder", f"{self.spec!r}: not in fastembed's cache "
                                      f"{cache or '(its default)'} ({type(e).__name__}: {e}); fetch it once "
                                      "where there is network: python -c \"from fastembed import TextEmbedding; "
                                      f"TextEmbedding('{name}'" + (f", cache_dir='{cache}'" if cache else "")
                                      + ")\"") from None
        self.dim = int(np.asarray(next(iter(self.model.embed(["dim"])))).shape[0])
        self.name = f"fastembed:{name}"
        where = getattr(self.model.model, "_model_dir", None) if hasattr(self.model, "model") else None
        self.digest = (directory_digest(Path(where)) if where and Path(where).is_dir()
                       else blake3.blake3(f"fastembed\0{name}\0{self.dim}".encode()).hexdigest())

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        embed = getattr(self.model, "passage_embed", None) or self.model.embed
        return _rows(list(embed(list(texts))), len(texts), self.dim, self.spec)

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        embed = getattr(self.model, "query_embed", None) or self.model.embed
        return _rows(list(embed(list(texts))), len(texts), self.dim, self.spec)


class WordLlamaEmbedder(_Loaded):
    """WordLlama's l2_supercat model (256 dimensions; ``dim`` truncates it, as its matryoshka
    training allows: 64, 128 or 256), from the weights and tokenizer its wheel ships: no
    download, ever."""

    def __init__(self, dim: int | None = None) -> None:
        self.spec = "wordllama" + (f":{dim}" if dim else "")
        if dim is not None and dim not in (64, 128, 256):
            raise ValidationError("embedder", f"{self.spec!r}: dim must be 64, 128 or 256, not {dim}")
        wordllama = _need("wordllama", "wordllama", self.spec)
        safetensors = _need("safetensors", "wordllama", self.spec)
        from wordllama.inference import WordLlamaInference

        root = Path(wordllama.__file__).parent
        weights = root / "weights" / "l2_supercat_256.safetensors"
        tokenizer = root / "tokenizers" / "l2_supercat_tokenizer_config.json"
        if not weights.is_file() or not tokenizer.is_file():
            raise ValidationError("embedder", f"{self.spec!r}: this wordllama ({root}) does not ship "
                                  "l2_supercat's weights and tokenizer; pip install 'braidlog[wordllama]'")
        with safetensors.safe_open(str(weights), framework="np", device="cpu") as f:
            table = f.get_tensor("embedding.weight")
        if dim is not None:
            table = table[:, :dim]
        self.model = WordLlamaInference(table, wordllama.WordLlama.load_tokenizer(tokenizer), binary=False)
        self.dim = int(table.shape[1])
        self.name = f"wordllama:l2_supercat-{self.dim}"
        h = blake3.blake3(max_threads=blake3.blake3.AUTO)
        h.update_mmap(weights)
        h.update_mmap(tokenizer)
        h.update(f"\0{self.dim}".encode())
        self.digest = h.hexdigest()

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return _rows(self.model.embed(list(texts), norm=True), len(texts), self.dim, self.spec)

