"""Signing keys and the signed formats without a registry: a bad key is refused before anything is
pushed, naming the file or variable and never echoing the key; the formats are byte-stable."""
import base64
import json

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from helpers.inprocess import run_in_process


def pem(key, password: bytes | None = None) -> bytes:
    encryption = serialization.BestAvailableEncryption(password) if password else serialization.NoEncryption()
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption)


def body_of(text: bytes) -> str:
    return b"".join(text.splitlines()[1:-1]).decode()


@pytest.mark.parametrize("key, message", [
    (lambda: pem(ec.generate_private_key(ec.SECP384R1())), "an ECDSA key on secp384r1, not P-256"),
    (lambda: pem(rsa.generate_private_key(public_exponent=65537, key_size=2048)), "not an ECDSA key"),
    (lambda: b"-----BEGIN PRIVATE KEY-----\nbm90IGEga2V5\n-----END PRIVATE KEY-----\n", "not a PEM private key"),
    (lambda: pem(ec.generate_private_key(ec.SECP256R1()), b"secret"), "the key is encrypted"),
])
def test_a_bad_signing_key_is_refused_before_any_push_naming_the_file_never_its_text(workspace, tmp_path, key, message):
    text = key()
    path = tmp_path / "signing.pem"
    path.write_bytes(text)
    proc = run_in_process(["push", "demo", "--to", "127.0.0.1:9/x/y", "--sign", "--key", path], workspace)
    assert proc.returncode == 2, proc.stderr
    assert f"{path}: " in proc.stderr and message in proc.stderr
    assert body_of(text)[:24] not in proc.stdout + proc.stderr
    assert not (workspace / "lockfiles/demo.pushes.json").exists()

    proc = run_in_process(["push", "demo", "--to", "127.0.0.1:9/x/y", "--sign"], workspace,
                   env={"ENGINEBUILD_SIGNING_KEY": text.decode()})  # a CI secret holds the PEM text itself
    assert proc.returncode == 2 and "$ENGINEBUILD_SIGNING_KEY: " in proc.stderr and message in proc.stderr
    assert body_of(text)[:24] not in proc.stdout + proc.stderr


def test_an_encrypted_key_opens_with_its_password_and_the_push_goes_on(workspace, tmp_path):
    path = tmp_path / "signing.pem"
    path.write_bytes(pem(ec.generate_private_key(ec.SECP256R1()), b"secret"))
    proc = run_in_process(["push", "demo", "--to", "127.0.0.1:9/x/y", "--sign", "--key", path], workspace,
                   env={"ENGINEBUILD_SIGNING_KEY_PASSWORD": "secret"})
    # past the key (a key error exits 2): what stops it is the build missing from this store, or (when
    # another test built it) the registry address where nothing listens
    assert proc.returncode == 1 and "encrypted" not in proc.stderr, proc.stderr
    assert "is not built at its current inputs" in proc.stderr or "127.0.0.1:9" in proc.stderr, proc.stderr


@pytest.mark.parametrize("args, message", [
    (["push", "demo", "--to", "127.0.0.1:9/x/y", "--sign"], "--sign needs a key"),
    (["push", "demo", "--to", "127.0.0.1:9/x/y", "--key", "k.pem"], "--key only takes effect with --sign"),
    (["push", "demo", "--to", "127.0.0.1:9/x/y", "--sign", "--no-attach"], "--sign with --no-attach"),
    (["image", "demo", "--sign"], "only take effect with --push"),
    (["verify", "--signature", "127.0.0.1:9/x/y@sha256:" + "0" * 64], "needs the signer's public key"),
    (["verify", "--key", "k.pub", "127.0.0.1:9/x/y@sha256:" + "0" * 64], "--key only takes effect with --signature"),
])
def test_signing_options_that_cannot_work_are_refused(workspace, args, message):
    proc = run_in_process(args, workspace, env={"ENGINEBUILD_SIGNING_KEY": ""})
    assert proc.returncode == 2 and message in proc.stderr, proc.stderr


