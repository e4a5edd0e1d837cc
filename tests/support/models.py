"""Small real models the tests build themselves, saved to a directory and loaded back through
each library's own loading code: no network, no mock."""

from __future__ import annotations

from pathlib import Path

#: Words grouped by meaning: a word's vector is its group's direction plus a little of its own,
#: so a model built from them matches "espresso" to "coffee" with no word in common.
GROUPS = {
    "coffee": "coffee espresso latte cappuccino flat white oat milk barista caffeine",
    "allergy": "allergy allergic allergies peanuts peanut shellfish nuts intolerant",
    "pets": "pets pet dog dogs cat cats puppy kitten terrier",
    "deploy": "deploy deployment release rollout canary rollback failed outage",
    "travel": "flight flights window aisle seat seats airline travel trip",
}


def model2vec_dir(path: Path, *, dim: int = 32, seed: int = 7) -> Path:
    """A model2vec ``StaticModel`` over ``GROUPS``' words (a WordLevel tokenizer, lower-cased,
    split on whitespace and punctuation), saved with its own ``save_pretrained``; the directory."""
    import numpy as np
    from model2vec import StaticModel
    from tokenizers import Tokenizer, normalizers, pre_tokenizers
    from tokenizers.models import WordLevel

    rng = np.random.default_rng(seed)
    vocab = {"[PAD]": 0, "[UNK]": 1}
    rows = [np.zeros(dim), np.zeros(dim)]
    for words in GROUPS.values():
        base = rng.normal(size=dim)
        for w in words.split():
            if w not in vocab:
                vocab[w] = len(vocab)
                rows.append(base + 0.3 * rng.normal(size=dim))
    tokenizer = Tokenizer(WordLevel(vocab, unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.Lowercase()
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    model = StaticModel(np.asarray(rows, dtype=np.float32), tokenizer, config={"normalize": False})
    model.save_pretrained(path)
    return path


def sentence_transformers_dir(path: Path, *, dim: int = 32, seed: int = 7) -> Path:
    """A tiny sentence-transformers model: a one-layer BERT initialised here (torch's seeded
    random weights) over ``GROUPS``' words, mean pooling, saved with the library's own ``save``;
    the directory. Its vectors mean nothing: it proves the loading and embedding paths."""
    import torch
    from sentence_transformers import SentenceTransformer, models
    from transformers import BertConfig, BertModel, BertTokenizerFast

    words = sorted({w for group in GROUPS.values() for w in group.split()})
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *words]
    raw = path.parent / f"{path.name}-transformer"
    raw.mkdir(parents=True, exist_ok=True)
    (raw / "vocab.txt").write_text("\n".join(vocab) + "\n")
    BertTokenizerFast(vocab_file=str(raw / "vocab.txt"), do_lower_case=True).save_pretrained(str(raw))
    torch.manual_seed(seed)
    config = BertConfig(vocab_size=len(vocab), hidden_size=dim, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=2 * dim, max_position_embeddings=64)
    BertModel(config).save_pretrained(str(raw))
    word = models.Transformer(str(raw), max_seq_length=32)
    pool = models.Pooling(word.get_word_embedding_dimension(), pooling_mode="mean")
    SentenceTransformer(modules=[word, pool], device="cpu").save(str(path))
    return path
