"""Signed images (docs/signing.md): `push --sign` signs the index and each platform's manifest in
cosign's simple-signing form and attaches the SBOM and the provenance as DSSE envelopes in
Sigstore bundles; `verify --signature --key` checks every byte, the signature and the
attestations from the registry alone. What we wrote is checked by what we did not write: the
JavaScript Sigstore libraries from npm (pinned in tests/sigstore-js/package-lock.json) for the
bundles, and a check of cosign's documented simple-signing format written here, from its
specification, for the signatures. Both attachment modes: the referrers API (a registry that has
it) and the tag schemes (distribution 2.8, which has none)."""
import base64
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import requests
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec

from conftest import ROOT, need, run_cli
from helpers.referrers import ReferrersRegistry
from helpers.registry import start_registry

pytestmark = [pytest.mark.docker, pytest.mark.network, pytest.mark.registry]

OCI_INDEX = "application/vnd.oci.image.index.v1+json"
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
ACCEPT = f"{OCI_INDEX}, {OCI_MANIFEST}"
SIG_ARTIFACT = "application/vnd.dev.cosign.artifact.sig.v1+json"
BUNDLE = "application/vnd.dev.sigstore.bundle.v0.3+json"
SBOM_PREDICATE = "https://cyclonedx.org/bom"
PROVENANCE_PREDICATE = "https://slsa.dev/provenance/v1"
JS = ROOT / "tests" / "sigstore-js"


def write_key(path: Path, curve=None) -> Path:
    key = ec.generate_private_key(curve or ec.SECP256R1())
    path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                       serialization.NoEncryption()))
    path.with_suffix(".pub").write_bytes(key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))
    return path


@pytest.fixture(scope="module")
def sigstore_js(tmp_path_factory):
    """@sigstore/verify and @sigstore/bundle from npm, installed from the committed lock."""
    need(shutil.which("npm") is not None and shutil.which("node") is not None, "node and npm are not installed")
    modules = Path(os.environ.get("HOME", "/root")) / ".cache" / "enginebuild" / "sigstore-js"
    if not (modules / "package-lock.json").exists() or \
            (modules / "package-lock.json").read_bytes() != (JS / "package-lock.json").read_bytes():
        modules.mkdir(parents=True, exist_ok=True)
        for name in ("package.json", "package-lock.json"):
            shutil.copy(JS / name, modules / name)
        proc = subprocess.run(["npm", "ci", "--silent", "--no-audit", "--no-fund"], cwd=modules,
                              capture_output=True, text=True, timeout=600)
        need(proc.returncode == 0, f"npm ci of the Sigstore libraries failed: {proc.stderr[-500:]}")
    return modules / "node_modules"


