"""Verifiable log: roots and RFC 6962 proofs of the Merkle tree over the records' committed
forms, signed C2SP checkpoints, tlog-proof files, and proofs of past states. docs/proofs.md says
what each proves.

``braidlog.proofs.verify`` checks all of it without a store (stdlib, cryptography):
vendor that one file. Signing and checking signatures need ``pip install '.[proofs]'``.
"""

from .checkpoint import Checkpoint, check_checkpoint, check_notes, issue, open_note, sign_note, tlog_proof
from .keys import SigningKey, generate, parse_verifier_key, read_key, write_key
from .prove import ConsistencyProof, InclusionProof, check_tree_extends, consistency_proof, inclusion_proof, root
from .state import StateProof, refold, state_proof
from .verify import VerifierKey

__all__ = [
    "root", "inclusion_proof", "consistency_proof", "InclusionProof", "ConsistencyProof",
    "check_tree_extends", "StateProof", "state_proof", "refold",
    "SigningKey", "generate", "read_key", "write_key", "VerifierKey", "parse_verifier_key",
    "Checkpoint", "issue", "sign_note", "check_notes", "open_note", "check_checkpoint",
    "tlog_proof",
]
