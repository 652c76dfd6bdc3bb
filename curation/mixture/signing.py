"""Optional ed25519 signatures of manifests: `curate run --sign KEY`, `curate verify --key PUB`.

Without a key, `verify` proves that a manifest, the files it names and the ledger agree with each other
(every digest recomputes, the training settings are the run's): an edit of one of them is refused, but
whoever can rewrite all of them consistently (the manifest and the ledger's Parquet and DuckDB tables) can
forge a run. A signature closes that: it is made over the stage's Merkle root, which verify recomputes
from every field, file and ledger table, so a valid signature by a key the trainer trusts proves the
manifest is what that key's holder's run wrote.

The signature is a file next to the manifest, `manifests/<stage>.sig` (JSON: format, stage, merkle_root,
the signer's raw public key and the signature, hex), so signing changes no manifest byte and an unsigned
run writes the same manifests as a signed one. Keys are PEM files: a PKCS#8 private key (`openssl genpkey
-algorithm ed25519 -out key.pem`) and its SubjectPublicKeyInfo public key (`openssl pkey -in key.pem
-pubout -out key.pub`).
"""
from __future__ import annotations

import json
from pathlib import Path

from curation.core.atomic import atomic_write_json
from curation.errors import UsageError, VerifyError

FORMAT = "curate-signature/1"


def signature_path(manifest: Path) -> Path:
    return Path(manifest).with_suffix(".sig")


def _message(stage: str, root: str) -> bytes:
    # domain-separated, so a signature of a curate manifest is never valid for anything else
    return f"{FORMAT}\n{stage}\n{root}\n".encode()


def _raw(public_key) -> bytes:
    from cryptography.hazmat.primitives import serialization
    return public_key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def load_private_key(path: Path):
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    try:
        key = serialization.load_pem_private_key(Path(path).read_bytes(), password=None)
    except FileNotFoundError:
        raise UsageError(f"--sign {path}: no such key file") from None
    except (ValueError, TypeError) as e:
        raise UsageError(f"--sign {path}: not an unencrypted PEM private key ({e}); make one with "
                         f"`openssl genpkey -algorithm ed25519 -out {path}`") from None
    if not isinstance(key, Ed25519PrivateKey):
        raise UsageError(f"--sign {path}: a {type(key).__name__}, not an ed25519 key; make one with "
                         f"`openssl genpkey -algorithm ed25519 -out {path}`")
    return key


def load_public_key(path: Path):
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    try:
        key = serialization.load_pem_public_key(Path(path).read_bytes())
    except FileNotFoundError:
        raise UsageError(f"--key {path}: no such key file") from None
    except (ValueError, TypeError) as e:
        raise UsageError(f"--key {path}: not a PEM public key ({e}); export one with "
                         f"`openssl pkey -in KEY.pem -pubout -out {path}`") from None
    if not isinstance(key, Ed25519PublicKey):
        raise UsageError(f"--key {path}: a {type(key).__name__}, not an ed25519 public key")
    return key


def sign_manifest(manifest: Path, key) -> Path:
    """Write `manifest`'s signature file with the private `key`; returns its path."""
    m = json.loads(Path(manifest).read_text())
    sig = key.sign(_message(m["stage"], m["merkle_root"]))
    path = signature_path(manifest)
    atomic_write_json(path, {"format": FORMAT, "stage": m["stage"], "merkle_root": m["merkle_root"],
                             "public_key": _raw(key.public_key()).hex(), "signature": sig.hex()})
    return path


def remove_signatures(mdir: Path) -> None:
    """An unsigned run leaves no signature of an earlier run next to its manifests."""
    for old in Path(mdir).glob("*.sig"):
        old.unlink()


def check_signature(manifest: Path, m: dict, public_key) -> str:
    """Refuse (VerifyError) unless `manifest` carries a valid signature of its Merkle root by `public_key`
    (the caller has checked that the root recomputes); returns what was proven."""
    from cryptography.exceptions import InvalidSignature

    path = signature_path(manifest)
    if not path.is_file():
        raise VerifyError(f"{manifest}: not signed ({path} is missing); a trainer that requires a signature "
                          f"refuses it: run `curate run RECIPE --sign KEY`")
    try:
        sig = json.loads(path.read_text())
        signature = bytes.fromhex(sig["signature"])
        signed_root = sig["merkle_root"]
    except (ValueError, KeyError, TypeError) as e:
        raise VerifyError(f"{path}: not a curate signature file ({e})") from None
    if signed_root != m["merkle_root"]:
        raise VerifyError(f"{path}: signs merkle root {signed_root}, the manifest's is {m['merkle_root']}: "
                          f"the manifest is not the one that was signed")
    try:
        public_key.verify(signature, _message(m["stage"], m["merkle_root"]))
    except InvalidSignature:
        raise VerifyError(f"{path}: the signature is not valid for the given public key (another signer, or "
                          f"the manifest's stage or root was changed)") from None
    return f"signature: ed25519 by {_raw(public_key).hex()[:16]}... over merkle root {m['merkle_root'][:16]}..."