def test_verify_signature_wants_a_digest_and_a_public_key(workspace, tmp_path):
    public = tmp_path / "cosign.pub"
    public.write_bytes(ec.generate_private_key(ec.SECP256R1()).public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))
    proc = run_in_process(["verify", "--signature", "--key", public, "127.0.0.1:9/x/y:v1"], workspace)
    assert proc.returncode == 2 and "a signature is checked for a digest, not a tag" in proc.stderr
    private = tmp_path / "cosign.key"
    private.write_bytes(pem(ec.generate_private_key(ec.SECP256R1())))
    proc = run_in_process(["verify", "--signature", "--key", private, "127.0.0.1:9/x/y@sha256:" + "0" * 64], workspace)
    assert proc.returncode == 2 and "not a PEM public key" in proc.stderr


def test_the_signed_formats_are_the_documented_bytes_and_deterministic(tmp_path):
    from enginebuild.publish import signformat
    from enginebuild.trust.signkeys import KeyTrust, load_signer

    digest = "sha256:" + "ab" * 32
    assert signformat.simple_signing("ghcr.io/o/img", digest) == (
        b'{"critical":{"identity":{"docker-reference":"ghcr.io/o/img"},"image":{"docker-manifest-digest":"'
        + digest.encode() + b'"},"type":"cosign container image signature"},"optional":null}')
    # DSSE's pre-authentication encoding, the example of its specification
    assert signformat.pae("http://example.com/HelloWorld", b"hello world") == \
        b"DSSEv1 29 http://example.com/HelloWorld 11 hello world"
    key = tmp_path / "k.pem"
    key.write_bytes(pem(ec.generate_private_key(ec.SECP256R1())))
    signer = load_signer(str(key))
    payload = signformat.statement(signformat.subjects("r/i", digest, {"linux/arm64": "sha256:" + "cd" * 32}),
                                   signformat.SBOM_PREDICATE, {"bomFormat": "CycloneDX"})
    first, second = signformat.bundle(signer, payload), signformat.bundle(signer, payload)
    assert first == second  # RFC 6979: the same push attaches the same bytes
    statement = signformat.open_bundle(first, KeyTrust(signer.public))
    assert statement.digests == {digest, "sha256:" + "cd" * 32}
    document = json.loads(first)
    document["dsseEnvelope"]["payload"] = base64.b64encode(payload.replace(b"CycloneDX", b"CycloneDx")).decode()
    with pytest.raises(signformat.Refused, match="signature does not verify"):
        signformat.open_bundle(json.dumps(document).encode(), KeyTrust(signer.public))
    assert "PRIVATE" not in repr(signer) and signer.public.keyid[:12] in repr(signer)


@pytest.mark.parametrize("args", [
    ["verify", "--signature", "--key", "KEY", "127.0.0.1:9/x/y@sha256:" + "0" * 64],
    ["sign", "--key", "PRIVATE", "127.0.0.1:9/x/y@sha256:" + "0" * 64],
])
def test_verbs_that_read_an_image_by_digest_run_outside_a_recipe_repository(tmp_path, args):
    """A Spark that only pulls images has no checkout: checking (or signing) a pushed image needs none."""
    key = ec.generate_private_key(ec.SECP256R1())
    (tmp_path / "cosign.pub").write_bytes(key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))
    (tmp_path / "cosign.key").write_bytes(pem(key))
    args = [{"KEY": tmp_path / "cosign.pub", "PRIVATE": tmp_path / "cosign.key"}.get(a, a) for a in args]
    folder = tmp_path / "anywhere"
    folder.mkdir()
    proc = run_in_process(args, folder)
    assert "no recipe repository here" not in proc.stderr, proc.stderr
    assert proc.returncode == 1 and "127.0.0.1:9" in proc.stdout + proc.stderr, proc.stderr  # as far as the registry
    plan = run_in_process(["plan", "demo"], folder)  # a verb that reads images/ still says where it looked
    assert plan.returncode == 2 and "no recipe repository here" in plan.stderr
