"""Signing an image already in its registry, the use case behind `sign REF@DIGEST`: what a CI job
of its own does after the job that pushed (only it holds `id-token: write`). The image's SBOM and
provenance are read back from the registry (the unsigned referrers the push attached), each
checked to be about this image, then signed with the image and each platform's manifest exactly
as `push --sign` signs them (publish/sign.py). And the other side, `verify --signature`: a
signature checked from the registry against a key or a keyless identity."""

from __future__ import annotations

from typing import TYPE_CHECKING

from enginebuild.errors import RegistryError
from enginebuild.io.store import Store
from enginebuild.oci.push import Pusher
from enginebuild.oci.reference import ImageRef
from enginebuild.oci.referrers import DIGEST, has_referrers_api, listed
from enginebuild.oci.registry import RegistryClient
from enginebuild.publish.attach import PROVENANCE_TYPE, SBOM_TYPE
from enginebuild.publish.identity import IdentityTrust, load_trusted_root
from enginebuild.publish.sign import sign_image
from enginebuild.publish.signcheck import Verdict as SignedVerdict
from enginebuild.publish.signcheck import verify_signed
from enginebuild.settings import settings
from enginebuild.trust.signkeys import KeyTrust, load_public
from enginebuild.usecases.targets import pinned_ref
from enginebuild.wire import loads

if TYPE_CHECKING:
    from enginebuild.publish.keyless import KeylessSigner
    from enginebuild.trust.signkeys import Signer

MAX_DOCUMENT = 16 << 20


def pinned(text: str) -> ImageRef:
    return pinned_ref(text, "name the image by digest, not by a tag")


def sign_pushed(text: str, signer: Signer | KeylessSigner) -> dict[str, str]:
    """Sign REGISTRY/REPO@DIGEST in place; returns what was attached (as a push record's `attached`)."""
    ref = pinned(text)
    assert ref.digest is not None
    client = RegistryClient()
    target = ImageRef(ref.registry, ref.repository, None, None)
    documents: dict[str, bytes] = {}
    for entry in listed(client, ref, ref.digest):
        kind = entry.get("artifactType")
        if kind not in (SBOM_TYPE, PROVENANCE_TYPE) or kind in documents:
            continue
        _, _, body = client.manifest(ImageRef(ref.registry, ref.repository, None, entry["digest"]))
        layer = _document_layer(body, ref.digest)
        if layer is not None:  # what the registry lists is hostile: a referrer of this digest, one document
            documents[kind] = client.read_blob(ref, layer, limit=MAX_DOCUMENT)
    missing = [name for name, kind in (("SBOM", SBOM_TYPE), ("provenance", PROVENANCE_TYPE)) if kind not in documents]
    if missing:
        raise RegistryError(f"{text}: no {' and no '.join(missing)} attached to sign",
                            hint="push it with its SBOM and provenance (without --no-attach), or push with --sign")
    try:
        statement = loads(documents[PROVENANCE_TYPE])
        named = {f"sha256:{s['digest']['sha256']}" for s in statement["subject"]}
    except (ValueError, KeyError, TypeError):
        raise RegistryError(f"{text}: the attached provenance is not an in-toto statement") from None
    if ref.digest not in named:
        raise RegistryError(f"{text}: the attached provenance is about another image; nothing signed")
    pusher = Pusher(client, Store(settings().home), target)
    own = sign_image(pusher, signer, ref.digest, documents[SBOM_TYPE], documents[PROVENANCE_TYPE],
                     has_referrers_api(client, target, ref.digest))
    return {"sbom-statement": own[0][0], "provenance-statement": own[1][0], "signed-by": signer.who}


def _document_layer(body: bytes, digest: str) -> str | None:
    """The digest of the one document a referrer manifest of `digest` carries, or None."""
    try:
        manifest = loads(body)
        layer = manifest["layers"][0]["digest"]
        subject = manifest["subject"]["digest"]
    except (ValueError, KeyError, TypeError, IndexError):
        return None
    return layer if subject == digest and isinstance(layer, str) and DIGEST.fullmatch(layer) else None


def verify_signatures(images: list[str], key_path: str | None, identity: str | None = None, issuer: str | None = None,
                      trusted_root: str | None = None, layers: bool = False) -> list[SignedVerdict]:
    """`verify --signature`: each REGISTRY/REPO@sha256:... checked from its registry (publish/signcheck.py),
    signed by the key of `key_path`, or keylessly as `identity` by `issuer` under `trusted_root`."""

    trust: KeyTrust | IdentityTrust
    if key_path:
        trust = KeyTrust(load_public(key_path))
    else:
        assert identity and issuer and trusted_root
        trust = IdentityTrust(load_trusted_root(trusted_root), identity, issuer)
    refs = [pinned_ref(text, "a signature is checked for a digest, not a tag") for text in images]
    client = RegistryClient()
    return [verify_signed(client, ref, trust, layers) for ref in refs]
