"""Forgery is not quiet: a manifest whose `training` was edited and re-digested with the project's own
functions is refused (the run's `stages` row disagrees), and with `--key` only a manifest signed by the
trusted key verifies; `curate train` refuses what `verify` refuses."""
from __future__ import annotations

import json

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from curation.commands.cli import main
from curation.commands.run import run
from curation.errors import UsageError, VerifyError
from curation.mixture.manifest_schema import field_digests
from curation.mixture.merkle import manifest_leaves, merkle_root
from curation.mixture.signing import sign_manifest, signature_path
from curation.mixture.verify import verify_manifest
from tests.conftest import english_doc, make_recipe, write_jsonl


def _keys(folder, name):
    key = Ed25519PrivateKey.generate()
    priv, pub = folder / f"{name}.pem", folder / f"{name}.pub"
    priv.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                       serialization.NoEncryption()))
    pub.write_bytes(key.public_key().public_bytes(serialization.Encoding.PEM,
                                                  serialization.PublicFormat.SubjectPublicKeyInfo))
    return key, priv, pub


def forge_goldfish(manifest) -> None:
    """The issue's forgery: edit `training.goldfish`, then recompute `field_digests` and `merkle_root` with
    `curation.mixture.manifest_schema.field_digests` and `curation.mixture.merkle`."""
    m = json.loads(manifest.read_text())
    m["training"]["goldfish"] = {"k": 2, "h": 1}
    m["field_digests"] = field_digests(m)
    m["merkle_root"] = merkle_root(manifest_leaves(m, m["field_digests"]))
    manifest.write_text(json.dumps(m, indent=1))


@pytest.fixture(scope="module")
def signed(tmp_path_factory):
    """A small run signed with a key; returns (output folder, public key file, another key's files)."""
    tmp = tmp_path_factory.mktemp("signed")
    _, priv, pub = _keys(tmp, "run")
    other = _keys(tmp, "other")
    docs = [{"id": str(i), "text": english_doc(i)} for i in range(6)]
    recipe = make_recipe(tmp, {"s": [write_jsonl(tmp / "in.jsonl", docs)]})
    res = run(recipe, tmp / "out", progress=False, sign=priv)
    assert res.manifests
    return tmp / "out", pub, other


def _manifest(out):
    return sorted((out / "manifests").glob("*.json"))[0]


@pytest.mark.slow
def test_a_signed_manifest_verifies_with_its_key(signed, capsys):
    out, pub, _ = signed
    manifest = _manifest(out)
    assert signature_path(manifest).is_file()
    lines = verify_manifest(manifest, key=pub)
    assert lines[-1].startswith("signature: ed25519 by ")
    assert "signature not checked" in verify_manifest(manifest)[-1]      # without a key: said, not proven
    assert main(["verify", str(manifest), "--key", str(pub)]) == 0
    assert "ok  signature: ed25519" in capsys.readouterr().out


@pytest.mark.slow
def test_the_forged_goldfish_manifest_is_refused(signed, tmp_path, capsys):
    import shutil
    out, pub, _ = signed
    copy = tmp_path / "out"
    shutil.copytree(out, copy, symlinks=True)
    manifest = _manifest(copy)
    main(["verify", "--relocate", str(manifest)])
    forge_goldfish(manifest)
    with pytest.raises(VerifyError, match=r"training = .*goldfish.* in the manifest, but the run's recipe .*says "
                                          r".*the manifest's training settings are not its run's") as err:
        verify_manifest(manifest)
    assert "digest differs" not in str(err.value) and "merkle root" not in str(err.value)   # digests were forged too
    capsys.readouterr()
    assert main(["verify", str(manifest)]) != 0
    assert "not its run's" in capsys.readouterr().err


@pytest.mark.slow
def test_a_manifest_signed_by_another_key_or_unsigned_is_refused(signed, tmp_path):
    import shutil
    out, pub, (other_key, _, other_pub) = signed
    copy = tmp_path / "out"
    shutil.copytree(out, copy, symlinks=True)
    manifest = _manifest(copy)
    verify_manifest(manifest, check_location=False, key=pub)
    sign_manifest(manifest, other_key)                 # a forger's own key
    with pytest.raises(VerifyError, match=r"not valid for the given public key"):
        verify_manifest(manifest, check_location=False, key=pub)
    verify_manifest(manifest, check_location=False, key=other_pub)    # it is that key's signature
    sig = json.loads(signature_path(manifest).read_text())
    sig["merkle_root"] = "0" * 64
    signature_path(manifest).write_text(json.dumps(sig))
    with pytest.raises(VerifyError, match=r"is not the one that was signed"):
        verify_manifest(manifest, check_location=False, key=other_pub)
    signature_path(manifest).unlink()
    with pytest.raises(VerifyError, match=r"not signed .*--sign KEY"):
        verify_manifest(manifest, check_location=False, key=pub)
    with pytest.raises(UsageError, match=r"--key .*: not a PEM public key"):
        verify_manifest(manifest, check_location=False, key=manifest)


def test_a_bad_signing_key_stops_before_any_work(tmp_path, capsys):
    recipe = make_recipe(tmp_path, {"s": [write_jsonl(tmp_path / "in.jsonl", [{"id": "1", "text": english_doc(1)}])]})
    (tmp_path / "key.pem").write_text("not a key")
    assert main(["run", str(recipe), "--out", str(tmp_path / "out"), "--sign", str(tmp_path / "key.pem"),
                 "--quiet"]) == 2
    assert "not an unencrypted PEM private key" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_an_unsigned_rerun_removes_the_old_signature(signed, tmp_path):
    import shutil
    out, _, _ = signed
    tmp = tmp_path
    docs = [{"id": str(i), "text": english_doc(i)} for i in range(6)]
    recipe = make_recipe(tmp, {"s": [write_jsonl(tmp / "in.jsonl", docs)]})
    shutil.copytree(out, tmp / "out", symlinks=True)
    run(recipe, tmp / "out", progress=False)
    assert not list((tmp / "out" / "manifests").glob("*.sig"))
