"""The plan: an image spec and its lock become an ordered chain of content-addressed stages.

Pure: no builder, no network. A stage's key hashes its parent's key, its rendered
instructions and the exact bytes of every file in its own build context, so a change
reaches only the stages at and after the one whose inputs changed.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path

from enginebuild import render
from enginebuild.context import ContextItem, tar_directory
from enginebuild.errors import LockError
from enginebuild.lockfile import Lock, stale_inputs
from enginebuild.spec import ImageSpec, Source

STAGE_REPO = "enginebuild/stage"
KEY_VERSION = "enginebuild-stage-v1"
PLUGIN_DIR = "/opt/enginebuild/plugins"
MANIFEST_PATH = "/opt/enginebuild/manifest.json"
MAX_FILE_LAYERS = 32  # files beyond this share the last layer


def _sha(data) -> str:
    if isinstance(data, str):
        data = data.encode()
    return hashlib.sha256(data).hexdigest()


def _canonical(value) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


@dataclass(frozen=True)
class Stage:
    name: str
    parent_ref: str
    parent_key: str
    dockerfile: str
    context: tuple
    inputs: dict = field(compare=False, hash=False)
    secrets: tuple = ()
    key: str = ""

    @property
    def tag(self) -> str:
        return f"{STAGE_REPO}:{self.key}"

    @property
    def short(self) -> str:
        return self.key[:12]


@dataclass(frozen=True)
class Plan:
    image: str
    platform: str
    base_ref: str
    stages: tuple
    manifest: dict = field(compare=False, hash=False)
    image_tag: str = ""

    @property
    def final(self) -> Stage:
        return self.stages[-1]


def _finish(name, parent_ref, parent_key, platform, dockerfile, items, extra_inputs=None, secrets=()) -> Stage:
    items = tuple(sorted(items, key=lambda i: i.arcname))
    body = "\n".join(line for line in dockerfile.splitlines() if not line.startswith("FROM "))
    inputs = {"parent": parent_key, "instructions": _sha(body)}
    for item in items:
        inputs[f"file {item.label or item.arcname}"] = item.digest
    for k, v in (extra_inputs or {}).items():
        inputs[k] = _sha(_canonical(v))
    key = _sha(_canonical({
        "v": KEY_VERSION, "stage": name, "platform": platform, "parent": parent_key, "dockerfile": dockerfile,
        "context": [[i.arcname, i.mode, i.digest] for i in items], "secrets": list(secrets),
    }))
    return Stage(name=name, parent_ref=parent_ref, parent_key=parent_key, dockerfile=dockerfile,
                 context=items, inputs=inputs, secrets=tuple(secrets), key=key)


def pinned(lock: Lock, name: str, spec: ImageSpec):
    entry = lock.inputs.get(name) or {}
    resolved = entry.get("resolved")
    if resolved is None:
        why = entry.get("unresolved", "not resolved")
        raise LockError(f"{spec.where(name.split('.')[0])}: input {name!r} is not pinned in lockfiles/{spec.name}.lock: {why}",
                        hint=f"run `python BUILD.py lock {spec.name}` where its source is reachable")
    return resolved


def placeholder(lock: Lock, name: str) -> dict:
    """What `render --unpinned` shows for an input the lock could not resolve: the request itself."""
    request = (lock.inputs.get(name) or {}).get("request") or {}
    if name == "base":
        return {"ref": f"{request.get('ref')}  # NOT PINNED"}
    if name == "system":
        return {"packages": []}
    if name == "python":
        return {"files": []}
    if request.get("kind") == "git":
        return {"kind": "git", "url": request["url"], "commit": f"UNPINNED-{request['ref']}"}
    return dict(request)


def check_lock_for_build(spec: ImageSpec, lock: Lock | None) -> Lock:
    problems = stale_inputs(spec, lock)
    if problems:
        detail = "; ".join(f"{name}: {why}" for name, why in problems)
        where = spec.where(problems[0][0]) if problems[0][0] != "lockfile" else spec.where("base")
        raise LockError(f"{where}: refusing to build with inputs that are not pinned in the lock ({detail})",
                        hint=f"run `python BUILD.py lock {spec.name}` and commit lockfiles/{spec.name}.lock")
    for name in lock.inputs:
        pinned(lock, name, spec)
    return lock


class _Planner:
    def __init__(self, spec: ImageSpec, lock: Lock, build_args: dict, base_ref: str | None = None,
                 strict: bool = True):
        self.spec, self.lock, self.build_args, self.strict = spec, lock, build_args, strict
        self.stages: list = []
        self.vendor_env: dict = {}
        self.base_ref = base_ref or self.pin("base")["ref"]
        self.parent_ref = self.base_ref
        self.parent_key = _sha(_canonical({"base": self.base_ref, "platform": spec.platform}))

    def pin(self, name: str) -> dict:
        if not self.strict and (self.lock.inputs.get(name) or {}).get("resolved") is None:
            return placeholder(self.lock, name)
        return pinned(self.lock, name, self.spec)

    def add(self, name, template, values, items, extra_inputs=None, secrets=()):
        dockerfile = render.render(template, parent=self.parent_ref, **values)
        stage = _finish(name, self.parent_ref, self.parent_key, self.spec.platform, dockerfile, items,
                        extra_inputs, secrets)
        self.stages.append(stage)
        self.parent_ref, self.parent_key = stage.tag, stage.key

    # -- sources ---------------------------------------------------------------------------
    def source_item(self, source: Source, resolved: dict, arc_dir: str, prefix: str) -> tuple:
        """(context item, top folder inside the archive) for an engine or plugin source."""
        if source.kind == "pypi":
            filename = resolved["filename"]
            top = _sdist_top(filename)
            item = ContextItem(f"{arc_dir}/{filename}", resolved["sha256"], artifact=resolved["sha256"])
            return item, top, f"{resolved['name']}=={resolved['version']} sha256:{resolved['sha256'][:12]}"
        if source.kind == "git":
            commit = resolved["commit"]
            digest = _sha(_canonical({"git": resolved["url"], "commit": commit, "prefix": prefix}))
            item = ContextItem(f"{arc_dir}/{prefix}.tar", digest, derive=("git-archive", resolved["url"], commit, prefix))
            return item, prefix, f"{resolved['url']} {commit}"
        data = tar_directory(source.path, prefix)
        return ContextItem(f"{arc_dir}/{prefix}.tar", _sha(data), data=data), prefix, f"path {source.display}"

    def patch_items(self, patches, arc_dir: str) -> tuple:
        items = [ContextItem(f"{arc_dir}/apply_patches.sh", _sha(render.template_bytes("apply_patches.sh")),
                             mode=0o755, data=render.template_bytes("apply_patches.sh"))]
        names = []
        for patch in patches:
            name = patch.name.replace("/", "__")
            items.append(ContextItem(f"{arc_dir}/{name}", patch.parsed.sha256, data=patch.data,
                                     label=f"patches/{patch.name}"))
            names.append(name)
        return items, names

    # -- stages ----------------------------------------------------------------------------
    def system(self):
        s = self.spec.system
        if not s or not (s.packages or s.run):
            return
        debs = self.pin("system")["packages"] if s.packages else []
        if s.install == "extract":
            digest = _sha(_canonical({"sysroot": [d["sha256"] for d in debs]}))
            items = [ContextItem("sysroot.tar", digest, derive=("sysroot", tuple((d["sha256"], d["filename"]) for d in debs)))]
        else:
            items = [ContextItem(f"debs/{Path(d['filename']).name}", d["sha256"], artifact=d["sha256"]) for d in debs]
        self.add("system", "system.Dockerfile", {"packages": debs, "install": s.install, "run": list(s.run)}, items,
                 {"packages": [(d["name"], d["version"]) for d in debs], "run": list(s.run)})

    def python(self):
        p = self.spec.python
        if not p or not p.requirements:
            return
        files = self.pin("python")["files"]
        lines = [f"{f['name']}=={f['version']} --hash=sha256:{f['sha256']}\n" for f in files]
        req = "".join(lines).encode()
        items = [ContextItem(f"python/{f['filename']}", f["sha256"], artifact=f["sha256"]) for f in files]
        items.append(ContextItem("python/requirements.txt", _sha(req), data=req))
        self.add("python", "python.Dockerfile", {"count": len(files), "pip": p.pip}, items,
                 {"requirements": [(f["name"], f["version"]) for f in files]})

    def engine(self) -> str | None:
        """Adds the source stage; returns the folder the patch stack applies to."""
        e = self.spec.engine
        if e is None:
            return None
        if e.overlay:
            return e.installed
        resolved = self.pin("engine") if e.source.kind != "path" else {}
        item, top, pin = self.source_item(e.source, resolved, "source", e.name)
        items, vendor, pins = [item], [], {"source": pin}
        for v in e.vendor:
            vpin = self.pin(f"vendor.{v.name}") if v.source.kind != "path" else {}
            vitem, vtop, vdesc = self.source_item(v.source, vpin, "vendor", v.name)
            items.append(vitem)
            vendor.append({"archive": vitem.arcname})
            self.vendor_env[v.env] = f"{e.dest}/vendor/{vtop}"
            pins[f"vendor {v.name}"] = vdesc
        self.add("engine-source", "engine-source.Dockerfile",
                 {"engine": e.name, "pin": pin, "archive": item.arcname, "dest": e.dest, "vendor": vendor}, items, pins)
        return f"{e.dest}/{top}"

    def patches(self, target: str | None):
        if not self.spec.patches:
            return
        items, names = self.patch_items(self.spec.patches, "patches")
        self.add("patches", "patches.Dockerfile", {"engine": self.spec.engine.name, "target": target, "names": names},
                 items, {"stack": names})

    def engine_build(self, srcdir: str | None):
        e = self.spec.engine
        if e is None or e.build is None:
            return
        args = dict(self.vendor_env)
        args.update(dict(e.build.args))
        args.update(self.build_args)
        data = e.build.script.src.read_bytes()
        items = [ContextItem("build.sh", _sha(data), mode=0o755, data=data, label=e.build.script.display)]
        self.add("engine-build", "engine-build.Dockerfile",
                 {"engine": e.name, "srcdir": srcdir, "cache": list(e.build.cache), "secrets": list(e.build.secrets),
                  "args": sorted(args.items())},
                 items, {"args": sorted(args.items())}, secrets=e.build.secrets)

    def plugins(self):
        if not self.spec.plugins:
            return
        items, rendered = [], []
        for plugin in self.spec.plugins:
            resolved = self.pin(f"plugin.{plugin.name}") if plugin.source.kind != "path" else {}
            item, top, _ = self.source_item(plugin.source, resolved, "plugin-src", plugin.name)
            items.append(item)
            patch_items, names = self.patch_items(plugin.patches, f"plugin-{plugin.name}") if plugin.patches else ([], [])
            items += patch_items
            items += [ContextItem(f"plugin-files-{plugin.name}{f.dest}", _sha(f.src.read_bytes()), mode=f.mode,
                                  path=f.src, label=f.display) for f in plugin.files]
            rendered.append({"name": plugin.name, "archive": item.arcname, "srcdir": f"{PLUGIN_DIR}/{top}",
                             "patches": names, "has_files": bool(plugin.files)})
        pip = self.spec.python.pip if self.spec.python else "python3 -m pip"
        self.add("plugins", "plugins.Dockerfile", {"plugins": rendered, "pip": pip}, items)

    def files(self, manifest: dict, labels: list):
        """One layer per file (the manifest first), so an edit re-uploads only its own layer."""
        s = self.spec
        data = (json.dumps(manifest, indent=2, sort_keys=True) + "\n").encode()
        items = [ContextItem(f"files/00{MANIFEST_PATH}", _sha(data), data=data)]
        for i, f in enumerate(s.files, 1):
            layer = f"{min(i, MAX_FILE_LAYERS):02d}"
            items.append(ContextItem(f"files/{layer}{f.dest}", _sha(f.src.read_bytes()), mode=f.mode, path=f.src,
                                     label=f.display))
        layers = sorted({item.arcname.split("/")[1] for item in items})
        self.add("files", "files.Dockerfile",
                 {"image": s.name, "layers": layers, "env": list(s.env), "labels": labels, "expose": list(s.expose),
                  "workdir": s.workdir, "user": s.user, "entrypoint": s.entrypoint, "cmd": s.cmd},
                 items, {"env": list(s.env), "labels": labels, "entrypoint": s.entrypoint, "cmd": s.cmd})


def _sdist_top(filename: str) -> str:
    for suffix in (".tar.gz", ".tgz", ".tar.bz2", ".tar.xz", ".tar"):
        if filename.endswith(suffix):
            return filename[: -len(suffix)]
    raise LockError(f"source archive {filename} is not a tar archive; only tar sdists can be unpacked by the builder")


def patch_list(spec: ImageSpec) -> list:
    out = [{"name": p.name, "sha256": p.parsed.sha256, "applies_to": spec.engine.name if spec.engine else ""}
           for p in spec.patches]
    for plugin in spec.plugins:
        out += [{"name": p.name, "sha256": p.parsed.sha256, "applies_to": plugin.name} for p in plugin.patches]
    return out


def build_manifest(spec: ImageSpec, lock: Lock) -> dict:
    inputs = {name: entry.get("resolved") for name, entry in sorted(lock.inputs.items())}
    return {"enginebuild-manifest": 1, "image": spec.name, "platform": spec.platform, "created": lock.created,
            "inputs": inputs, "patches": patch_list(spec)}


def image_labels(spec: ImageSpec, lock: Lock, manifest: dict) -> list:
    engine = lock.resolved("engine") or {}
    revision = engine.get("commit") or (f"{engine.get('name')}=={engine.get('version')}" if engine.get("version") else "")
    labels = {
        "org.opencontainers.image.title": spec.name,
        "org.opencontainers.image.description": spec.description,
        "org.opencontainers.image.source": engine.get("url", "") if engine.get("kind") == "git" else "",
        "org.opencontainers.image.revision": revision,
    }
    labels.update(dict(spec.labels))
    base = lock.resolved("base") or {}
    labels.update({
        "org.opencontainers.image.created": lock.created,
        "org.opencontainers.image.base.name": base.get("ref", ""),
        "org.opencontainers.image.base.digest": base.get("digest", ""),
        "org.enginebuild.platform": spec.platform,
        "org.enginebuild.engine": revision,
        "org.enginebuild.patches": ",".join(f"{p['name']}@sha256:{p['sha256']}" for p in manifest["patches"]),
        "org.enginebuild.manifest": MANIFEST_PATH,
        "org.enginebuild.inputs": _sha(_canonical(manifest["inputs"])),
    })
    return sorted((k, v) for k, v in labels.items() if v)


def _fresh(spec: ImageSpec, lock: Lock | None) -> Lock:
    problems = stale_inputs(spec, lock)
    if problems:
        check_lock_for_build(spec, lock)  # raises, naming the stale input
    return lock


STAGE_KINDS = ("system", "python", "engine-source", "patches", "engine-build", "plugins", "files")


def plan_image(spec: ImageSpec, lock: Lock | None, *, build_args: dict | None = None,
               on: str | None = None, only=None, platform: str | None = None, strict: bool = True) -> Plan:
    """The stage chain of an image. `on` (a digest-pinned image) replaces the base and `only`
    keeps some stage kinds: how a recipe's last stages are tried on a stand-in base. With
    strict=False, inputs the lock records as unresolved are shown as what was requested
    (for reading a plan, never for building it)."""
    # on a stand-in base, only the stages built need their inputs pinned (checked as they are planned)
    lock = check_lock_for_build(spec, lock) if strict and not on else _fresh(spec, lock)
    if platform:
        spec = dataclasses.replace(spec, platform=platform)
    only = set(only or STAGE_KINDS)
    planner = _Planner(spec, lock, build_args or {}, base_ref=on, strict=strict)
    if "system" in only:
        planner.system()
    if "python" in only:
        planner.python()
    target = planner.engine() if "engine-source" in only else (spec.engine.installed if spec.engine else None)
    if "patches" in only:
        planner.patches(target)
    if "engine-build" in only:
        planner.engine_build(target)
    if "plugins" in only:
        planner.plugins()
    manifest = build_manifest(spec, lock)
    labels = image_labels(spec, lock, manifest)
    if on:
        labels = sorted([(k, v) for k, v in labels if not k.startswith("org.opencontainers.image.base.")]
                        + [("org.opencontainers.image.base.name", on), ("org.enginebuild.stand-in-base", on)])
    planner.files(manifest, labels)
    tag = f"enginebuild/{spec.name}:latest" if not on else f"enginebuild/{spec.name}:on-{on.rsplit(':', 1)[-1][:12]}"
    return Plan(image=spec.name, platform=spec.platform, base_ref=planner.base_ref,
                stages=tuple(planner.stages), manifest=manifest, image_tag=tag)