def js_verify(modules: Path, bundle: bytes, public: Path | None, tmp: Path, *options) -> dict:
    """@sigstore/verify's verdict on a bundle: trusting `public`, or (keyless) the options
    --trusted-root, --identity, --issuer [--artifact]."""
    path = tmp / f"bundle-{hashlib.sha256(bundle).hexdigest()[:12]}.json"
    path.write_bytes(bundle)
    trust = ["--key", str(public)] if public else []
    proc = subprocess.run(["node", str(JS / "verify-bundle.cjs"), str(modules), str(path), *trust, *map(str, options)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


class Reader:
    """Plain HTTP reads of a registry, as any client makes them."""

    def __init__(self, host: str, repository: str):
        self.base = f"http://{host}/v2/{repository}"

    def manifest(self, reference: str) -> tuple[bytes, dict]:
        response = requests.get(f"{self.base}/manifests/{reference}", headers={"Accept": ACCEPT}, timeout=30)
        response.raise_for_status()
        return response.content, response.json()

    def exists(self, reference: str) -> bool:
        return requests.head(f"{self.base}/manifests/{reference}", headers={"Accept": ACCEPT},
                             timeout=30).status_code == 200

    def blob(self, digest: str) -> bytes:
        response = requests.get(f"{self.base}/blobs/{digest}", timeout=30)
        response.raise_for_status()
        return response.content

    def referrers(self, digest: str) -> list[dict]:
        response = requests.get(f"{self.base}/referrers/{digest}", timeout=30)
        if response.status_code == 200 and response.headers.get("Content-Type", "").startswith(OCI_INDEX):
            return response.json()["manifests"]
        if not self.exists(digest.replace(":", "-")):
            return []
        return self.manifest(digest.replace(":", "-"))[1]["manifests"]


# cosign's `verify-attestation --type T` (options/predicate.go): the predicate type each short name stands for
COSIGN_PREDICATE_TYPES = {"cyclonedx": "https://cyclonedx.org/bom", "slsaprovenance1": "https://slsa.dev/provenance/v1"}


def cosign_attestation_check(bundle: bytes, short: str, digest: str) -> None:
    """What cosign's documented `verify-attestation --type T` checks of a statement, besides the
    signature (checked above by @sigstore/verify): an in-toto statement in the DSSE payload whose
    predicateType is exactly T's, and whose subjects name the image's digest. It does not read the
    predicate's content."""
    envelope = json.loads(bundle)["dsseEnvelope"]
    assert envelope["payloadType"] == "application/vnd.in-toto+json"
    statement = json.loads(base64.b64decode(envelope["payload"]))
    assert statement["_type"] == "https://in-toto.io/Statement/v1"
    assert statement["predicateType"] == COSIGN_PREDICATE_TYPES[short]
    assert any(s["digest"].get("sha256") == digest.split(":")[1] for s in statement["subject"])


def cosign_simple_signing_check(reader: Reader, repository: str, digest: str, public: Path, api: bool) -> None:
    """cosign's documented format, checked independently of enginebuild: a signature is a layer of
    media type application/vnd.dev.cosign.simplesigning.v1+json whose blob is the JSON payload
    {"critical": {"identity": {"docker-reference": REPO}, "image": {"docker-manifest-digest": DIGEST},
    "type": "cosign container image signature"}, "optional": ...} and whose annotation
    dev.cosignproject.cosign/signature is the base64 ECDSA-P256-SHA256 signature of the payload's bytes;
    it is found at the tag sha256-HEX.sig, or (OCI 1.1) as a referrer of artifact type
    application/vnd.dev.cosign.artifact.sig.v1+json."""
    if api:
        found = [m["digest"] for m in reader.referrers(digest) if m.get("artifactType") == SIG_ARTIFACT]
        assert len(found) == 1, found
        _, manifest = reader.manifest(found[0])
        assert manifest["subject"]["digest"] == digest
    else:
        _, manifest = reader.manifest(digest.replace(":", "-") + ".sig")
    key = serialization.load_pem_public_key(public.read_bytes())
    layer = manifest["layers"][-1]
    assert layer["mediaType"] == "application/vnd.dev.cosign.simplesigning.v1+json"
    payload = reader.blob(layer["digest"])
    assert hashlib.sha256(payload).hexdigest() == layer["digest"].split(":")[1]
    key.verify(base64.b64decode(layer["annotations"]["dev.cosignproject.cosign/signature"]), payload,
               ec.ECDSA(hashes.SHA256()))
    document = json.loads(payload)
    assert document["critical"]["type"] == "cosign container image signature"
    assert document["critical"]["image"]["docker-manifest-digest"] == digest
    assert document["critical"]["identity"]["docker-reference"] == repository


@pytest.fixture(scope="module")
def signed(tmp_path_factory, eb_home, docker_engine, debian_reachable, pypi_reachable):
    """The demo, both platforms, pushed signed to a registry of this module's own (its files are
    tampered with below) twice: straight (tag schemes) and through a referrers-API front."""
    need(shutil.which("docker-registry") is not None, "docker-registry is not installed (run scripts/setup.sh)")
    folder = tmp_path_factory.mktemp("signing")
    workspace = folder / "repo"
    workspace.mkdir()
    for name in ("images", "patches", "lockfiles"):
        shutil.copytree(ROOT / name, workspace / name, symlinks=True)
    key = write_key(folder / "cosign.key")
    registry = start_registry(folder / "registry")
    front = ReferrersRegistry(registry.host)
    proc = run_cli(["image", "demo"], workspace)
    assert proc.returncode == 0, proc.stderr
    pushed = {}
    for mode, host in (("tags", registry.host), ("api", front.host)):
        repository = f"{host}/signed/{mode}"
        proc = run_cli(["push", "demo", "--to", repository, "--tag", "v1", "--sign", "--key", key], workspace)
        assert proc.returncode == 0, proc.stderr
        digest = proc.stdout.strip().rsplit("@", 1)[1]
        record = json.loads((workspace / "lockfiles/demo.pushes.json").read_text())["pushes"][-1]
        pushed[mode] = {"host": host, "repository": repository, "digest": digest, "record": record,
                        "output": proc.stdout + proc.stderr}
    yield {"workspace": workspace, "key": key, "public": key.with_suffix(".pub"), "registry": registry,
           "front": front, "pushed": pushed, "folder": folder}
    front.shutdown()
    registry.stop()


def verify(signed, reference: str, public: Path | None = None, *extra):
    return run_cli(["verify", "--signature", "--key", public or signed["public"], reference, *extra],
                   signed["workspace"])


@pytest.mark.parametrize("mode", ["tags", "api"])
def test_a_signed_push_verifies_for_the_index_and_each_platform_here_and_in_implementations_we_did_not_write(
        signed, sigstore_js, mode, tmp_path):
    pushed = signed["pushed"][mode]
    reader = Reader(pushed["host"], f"signed/{mode}")
    _, index = reader.manifest(pushed["digest"])
    assert index["mediaType"] == OCI_INDEX
    platforms = {f"{m['platform']['os']}/{m['platform']['architecture']}": m["digest"] for m in index["manifests"]}
    assert set(platforms) == {"linux/amd64", "linux/arm64"}
    for digest in [pushed["digest"], *platforms.values()]:
        proc = verify(signed, f"{pushed['repository']}@{digest}")
        assert proc.returncode == 0, proc.stdout + proc.stderr
        for check in ("content", "signature", "SBOM", "provenance"):
            assert f": ok {check}:" in proc.stdout, proc.stdout

        cosign_simple_signing_check(reader, pushed["repository"], digest, signed["public"], api=mode == "api")
        bundles = {}
        for entry in reader.referrers(digest):
            if entry.get("artifactType") == BUNDLE:
                _, manifest = reader.manifest(entry["digest"])
                assert manifest["subject"]["digest"] == digest
                bundles[manifest["annotations"]["dev.sigstore.bundle.predicateType"]] = \
                    reader.blob(manifest["layers"][0]["digest"])
        assert set(bundles) == {SBOM_PREDICATE, PROVENANCE_PREDICATE}
        for predicate, bundle in bundles.items():
            answer = js_verify(sigstore_js, bundle, signed["public"], tmp_path)
            assert answer["ok"], answer
            assert answer["payloadType"] == "application/vnd.in-toto+json"
            statement = answer["statement"]
            assert statement["predicateType"] == predicate
            assert digest.split(":")[1] in {s["digest"]["sha256"] for s in statement["subject"]}
            other = write_key(tmp_path / "other.key").with_suffix(".pub")
            assert not js_verify(sigstore_js, bundle, other, tmp_path)["ok"]  # the JS side can refuse too
        cosign_attestation_check(bundles[SBOM_PREDICATE], "cyclonedx", digest)
        cosign_attestation_check(bundles[PROVENANCE_PREDICATE], "slsaprovenance1", digest)
        # the signed SBOM statement is small and names the full SBOM, attached beside it as a plain referrer
        assert len(bundles[SBOM_PREDICATE]) < 4096, len(bundles[SBOM_PREDICATE])
        statement = json.loads(base64.b64decode(json.loads(bundles[SBOM_PREDICATE])["dsseEnvelope"]["payload"]))
        bom = next(r for r in statement["predicate"]["externalReferences"] if r["type"] == "bom")
        full = [reader.manifest(e["digest"])[1]["layers"][0]["digest"] for e in reader.referrers(digest)
                if e.get("artifactType") == "application/vnd.cyclonedx+json"]
        assert full == [f"sha256:{bom['hashes'][0]['content']}"], (full, bom)
        assert json.loads(reader.blob(full[0]))["bomFormat"] == "CycloneDX"
    if mode == "api":  # the registry lists them: no tag of either scheme is made
        assert not reader.exists(pushed["digest"].replace(":", "-") + ".sig")
        assert not reader.exists(pushed["digest"].replace(":", "-"))
        assert any("/referrers/" in path for _, path, _ in signed["front"].log)
    # the key never leaves the machine: not in the output, the push record, or anything pushed
    secret = b"".join(signed["key"].read_bytes().splitlines()[1:-1]).decode()
    assert secret[:40] not in pushed["output"]
    assert secret[:40] not in json.dumps(pushed["record"])
    assert pushed["record"]["attached"]["signed-by"] == hashlib.sha256(
        serialization.load_pem_public_key(signed["public"].read_bytes()).public_bytes(
            serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)).hexdigest()


def test_a_push_signed_again_attaches_nothing_new(signed):
    pushed = signed["pushed"]["tags"]
    reader = Reader(pushed["host"], "signed/tags")
    before = reader.manifest(pushed["digest"].replace(":", "-") + ".sig")[0]
    proc = run_cli(["push", "demo", "--to", pushed["repository"], "--tag", "v1", "--sign", "--key", signed["key"]],
                   signed["workspace"])
    assert proc.returncode == 0, proc.stderr
    assert reader.manifest(pushed["digest"].replace(":", "-") + ".sig")[0] == before  # one signature, not two
    # the SBOM and the provenance, once each: as plain documents and as signed statements
    assert len(reader.referrers(pushed["digest"])) == 4


# -- what a signed image must refuse --------------------------------------------------------------

def blob_file(signed, digest: str) -> Path:
    hexdigest = digest.split(":")[1]
    return signed["registry"].folder / "data/docker/registry/v2/blobs/sha256" / hexdigest[:2] / hexdigest / "data"


def upload(host: str, repository: str, data: bytes) -> str:
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    start = requests.post(f"http://{host}/v2/{repository}/blobs/uploads/", timeout=30)
    assert start.status_code == 202, start.text
    location = start.headers["Location"]
    joiner = "&" if "?" in location else "?"
    done = requests.put(f"{location}{joiner}digest={digest}", data=data,
                        headers={"Content-Type": "application/octet-stream"}, timeout=30)
    assert done.status_code == 201, done.text
    return digest


def put_manifest(host: str, repository: str, reference: str, body: bytes, media_type: str = OCI_MANIFEST) -> str:
    response = requests.put(f"http://{host}/v2/{repository}/manifests/{reference}", data=body,
                            headers={"Content-Type": media_type}, timeout=30)
    assert response.status_code == 201, response.text
    return "sha256:" + hashlib.sha256(body).hexdigest()


def canonical(document) -> bytes:
    return json.dumps(document, sort_keys=True, separators=(",", ":")).encode()


class Tamper:
    """Changes made to the module's registry for one case, undone after it."""

    def __init__(self, signed):
        self.signed = signed
        pushed = signed["pushed"]["tags"]
        self.host, self.repository = pushed["host"], "signed/tags"
        self.reader = Reader(self.host, self.repository)
        self.files: dict[Path, bytes] = {}
        self.tags: dict[str, tuple[bytes, str]] = {}

    def flip_file(self, digest: str, old: bytes | None = None, new: bytes | None = None) -> None:
        path = blob_file(self.signed, digest)
        data = path.read_bytes()
        self.files.setdefault(path, data)
        if old is not None:
            assert old in data
            path.write_bytes(data.replace(old, new, 1))
        else:
            middle = len(data) // 2
            path.write_bytes(data[:middle] + bytes([data[middle] ^ 0x01]) + data[middle + 1:])

    def retag(self, tag: str, body: bytes, media_type: str = OCI_MANIFEST) -> None:
        if tag not in self.tags:
            old, doc = self.reader.manifest(tag)
            self.tags[tag] = (old, doc["mediaType"])
        put_manifest(self.host, self.repository, tag, body, media_type)

    def swap_referrer(self, subject: str, predicate: str, replacement: dict) -> None:
        """The referrers tag of `subject` lists `replacement` (a manifest, pushed here) instead of its
        `predicate` attestation."""
        tag = subject.replace(":", "-")
        _, index = self.reader.manifest(tag)
        body = canonical(replacement)
        digest = put_manifest(self.host, self.repository, "sha256:" + hashlib.sha256(body).hexdigest(), body)
        manifests = [m for m in index["manifests"]
                     if (m.get("annotations") or {}).get("dev.sigstore.bundle.predicateType") != predicate]
        manifests.append({"mediaType": OCI_MANIFEST, "digest": digest, "size": len(body), "artifactType": BUNDLE,
                          "annotations": {"dev.sigstore.bundle.predicateType": predicate}})
        self.retag(tag, canonical({**index, "manifests": manifests}), OCI_INDEX)

    def attestation(self, subject: str, predicate: str) -> tuple[dict, bytes]:
        for entry in self.reader.referrers(subject):
            _, manifest = self.reader.manifest(entry["digest"])
            if (manifest.get("annotations") or {}).get("dev.sigstore.bundle.predicateType") == predicate:
                return manifest, self.reader.blob(manifest["layers"][0]["digest"])
        raise AssertionError(f"no {predicate} attached to {subject}")

    def undo(self) -> None:
        for path, data in self.files.items():
            path.write_bytes(data)
        for tag, (body, media_type) in self.tags.items():
            put_manifest(self.host, self.repository, tag, body, media_type)


def resigned_bundle(bundle: bytes, statement_change) -> bytes:
    """The bundle with its statement changed and its signature kept (what an attacker without the key can do)."""
    document = json.loads(bundle)
    statement = json.loads(base64.b64decode(document["dsseEnvelope"]["payload"]))
    statement_change(statement)
    document["dsseEnvelope"]["payload"] = base64.b64encode(canonical(statement)).decode()
    return canonical(document)


def bundle_signed_by_another_key(bundle: bytes, tmp_path: Path) -> bytes:
    from enginebuild.publish import signformat
    from enginebuild.trust.signkeys import load_signer

    statement = base64.b64decode(json.loads(bundle)["dsseEnvelope"]["payload"])
    return signformat.bundle(load_signer(str(write_key(tmp_path / "attacker.key"))), statement)


def referrer_manifest(tamper: Tamper, subject: str, document: bytes, predicate: str) -> dict:
    _, subject_manifest = tamper.reader.manifest(subject)
    empty = upload(tamper.host, tamper.repository, b"{}")
    return {"schemaVersion": 2, "mediaType": OCI_MANIFEST, "artifactType": BUNDLE,
            "config": {"mediaType": "application/vnd.oci.empty.v1+json", "digest": empty, "size": 2},
            "layers": [{"mediaType": BUNDLE, "digest": upload(tamper.host, tamper.repository, document),
                        "size": len(document)}],
            "subject": {"mediaType": subject_manifest["mediaType"], "digest": subject,
                        "size": len(tamper.reader.manifest(subject)[0])},
            "annotations": {"dev.sigstore.bundle.predicateType": predicate}}


def platforms_of(tamper: Tamper, digest: str) -> dict[str, str]:
    _, index = tamper.reader.manifest(digest)
    return {f"{m['platform']['os']}/{m['platform']['architecture']}": m["digest"] for m in index["manifests"]}


def case_layer(t: Tamper, image: str, other: str, tmp: Path) -> str:
    _, manifest = t.reader.manifest(image)
    t.flip_file(manifest["layers"][-1]["digest"])
    return "FAILED content: layer"


def case_config(t: Tamper, image: str, other: str, tmp: Path) -> str:
    _, manifest = t.reader.manifest(image)
    t.flip_file(manifest["config"]["digest"], b'"architecture"', b'"architecturE"')
    return "FAILED content: config"


def case_manifest(t: Tamper, image: str, other: str, tmp: Path) -> str:
    body, _ = t.reader.manifest(image)  # one size off by one: still JSON, no longer these bytes
    size = re.search(rb'"size":([0-9]+)', body).group(1)
    t.flip_file(image, b'"size":' + size, b'"size":' + str(int(size) + 1).encode())
    return f"FAILED content: {t.host}/{t.repository}@{image}: registry claims digest {image} but the manifest it " \
           "served hashes to sha256:"


def case_sbom_replaced(t: Tamper, image: str, other: str, tmp: Path) -> str:
    _, bundle = t.attestation(image, SBOM_PREDICATE)
    forged = bundle_signed_by_another_key(bundle, tmp)
    t.swap_referrer(image, SBOM_PREDICATE, referrer_manifest(t, image, forged, SBOM_PREDICATE))
    return "FAILED SBOM: the envelope's signature does not verify"


def case_provenance_subject(t: Tamper, image: str, other: str, tmp: Path) -> str:
    _, bundle = t.attestation(other, PROVENANCE_PREDICATE)

    def to_this_image(statement):
        statement["subject"][0]["digest"]["sha256"] = image.split(":")[1]

    forged = resigned_bundle(bundle, to_this_image)
    t.swap_referrer(image, PROVENANCE_PREDICATE, referrer_manifest(t, image, forged, PROVENANCE_PREDICATE))
    return "FAILED provenance: the envelope's signature does not verify"


def case_signature_byte(t: Tamper, image: str, other: str, tmp: Path) -> str:
    tag = image.replace(":", "-") + ".sig"
    _, manifest = t.reader.manifest(tag)
    layer = manifest["layers"][0]
    signature = bytearray(base64.b64decode(layer["annotations"]["dev.cosignproject.cosign/signature"]))
    signature[len(signature) // 2] ^= 0x01
    layer["annotations"]["dev.cosignproject.cosign/signature"] = base64.b64encode(bytes(signature)).decode()
    t.retag(tag, canonical(manifest))
    return "FAILED signature: the signature does not verify with key"


def case_referrer_moved(t: Tamper, image: str, other: str, tmp: Path) -> str:
    _, bundle = t.attestation(other, SBOM_PREDICATE)  # signed with the right key, for another image
    t.swap_referrer(image, SBOM_PREDICATE, referrer_manifest(t, image, bundle, SBOM_PREDICATE))
    return "FAILED SBOM: its signed statement names"


def case_tag_moved(t: Tamper, image: str, other: str, tmp: Path) -> str:
    body, _ = t.reader.manifest(other.replace(":", "-") + ".sig")
    t.retag(image.replace(":", "-") + ".sig", body)
    return f"FAILED signature: the signature is of {other[:19]}, not of this image"


def case_deep_signature(t: Tamper, image: str, other: str, tmp: Path) -> str:
    """A writer with push access and no key nests the signature tag's manifest 5,000 deep (10 KB):
    the check refuses it with the reason, never a RecursionError."""
    body, doc = t.reader.manifest(image.replace(":", "-") + ".sig")
    deep = json.loads(body)
    deep["annotations"] = {"x": "y"}
    text = canonical(deep).decode()
    t.retag(image.replace(":", "-") + ".sig", (text[:-1] + ',"z":' + "[" * 5000 + "]" * 5000 + "}").encode())
    return "the manifest is not a JSON document that can be read (nested deeper than 64 levels)"


def case_full_sbom_replaced(t: Tamper, image: str, other: str, tmp: Path) -> str:
    """The full SBOM's blob in the registry's storage: another document of the same size."""
    entry = next(e for e in t.reader.referrers(image) if e.get("artifactType") == "application/vnd.cyclonedx+json")
    _, manifest = t.reader.manifest(entry["digest"])
    t.flip_file(manifest["layers"][0]["digest"], b'"CycloneDX"', b'"CycloneDx"')
    return "FAILED SBOM: the full SBOM sha256:"


def case_sbom_reference_moved(t: Tamper, image: str, other: str, tmp: Path) -> str:
    """The image's plain SBOM referrer swapped for one carrying another document."""
    tag = image.replace(":", "-")
    _, index = t.reader.manifest(tag)
    entry = next(e for e in index["manifests"] if e.get("artifactType") == "application/vnd.cyclonedx+json")
    _, manifest = t.reader.manifest(entry["digest"])
    document = json.loads(t.reader.blob(manifest["layers"][0]["digest"]))
    document["components"] = []
    forged = canonical(document)
    manifest["layers"][0] = {**manifest["layers"][0], "digest": upload(t.host, t.repository, forged),
                             "size": len(forged)}
    body = canonical(manifest)
    digest = put_manifest(t.host, t.repository, "sha256:" + hashlib.sha256(body).hexdigest(), body)
    manifests = [e for e in index["manifests"] if e["digest"] != entry["digest"]]
    manifests.append({**entry, "digest": digest, "size": len(body)})
    t.retag(tag, canonical({**index, "manifests": manifests}), OCI_INDEX)
    return "FAILED SBOM: the full SBOM its signed statement names"


CASES = {"a layer byte": case_layer, "a config byte": case_config, "a manifest byte": case_manifest,
         "the SBOM replaced": case_sbom_replaced, "the provenance's subject changed": case_provenance_subject,
         "a signature byte flipped": case_signature_byte, "a referrer moved to another subject": case_referrer_moved,
         "a tag moved to another digest": case_tag_moved, "a signature nested 5,000 deep": case_deep_signature,
         "the full SBOM replaced": case_full_sbom_replaced, "the SBOM reference moved": case_sbom_reference_moved}


@pytest.fixture(scope="module")
def second_image(signed):
    """Another signed push (one label differs: every digest differs) to move things from."""
    workspace, pushed = signed["workspace"], signed["pushed"]["tags"]
    per_build = ["--set", "labels[variant]=b"]
    proc = run_cli(["image", "demo", *per_build], workspace)
    assert proc.returncode == 0, proc.stderr
    proc = run_cli(["push", "demo", *per_build, "--to", pushed["repository"], "--tag", "b", "--sign",
                    "--key", signed["key"]], workspace)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip().rsplit("@", 1)[1]


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("level", ["index", "linux/amd64"])
def test_a_tampered_signed_image_is_refused_with_the_reason(signed, second_image, case, level, tmp_path):
    tamper = Tamper(signed)
    pushed = signed["pushed"]["tags"]
    image = pushed["digest"] if level == "index" else platforms_of(tamper, pushed["digest"])[level]
    other = second_image if level == "index" else platforms_of(tamper, second_image)[level]
    if level == "index" and case in ("a layer byte", "a config byte"):  # under the index: the platform's bytes
        target = platforms_of(tamper, pushed["digest"])["linux/amd64"]
        reason = CASES[case](tamper, target, other, tmp_path)
    else:
        reason = CASES[case](tamper, image, other, tmp_path)
    layers = ["--layers"] if case == "a layer byte" else []  # by default a layer is taken as its manifest pins it
    try:
        proc = verify(signed, f"{pushed['repository']}@{image}", None, *layers)
        pinned = verify(signed, f"{pushed['repository']}@{image}") if layers else None
    finally:
        tamper.undo()
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert reason in proc.stdout, proc.stdout
    if pinned is not None:  # what a pull of it would refuse, the default leaves to the pull
        assert pinned.returncode == 0 and "not fetched (--layers fetches them)" in pinned.stdout, pinned.stdout
    assert verify(signed, f"{pushed['repository']}@{image}").returncode == 0  # undone: it holds again


def test_the_wrong_key_is_refused_for_the_signature_and_both_attestations(signed, tmp_path):
    pushed = signed["pushed"]["tags"]
    other = write_key(tmp_path / "other.key").with_suffix(".pub")
    proc = verify(signed, f"{pushed['repository']}@{pushed['digest']}", other)
    assert proc.returncode == 1
    assert "FAILED signature: the signature does not verify with key" in proc.stdout
    assert "FAILED SBOM: the envelope's signature does not verify" in proc.stdout
    assert "FAILED provenance: the envelope's signature does not verify" in proc.stdout
    assert ": ok content:" in proc.stdout  # the bytes themselves are intact


def test_an_unsigned_push_is_refused_as_unsigned(signed):
    pushed = signed["pushed"]["tags"]
    repository = f"{pushed['host']}/signed/unsigned"
    proc = run_cli(["push", "demo", "--to", repository, "--tag", "v1"], signed["workspace"])
    assert proc.returncode == 0, proc.stderr
    digest = proc.stdout.strip().rsplit("@", 1)[1]
    proc = verify(signed, f"{repository}@{digest}")
    assert proc.returncode == 1
    assert "FAILED signature: no signature attached" in proc.stdout
    assert "FAILED SBOM: not attached as a signed envelope (only unsigned documents are attached)" in proc.stdout


def test_verify_reads_the_manifests_configs_and_documents_and_with_layers_every_layer(signed):
    """`verify --signature` reads what the signature covers and the documents, not the image: the
    bytes the registry sent are counted at a proxy in front of it."""
    pushed, front = signed["pushed"]["api"], signed["front"]
    reference = f"{pushed['repository']}@{pushed['digest']}"
    sizes = {}
    for extra in ((), ("--layers",)):
        before = front.served
        proc = verify(signed, reference, None, *extra)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        sizes[extra] = front.served - before
    print(f"verify --signature read {sizes[()]} bytes; with --layers {sizes[('--layers',)]}")
    layers = sum(layer["size"] for digest in platforms_of(Tamper(signed), pushed["digest"]).values()
                 for layer in Reader(pushed["host"], "signed/api").manifest(digest)[1]["layers"])
    assert sizes[("--layers",)] - sizes[()] >= layers  # every layer of both platforms, and only with --layers
    assert sizes[()] < 1 << 20


def test_verify_reaches_only_the_registry(signed, tmp_path):
    """Run in a network namespace of its own whose only server is a registry serving the same
    storage: the check succeeds there, and nothing else (the host's registry) can be reached."""
    need(shutil.which("unshare") is not None and shutil.which("ip") is not None, "unshare and ip are needed")
    need(os.geteuid() == 0, "a network namespace needs root")
    pushed = signed["pushed"]["tags"]
    config = tmp_path / "config.yml"
    config.write_text("version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n"
                      f"    rootdirectory: {signed['registry'].folder / 'data'}\nhttp:\n  addr: 127.0.0.1:5999\n")
    reference = f"127.0.0.1:5999/signed/tags@{pushed['digest']}"
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    script = (
        "ip link set lo up; docker-registry serve \"$1\" >/dev/null 2>&1 & server=$!; "
        "for i in $(seq 100); do curl -fs http://127.0.0.1:5999/v2/ >/dev/null && break; sleep 0.1; done; "
        "if curl -fs --max-time 3 \"http://$2/v2/\" >/dev/null; then echo 'the host registry is reachable'; fi; "
        "\"$3\" -m enginebuild verify --signature --key \"$4\" \"$5\"; rc=$?; kill $server; exit $rc")
    proc = subprocess.run(["unshare", "--net", "sh", "-c", script, "sh", str(config), signed["registry"].host,
                           sys.executable, str(signed["public"]), reference],
                          capture_output=True, text=True, timeout=300, cwd=signed["workspace"], env=env)
    assert "the host registry is reachable" not in proc.stdout
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert ": ok signature:" in proc.stdout and ": ok provenance:" in proc.stdout


# -- keyless: @sigstore/mock's Fulcio and Rekor, served -------------------------------------------

IDENTITY = "https://github.com/OWNER/recipes/.github/workflows/images.yml@refs/heads/main"
ISSUER = "https://token.actions.githubusercontent.com"


def oidc_token(subject: str = IDENTITY, issuer: str = ISSUER) -> str:
    """An identity token as a CI job holds one (the mock's Fulcio reads its claims, as Fulcio does
    once it has checked the issuer's signature)."""
    def part(document):
        return base64.urlsafe_b64encode(json.dumps(document).encode()).rstrip(b"=").decode()
    return f"{part({'alg': 'RS256', 'typ': 'JWT'})}.{part({'iss': issuer, 'sub': subject, 'aud': 'sigstore'})}.c2ln"


@pytest.fixture(scope="module")
def sigstore_services(sigstore_js, tmp_path_factory):
    """Two Fulcio+Rekor servers of @sigstore/mock, each with its trusted root: one as it is, one
    whose log stamps entries an hour late (outside the ten minutes of a certificate)."""
    folder = tmp_path_factory.mktemp("sigstore")
    started = {}
    for name, offset in (("now", "0"), ("late", "3600")):
        root = folder / f"trusted_root-{name}.json"
        process = subprocess.Popen(["node", str(JS / "sigstore-server.cjs"), str(sigstore_js), str(root), offset],
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = process.stdout.readline()
        assert line.startswith("listening "), line + process.stderr.read()
        started[name] = {"url": f"http://127.0.0.1:{line.split()[1]}", "root": root, "process": process}
    yield started
    for service in started.values():
        service["process"].terminate()
        service["process"].wait(10)


def keyless_push(signed, service, repository: str, token: str) -> str:
    pushed = signed["pushed"]["tags"]
    proc = run_cli(["push", "demo", "--to", f"{pushed['host']}/{repository}", "--tag", "v1", "--sign", "--keyless",
                    "--fulcio", service["url"], "--rekor", service["url"]], signed["workspace"],
                   env={"SIGSTORE_ID_TOKEN": token})
    assert proc.returncode == 0, proc.stderr
    assert token not in proc.stdout + proc.stderr
    return proc.stdout.strip().rsplit("@", 1)[1]


def keyless_verify(signed, reference: str, root: Path, identity: str = IDENTITY, issuer: str = ISSUER):
    return run_cli(["verify", "--signature", "--identity", identity, "--issuer", issuer, "--trusted-root", root,
                    reference], signed["workspace"])


def cosign_bundle(reader: Reader, digest: str) -> tuple[bytes, bytes]:
    """(bundle, payload): cosign's keyless signature layer (its documented annotations: the
    certificate, and the Rekor entry with its signed timestamp) rewritten as the Sigstore bundle
    (v0.1, a message signature) that carries the same facts, for the JavaScript verifier."""
    from cryptography import x509

    _, manifest = reader.manifest(digest.replace(":", "-") + ".sig")
    layer = manifest["layers"][-1]
    notes = layer["annotations"]
    payload = reader.blob(layer["digest"])
    logged = json.loads(notes["dev.sigstore.cosign/bundle"])
    body = json.loads(base64.b64decode(logged["Payload"]["body"]))
    leaf = x509.load_pem_x509_certificate(notes["dev.sigstore.cosign/certificate"].encode())
    bundle = {
        "mediaType": "application/vnd.dev.sigstore.bundle+json;version=0.1",
        "verificationMaterial": {
            "x509CertificateChain": {"certificates": [
                {"rawBytes": base64.b64encode(leaf.public_bytes(serialization.Encoding.DER)).decode()}]},
            "tlogEntries": [{
                "logIndex": str(logged["Payload"]["logIndex"]),
                "logId": {"keyId": base64.b64encode(bytes.fromhex(logged["Payload"]["logID"])).decode()},
                "kindVersion": {"kind": body["kind"], "version": body["apiVersion"]},
                "integratedTime": str(logged["Payload"]["integratedTime"]),
                "inclusionPromise": {"signedEntryTimestamp": logged["SignedEntryTimestamp"]},
                "canonicalizedBody": logged["Payload"]["body"]}],
            "timestampVerificationData": {"rfc3161Timestamps": []}},
        "messageSignature": {
            "messageDigest": {"algorithm": "SHA2_256",
                              "digest": base64.b64encode(hashlib.sha256(payload).digest()).decode()},
            "signature": notes["dev.cosignproject.cosign/signature"]}}
    return json.dumps(bundle).encode(), payload


def test_a_keyless_push_verifies_offline_here_and_in_the_javascript_verifier_for_the_index_and_a_platform(
        signed, sigstore_js, sigstore_services, tmp_path):
    service = sigstore_services["now"]
    digest = keyless_push(signed, service, "signed/keyless", oidc_token())
    host = signed["pushed"]["tags"]["host"]
    reader = Reader(host, "signed/keyless")
    _, index = reader.manifest(digest)
    platform = next(m["digest"] for m in index["manifests"] if m["platform"]["architecture"] == "arm64")
    policy = ("--trusted-root", service["root"], "--identity", IDENTITY, "--issuer", ISSUER)
    for image in (digest, platform):
        proc = keyless_verify(signed, f"{host}/signed/keyless@{image}", service["root"])
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert proc.stdout.count(f"signed as {IDENTITY} (issuer {ISSUER})") == 3, proc.stdout

        bundle, payload = cosign_bundle(reader, image)
        artifact = tmp_path / "payload.json"
        artifact.write_bytes(payload)
        answer = js_verify(sigstore_js, bundle, None, tmp_path, *policy, "--artifact", artifact)
        assert answer["ok"] and answer["identity"] == IDENTITY, answer
        assert json.loads(payload)["critical"]["image"]["docker-manifest-digest"] == image
        for entry in reader.referrers(image):
            if entry.get("artifactType") == BUNDLE:
                _, manifest = reader.manifest(entry["digest"])
                answer = js_verify(sigstore_js, reader.blob(manifest["layers"][0]["digest"]), None, tmp_path, *policy)
                assert answer["ok"], answer
                assert image.split(":")[1] in {s["digest"]["sha256"] for s in answer["statement"]["subject"]}
                other = js_verify(sigstore_js, reader.blob(manifest["layers"][0]["digest"]), None, tmp_path,
                                  "--trusted-root", service["root"], "--identity", IDENTITY + "x", "--issuer", ISSUER)
                assert not other["ok"] and "identity" in other["error"]
    # the key-based check refuses a keyless signature, naming why
    proc = verify(signed, f"{host}/signed/keyless@{digest}")
    assert proc.returncode == 1 and "FAILED signature" in proc.stdout


@pytest.mark.parametrize("case", ["another identity", "another issuer", "outside the certificate's validity",
                                  "another trusted root"])
def test_a_keyless_signature_is_refused_with_the_reason(signed, sigstore_services, case):
    host = signed["pushed"]["tags"]["host"]
    service = sigstore_services["late" if case == "outside the certificate's validity" else "now"]
    repository = f"signed/keyless-{case.split()[-1].replace(chr(39), '')}"
    digest = keyless_push(signed, service, repository, oidc_token())
    root = sigstore_services["late" if case == "another trusted root" else
                             ("late" if service is sigstore_services["late"] else "now")]["root"]
    identity = IDENTITY.replace("main", "topic") if case == "another identity" else IDENTITY
    issuer = "https://accounts.google.com" if case == "another issuer" else ISSUER
    proc = keyless_verify(signed, f"{host}/{repository}@{digest}", root, identity, issuer)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    expected = {
        "another identity": f"FAILED signature: the certificate is for identity {IDENTITY!r}, not {identity!r}",
        "another issuer": f"FAILED signature: the certificate's OIDC issuer is {ISSUER!r}, not {issuer!r}",
        "outside the certificate's validity": "outside the certificate's validity",
        "another trusted root": "FAILED signature: the log entry is from a log the trusted root does not name",
    }[case]
    assert expected in proc.stdout, proc.stdout
    for check in ("SBOM", "provenance"):
        assert f"FAILED {check}:" in proc.stdout


@pytest.mark.parametrize("how", ["key", "keyless"])
def test_sign_signs_an_image_already_pushed_from_what_its_registry_holds(signed, sigstore_services, how):
    """The workflow's signing job: `sign REF@DIGEST` on a runner without the build, reading the
    SBOM and provenance the push attached."""
    pushed = signed["pushed"]["tags"]
    repository = f"{pushed['host']}/signed/later-{how}"
    proc = run_cli(["push", "demo", "--to", repository, "--tag", "v1"], signed["workspace"])
    assert proc.returncode == 0, proc.stderr
    reference = proc.stdout.strip()
    service = sigstore_services["now"]
    if how == "key":
        proc = run_cli(["sign", reference, "--key", signed["key"]], signed["workspace"])
        check = verify(signed, reference)
    else:
        proc = run_cli(["sign", reference, "--keyless", "--fulcio", service["url"], "--rekor", service["url"]],
                       signed["workspace"], env={"SIGSTORE_ID_TOKEN": oidc_token()})
        check = keyless_verify(signed, reference, service["root"])
    assert proc.returncode == 0, proc.stderr
    assert check.returncode == 0, check.stdout + check.stderr
    _, index = Reader(pushed["host"], f"signed/later-{how}").manifest(reference.rsplit("@", 1)[1])
    platform = f"{repository}@{index['manifests'][0]['digest']}"
    assert (verify(signed, platform) if how == "key" else keyless_verify(signed, platform, service["root"])).returncode == 0

    proc = run_cli(["sign", reference.replace("@", ":v1@").split("@")[0], "--key", signed["key"]], signed["workspace"])
    assert proc.returncode == 2 and "by digest, not by a tag" in proc.stderr
    if how == "key":  # an image pushed with --sign holds its documents as they are: it is signed again from them
        again = run_cli(["sign", f"{pushed['repository']}@{pushed['digest']}", "--key", signed["key"]],
                        signed["workspace"])
        assert again.returncode == 0, again.stderr
        assert verify(signed, f"{pushed['repository']}@{pushed['digest']}").returncode == 0
    bare = run_cli(["push", "demo", "--to", f"{repository}-bare", "--tag", "v1", "--no-attach"], signed["workspace"])
    proc = run_cli(["sign", bare.stdout.strip(), "--key", signed["key"]], signed["workspace"])
    assert proc.returncode == 1 and "no SBOM and no provenance attached to sign" in proc.stderr
