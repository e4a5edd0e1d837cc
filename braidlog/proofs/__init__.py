"""Verifiable log: roots and RFC 9162 proofs of the Merkle tree over the records, signed C2SP
checkpoints, and the proofs of past states. docs/proofs.md says what each proves.

``verify`` checks all of it without a store (stdlib, blake3, cryptography): vendor that one file.
"""

from .prove import ConsistencyProof, InclusionProof, check_tree_extends, consistency_proof, inclusion_proof, root

__all__ = ["root", "inclusion_proof", "consistency_proof", "InclusionProof", "ConsistencyProof",
           "check_tree_extends"]
