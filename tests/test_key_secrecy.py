"""A private key given in a variable is never printed, whatever form it arrives in: every verb that
reads ENGINEBUILD_SIGNING_KEY or ENGINEBUILD_CACHE_KEY is run with each malformed form a CI secret
takes (the body without its armour, cut short, wrapped, garbled inside its armour, a path that does
not exist), and no 16 characters of the key's body appear in anything it prints. A key whose armour
was lost but whose body is whole is read as the key it is; a device named as a key file is refused
without reading it to its end."""
from __future__ import annotations

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from helpers.inprocess import run_in_process

NO_DOCKER = {"ENGINEBUILD_DOCKER": "/bin/false", "DOCKER_HOST": "unix:///nonexistent.sock"}
DIGEST = "sha256:" + "1" * 64


def pkcs8(key) -> str:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption()).decode()


def body(pem: str) -> str:
    return "".join(pem.strip().splitlines()[1:-1])


def malformed(pem: str) -> dict[str, str]:
    """The forms a key's text takes when a secret store or a copy mangles it; none is a readable key
    of the kind wanted."""
    lines = pem.strip().splitlines()
    whole = body(pem)
    return {
        "cut short": whole[:-7],
        "cut short, wrapped": "\n".join(lines[1:-1])[:-7],
        "garbled inside its armour": "\n".join([lines[0], whole[:20] + "!!" + whole[22:], lines[-1]]),
        "as a path that does not exist": "/run/secrets/" + whole,
        "quoted": f'"{whole}"',
    }


def leaked(key_body: str, printed: str) -> list[str]:
    flat = "".join(printed.split())
    return [key_body[i:i + 16] for i in range(0, len(key_body) - 16) if key_body[i:i + 16] in flat]


SIGNING_VERBS = {
    "push --sign": ["push", "demo", "--to", "127.0.0.1:9/x/y", "--sign"],
    "sign": ["sign", f"127.0.0.1:9/x/y@{DIGEST}"],
    "image --push --sign": ["image", "demo", "--push", "--to", "127.0.0.1:9/x/y", "--sign"],
}
CACHE_VERBS = {
    "doctor": ["doctor"],
    "image --cache": ["image", "demo", "--cache", "127.0.0.1:9/cache"],
    "cache push": ["image", "demo", "--cache", "127.0.0.1:9/cache", "--no-load"],
}

P256 = pkcs8(ec.generate_private_key(ec.SECP256R1()))
ED25519 = pkcs8(Ed25519PrivateKey.generate())


@pytest.mark.parametrize("form", list(malformed(P256)))
@pytest.mark.parametrize("verb", list(SIGNING_VERBS))
def test_no_verb_prints_a_malformed_signing_key(workspace, tmp_path, verb, form):
    value = malformed(P256)[form]
    proc = run_in_process(SIGNING_VERBS[verb], workspace,
                          env={**NO_DOCKER, "ENGINEBUILD_HOME": str(tmp_path / "home"), "ENGINEBUILD_SIGNING_KEY": value})
    assert proc.returncode != 0
    assert "ENGINEBUILD_SIGNING_KEY" in proc.stderr, proc.stderr
    assert leaked(body(P256), proc.stdout + proc.stderr) == [], proc.stderr


@pytest.mark.parametrize("form", list(malformed(ED25519)))
@pytest.mark.parametrize("verb", list(CACHE_VERBS))
def test_no_verb_prints_a_malformed_cache_key(workspace, tmp_path, verb, form):
    value = malformed(ED25519)[form]
    proc = run_in_process(CACHE_VERBS[verb], workspace,
                          env={**NO_DOCKER, "ENGINEBUILD_HOME": str(tmp_path / "home"), "ENGINEBUILD_CACHE_KEY": value})
    assert "ENGINEBUILD_CACHE_KEY" in proc.stdout + proc.stderr, proc.stdout + proc.stderr
    assert leaked(body(ED25519), proc.stdout + proc.stderr) == [], proc.stdout + proc.stderr


def test_a_key_of_the_wrong_kind_in_either_variable_is_not_printed(workspace, tmp_path):
    env = {**NO_DOCKER, "ENGINEBUILD_HOME": str(tmp_path / "home")}
    cache = run_in_process(["doctor"], workspace, env={**env, "ENGINEBUILD_CACHE_KEY": body(P256)})
    assert "not an unencrypted Ed25519 private key" in cache.stdout + cache.stderr
    sign = run_in_process(SIGNING_VERBS["push --sign"], workspace, env={**env, "ENGINEBUILD_SIGNING_KEY": body(ED25519)})
    assert sign.returncode == 2 and "not an ECDSA key" in sign.stderr
    assert leaked(body(P256), cache.stdout + cache.stderr) == [] and leaked(body(ED25519), sign.stderr) == []


def test_a_key_whose_armour_was_lost_is_read_as_the_key_it_is(workspace, tmp_path):
    key = Ed25519PrivateKey.generate()
    public = key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    import base64

    proc = run_in_process(["doctor"], workspace, env={**NO_DOCKER, "ENGINEBUILD_HOME": str(tmp_path / "home"),
                                                     "ENGINEBUILD_CACHE_KEY": body(pkcs8(key))})
    assert f"signs with ed25519:{base64.b64encode(public).decode()}" in proc.stdout, proc.stdout
    assert "without its -----BEGIN lines" in proc.stdout
    # the P-256 body alone gets past the key to what the push needs next (the build)
    pushed = run_in_process(SIGNING_VERBS["push --sign"], workspace,
                            env={**NO_DOCKER, "ENGINEBUILD_HOME": str(tmp_path / "home"),
                                 "ENGINEBUILD_SIGNING_KEY": body(P256)})
    assert pushed.returncode == 1 and "ENGINEBUILD_SIGNING_KEY" not in pushed.stderr, pushed.stderr


@pytest.mark.parametrize("device", ["/dev/zero", "/dev/urandom"])
def test_a_device_named_as_a_key_file_is_refused_without_reading_it_whole(workspace, device):
    proc = run_in_process(["verify", "--signature", "--key", device, f"127.0.0.1:9/x/y@{DIGEST}"], workspace)
    assert proc.returncode == 2 and f"{device}: not a regular file" in proc.stderr, proc.stderr
    proc = run_in_process(["push", "demo", "--to", "127.0.0.1:9/x/y", "--sign", "--key", device], workspace)
    assert proc.returncode == 2 and f"{device}: not a regular file" in proc.stderr, proc.stderr


def test_a_fifo_named_as_a_key_file_is_refused_without_waiting_for_a_writer(workspace, tmp_path):
    import os

    fifo = tmp_path / "key.pub"
    os.mkfifo(fifo)
    proc = run_in_process(["verify", "--signature", "--key", fifo, f"127.0.0.1:9/x/y@{DIGEST}"], workspace)
    assert proc.returncode == 2 and "not a regular file" in proc.stderr, proc.stderr
