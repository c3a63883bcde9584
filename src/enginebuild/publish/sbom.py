"""The SBOM of a pushed image (CycloneDX 1.6 JSON, written with cyclonedx-python-lib): the base
images, every system package and Python distribution, every source pin, every patch, every
component's outputs, each with its sha256 (or commit). Deterministic: the same push gives the
same document."""

from __future__ import annotations

import datetime as dt
import uuid
import warnings
from typing import TYPE_CHECKING

from cyclonedx.model import ExternalReference, ExternalReferenceType, HashAlgorithm, HashType, Property, XsUri
from cyclonedx.model.bom import Bom, BomMetaData
from cyclonedx.model.bom_ref import BomRef
from cyclonedx.model.component import Component, ComponentType
from cyclonedx.output import make_outputter
from cyclonedx.schema import OutputFormat, SchemaVersion
from packageurl import PackageURL

from enginebuild import __version__
from enginebuild.core import keys
from enginebuild.lock.lockfile import Lock
from enginebuild.recipe.model import ImageSpec, PatchRef
from enginebuild.wire import JsonDoc

if TYPE_CHECKING:
    from enginebuild.io.store import Store


def _hash(value: str) -> HashType:
    return HashType(alg=HashAlgorithm.SHA_256, content=value.split(":")[-1])


def _component(ref: str, name: str, version: str, kind: str, purl: str | None = None, sha256: str | None = None,
               url: str | None = None, props: dict[str, str] | None = None) -> Component:
    types = {"container": ComponentType.CONTAINER, "library": ComponentType.LIBRARY, "file": ComponentType.FILE,
             "application": ComponentType.APPLICATION}
    component = Component(name=name, version=version, type=types[kind], bom_ref=BomRef(ref),
                          purl=PackageURL.from_string(purl) if purl else None,
                          hashes=[_hash(sha256)] if sha256 else [],
                          properties=[Property(name=k, value=v) for k, v in sorted((props or {}).items())])
    if url:
        component.external_references.add(ExternalReference(type=ExternalReferenceType.DISTRIBUTION, url=XsUri(url)))
    return component


def _pinned(name: str, pin: JsonDoc) -> list[Component]:
    """The SBOM's components of one lock input: the base image, each Debian package, each Python
    distribution, or the source itself (a tool enginebuild runs on the host is not in the image)."""
    if ".base@" in name:
        return [_component(name, pin["ref"].split("@")[0], pin.get("digest") or "", "container",
                           sha256=pin.get("digest"), props={"enginebuild:input": name})]
    if ".system@" in name:
        return [_component(f"{name}/{deb['name']}", deb["name"], deb["version"], "library",
                           f"pkg:deb/debian/{deb['name']}@{deb['version']}?arch={deb['arch']}", deb["sha256"],
                           f"{pin['archives'][deb.get('archive', 0)]}/{deb['filename']}", {"enginebuild:input": name})
                for deb in pin["packages"]]
    if ".python@" in name:
        return [_distribution(name, dist) for dist in pin["packages"]]
    if name.startswith("tools."):
        return []
    version = str(pin.get("commit") or pin.get("version") or pin.get("sha256") or "")
    pypi = f"pkg:pypi/{pin['name']}@{pin['version']}" if "version" in pin and "name" in pin else None
    props = {"enginebuild:input": name}
    if "commit" in pin:
        props["enginebuild:commit"] = pin["commit"]
    return [_component(name, pin.get("url") or pin.get("name") or name, version, "library", pypi,
                       pin.get("sha256"), pin.get("url"), props)]


def _distribution(name: str, dist: JsonDoc) -> Component:
    props = {"enginebuild:input": name, "enginebuild:origin": dist["origin"]}
    if dist.get("commit"):
        props["enginebuild:commit"] = dist["commit"]
    version = dist.get("version") or ""  # a component's wheel: its version is known once built
    return _component(f"{name}/{dist['name']}", dist["name"], version or "component",
                      "library", f"pkg:pypi/{dist['name']}@{version}" if version else None,
                      dist.get("sha256") or None, dist.get("url") or None, props)


def components_of(spec: ImageSpec, lock: Lock, outputs: dict[str, JsonDoc]) -> list[Component]:
    out = []
    for name, entry in sorted(lock.entries.items()):
        if entry.resolved is not None:
            out += _pinned(name, entry.resolved)
    owners: dict[str, list[str]] = {}  # a stack two components share (an engine's parts) lists its patches once
    patches: dict[str, PatchRef] = {}
    for owner, patch in spec.all_patches:
        owners.setdefault(patch.name, []).append(owner)
        patches.setdefault(patch.name, patch)
    for name, patch in patches.items():
        out.append(_component(f"patch/{name}", f"patches/{name}", patch.patch.sha256[:12], "file",
                              sha256=patch.patch.sha256, props={"enginebuild:applies-to": ", ".join(owners[name])}))
    for comp in spec.components:
        record = outputs.get(comp.name)
        if record:
            out.append(_component(f"component/{comp.name}", comp.name, str(record.get("key", ""))[:16], "application",
                                  sha256=str(record["sha256"]), props={"enginebuild:component": comp.name}))
    return out


def sbom_key(spec: ImageSpec, lock: Lock, repository: str, outputs: dict[str, JsonDoc]) -> str:
    """Everything the SBOM says: the same inputs, the same document."""

    return keys.key_of("sbom", version=__version__, image=spec.name, repository=repository, created=lock.created,
                       inputs={n: e.resolved for n, e in sorted(lock.entries.items())},
                       patches=[[owner, p.name, p.patch.sha256] for owner, p in spec.all_patches],
                       components=[[c.name, outputs[c.name].get("key"), outputs[c.name]["sha256"]]
                                   for c in spec.components if c.name in outputs])


def make_sbom(spec: ImageSpec, lock: Lock, repository: str, outputs: dict[str, JsonDoc],
              store: Store | None = None) -> bytes:
    """The SBOM of an image made of these inputs, written once per set of inputs (kept in the store).
    It does not name the image's digest: the referrer manifest that attaches it does (its
    `subject`), so an image that differs only in a script has the same document, which the
    registry already holds."""
    key = sbom_key(spec, lock, repository, outputs)
    found = store.record("sboms", key) if store is not None else None
    if found is not None:
        return str(found["text"]).encode()
    document = write_sbom(spec, lock, repository, outputs, key)
    if store is not None:
        store.put_record("sboms", key, {"text": document.decode()})
    return document


def write_sbom(spec: ImageSpec, lock: Lock, repository: str, outputs: dict[str, JsonDoc],
               key: str | None = None) -> bytes:
    """The document; `key`: its sbom_key when the caller has it already."""


    key = key or sbom_key(spec, lock, repository, outputs)
    created = dt.datetime.fromisoformat(lock.created.replace("Z", "+00:00"))
    root = Component(name=repository, version=f"inputs-{key[:16]}", type=ComponentType.CONTAINER,
                     bom_ref=BomRef("image"),
                     properties=[Property(name="enginebuild:image", value=spec.name),
                                 Property(name="enginebuild:inputs", value=key),
                                 Property(name="enginebuild:version", value=__version__)])
    bom = Bom(serial_number=uuid.uuid5(uuid.NAMESPACE_URL, f"enginebuild:{repository}:{key}"),
              metadata=BomMetaData(component=root, timestamp=created))
    for component in components_of(spec, lock, outputs):
        bom.components.add(component)
        bom.register_dependency(root, [component])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        text = make_outputter(bom, OutputFormat.JSON, SchemaVersion.V1_6).output_as_string(indent=None)
    return text.encode()
