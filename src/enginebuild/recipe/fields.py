"""The schema of `images/<name>/image.yaml`. docs/spec.md is its reference page, and
`python BUILD.py schema` prints the JSON Schema generated from these same nodes."""

from __future__ import annotations

import dataclasses
import re

from packaging.requirements import InvalidRequirement, Requirement

from enginebuild.core.platforms import PATTERN, platform_hint
from enginebuild.core.schema import Bool, Enum, Int, ListOf, MapOf, OneOf, Record, Schema, Str
from enginebuild.recipe.model import ImageSpec, spec_keys
from enginebuild.sources import kinds

NAME = r"[a-z0-9][a-z0-9._-]{0,62}"  # images, components, variants: llama.cpp is a name
ENV_NAME = r"[A-Za-z_][A-Za-z0-9_]{0,127}"
LABEL_KEY = r"[a-z0-9][a-z0-9._-]{0,127}"
DIGEST = r"sha256:[0-9a-f]{64}"
IMAGE_REF = (
    r"(?:[a-zA-Z0-9.-]+(?::[0-9]{1,5})?/)?[a-z0-9]+(?:[._-][a-z0-9]+)*(?:/[a-z0-9]+(?:[._-][a-z0-9]+)*)*"
    r"(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(?:@" + DIGEST + r")?"
)
PLATFORM = PATTERN
ABS_PATH = r"/(?:[A-Za-z0-9._@+=,-]+/?)*"
DURATION = r"[0-9]{1,6}(?:ms|s|m|h)"
CUDA_ARCH = r"[0-9]{1,2}\.[0-9][af]?(?:\+PTX)?"


def no_control(value: str) -> str | None:
    if any(ch in value for ch in "\n\r\x00"):
        return "newlines and NUL bytes are not allowed in this value"
    if len(value) > 4096:
        return f"value is {len(value)} characters; at most 4096"
    return None


def _abs_path(value: str) -> str | None:
    if not re.fullmatch(ABS_PATH, value):
        return ("expected an absolute path of letters, digits and ._@+=,- "
                f"(no spaces, quotes or $), got {value!r}")
    if any(part == ".." for part in value.split("/")):
        return f"'..' is not allowed in a path, got {value!r}"
    return None


def rel_path(value: str) -> str | None:
    if value.startswith("/"):
        return f"expected a path relative to the spec's folder, got absolute path {value!r}"
    if "\\" in value or no_control(value):
        return f"invalid path {value!r}"
    if any(part == ".." for part in value.split("/")):
        return f"'..' is not allowed: files must live inside the image folder, got {value!r}"
    if not value or value == ".":
        return "empty path"
    return None


def repo_path(value: str) -> str | None:
    """A path beside the spec that may reach elsewhere in the recipe repository with `..` (a
    shared scripts/ folder); the reader refuses one that resolves outside the repository."""
    if value.startswith("/"):
        return f"expected a path relative to the spec's folder, got absolute path {value!r}"
    if "\\" in value or no_control(value):
        return f"invalid path {value!r}"
    if not value or value == "." or value.strip("/") == "":
        return "empty path"
    return None


def _requirement(value: str) -> str | None:
    try:
        req = Requirement(value)
    except InvalidRequirement as exc:
        return f"invalid requirement {value!r}: {exc}"
    if req.url:
        return f"invalid requirement {value!r}: give a URL as {{requirement, url, sha256}}, so it is pinned"
    return None


def _url(value: str) -> str | None:
    if not re.fullmatch(r"https?://[A-Za-z0-9.:\[\]-]+(?:/[A-Za-z0-9._~%/+-]*)?", value):
        return f"expected an http(s) URL, got {value!r}"
    return None


def _patch_name(value: str) -> str | None:
    problem = rel_path(value)
    if problem:
        return problem
    if not re.fullmatch(r"[A-Za-z0-9._/+-]+\.(?:patch|diff)", value):
        return f"expected a patch file name under patches/ ending in .patch or .diff, got {value!r}"
    return None


def _mode(value: str) -> str | None:
    if not re.fullmatch(r"[0-7]{3,4}", value):
        return f"expected an octal file mode such as '0755', got {value!r}"
    if int(value, 8) & 0o7000:
        return "setuid, setgid and sticky bits are not allowed"
    return None


def _command(value: str) -> str | None:
    problem = no_control(value)
    if problem:
        return problem
    if value.rstrip().endswith("\\"):
        return "a command may not end in a backslash (it would continue into the next instruction)"
    return None


def _source_files(value: str) -> str | None:
    """A file, a folder or a glob beside the spec."""
    problem = repo_path(value.rstrip("/") or value)
    if problem:
        return problem
    if any(c in value for c in "[]{}"):
        return f"only * and ? are allowed as glob characters, got {value!r}"
    return None


TEXT = Str(test=no_control)
SCALAR_TEXT = Str(test=no_control, allow_int=True, what="a string (quote it)")
ABS = Str(test=_abs_path, what="an absolute path")


# a folder mounted into a build (a cache): BuildKit reads a mount's options split at ',' and '='
CACHE_DIR = Str(pattern=r"/(?:[A-Za-z0-9._@+-]+/?)*", test=_abs_path,
                what="an absolute path of letters, digits and ._@+- (a cache folder: BuildKit's mount options "
                     "are split at ',' and '=')")
REL = Str(test=repo_path, what="a path beside the spec (or, with .., elsewhere in the recipe repository)")
SHELL_COMMAND = Str(test=_command, what="a shell command")
COMMAND = OneOf((SHELL_COMMAND, ListOf(Str(test=no_control), max_items=256, what="an exec-form list of strings")),
                description="a shell command (a string) or an exec-form list")
PATCHES = ListOf(Str(test=_patch_name, what="a patch name"), unique=True,
                 description="patch files under patches/, applied in order, strictly")
SECRETS = ListOf(Str(pattern=ENV_NAME, what="an environment variable name"), unique=True,
                 description="host environment variables handed over as BuildKit secrets")
ARGS = MapOf(SCALAR_TEXT, key_pattern=ENV_NAME, key_what="a variable name")

FILE_ENTRY = OneOf((
    Str(test=_source_files, what="a file, folder or glob beside the spec"),
    Record({"src": Str(test=_source_files, what="a file, folder or glob beside the spec"),
            "mode": Str(test=_mode, what="an octal mode")},
           required=("src",), doc="{src, mode}"),
    Record({"url": Str(test=_url, what="an http(s) URL"),
            "sha256": Str(pattern=r"[0-9a-f]{64}", what="a sha256 (64 lower-case hex digits)"),
            "mode": Str(test=_mode, what="an octal mode")},
           required=("url", "sha256"), doc="{url, sha256, mode}"),
))
FILES = MapOf(FILE_ENTRY, key_pattern=ABS_PATH, key_what="an absolute destination path", nullable=True,
              description="destination in the image -> file, folder (dest ends in /) or glob beside the spec, "
                          "or a URL pinned by sha256")

def _script(value: str) -> str | None:
    """A step's shell script: several lines allowed (run as one `sh -c`), no NUL, at most 64 KiB."""
    if "\x00" in value:
        return "NUL bytes are not allowed in a script"
    if len(value.encode()) > 65536:
        return f"script is {len(value.encode())} bytes; at most 65536 (put a longer one in a file: files:)"
    if "\n" not in value.strip():
        return _command(value)
    return None


STEP = OneOf((
    Str(test=_command, what="a shell command"),
    Record({"name": Str(pattern=NAME, what="a step name"),
            "run": OneOf((Str(test=_script, what="a shell command or script"),
                          ListOf(Str(test=no_control), max_items=256)),
                         description="a shell command or a script of several lines, or an exec-form list"),
            "files": ListOf(REL, unique=True, max_items=64,
                            description="files beside the spec the step reads, at /opt/enginebuild/step/NAME "
                                        "(read-only, never in the image)"),
            "secrets": SECRETS, "cache": ListOf(CACHE_DIR, unique=True)},
           required=("run",), doc="{name, run, files, secrets, cache}"),
), description="a command run in the image (a string), or {name, run, files, secrets, cache}")
STEPS = ListOf(STEP, max_items=256)


def source_schema() -> Record:
    names = tuple(kinds())
    return Record({name: kind.schema for name, kind in kinds().items()}, exclusive=(names,), need_one_of=names,
                  doc="one of " + ", ".join(names), description="where the code comes from: " + "; ".join(
                      f"`{n}` {k.doc}" for n, k in kinds().items()))


def _archive() -> Record:
    keyring = Record({"file": REL, "url": Str(test=_url, what="an http(s) URL"),
                      "sha256": Str(pattern=r"[0-9a-f]{64}", what="a sha256")},
                     exclusive=(("file", "url"),), need_one_of=("file", "url"), doc="{file} or {url, sha256}")
    return Record({"url": Str(test=_url, what="an archive URL"),
                   "suite": Str(pattern=r"[a-z0-9./_-]+", what="a suite name (or a folder, for a flat archive)"),
                   "components": ListOf(Str(pattern=r"[a-z0-9-]+", what="a component")),
                   "flat": Bool(description="a flat repository: Packages and InRelease under url/suite"),
                   "keyring": keyring,
                   "fingerprint": Str(pattern=r"[0-9A-F]{40}", what="an OpenPGP fingerprint (40 upper-case hex)")},
                  required=("url",), doc="{url, suite, components, flat, keyring, fingerprint}")


def system_schema() -> Record:
    return Record({
        "packages": ListOf(Str(pattern=r"[a-z0-9][a-z0-9+.-]+(=[0-9][A-Za-z0-9.+~:-]*)?",
                               what="a Debian package name, or NAME=VERSION"), unique=True),
        "archives": ListOf(_archive(), max_items=16),
        "install": Enum(("dpkg", "extract"), description="dpkg -i in the image, or unpacked by enginebuild"),
        "upgrade": Bool(description="also pin (and install) newer versions of what the base has installed"),
        "run": OneOf((SHELL_COMMAND, ListOf(COMMAND, what="a list of commands (each a shell command or an exec-form "
                                                         "list of strings)")),
                     description="commands run after installing: one shell command, or a list of commands"),
    }, doc="{packages, archives, install, upgrade, run}")


def _port_protocol(value: str) -> str | None:
    port = int(value.partition("/")[0])
    return None if 1 <= port <= 65535 else f"port {port} is not between 1 and 65535"


def _source_path(value: str) -> str | None:
    parts = value.split("/")
    if value.startswith("/") or any(p in ("", ".", "..") for p in parts) or no_control(value) is not None:
        return "a relative path inside the component's source (no '..')"
    return None


def _requires_from(value: str) -> str | None:
    path, sep, part = value.partition("#")
    if sep and (part != "build-system" or not path.endswith(".toml")):
        return "FILE.toml#build-system is the one part of a file that can be named"
    return _source_path(path)


def _input_glob(value: str) -> str | None:
    if _source_path(value.replace("*", "x").replace("?", "x")) is not None:
        return "a relative path or glob inside the component's source (no '..', no leading /)"
    return None


def python_schema() -> Record:
    requirement = OneOf((
        Str(test=_requirement, what="a requirement (PEP 508)"),
        Record({"requirement": Str(test=_requirement, what="a requirement (PEP 508)"),
                "index": Str(pattern=NAME, what="the name of an index of python.indexes"),
                "git": Record({"url": Str(pattern=r"(?:https?|ssh|git|file)://\S+", what="a git URL"),
                               "ref": Str(pattern=r"[A-Za-z0-9._/+-]{1,200}", what="a git ref")},
                              required=("url", "ref"), doc="{url, ref}"),
                "url": Str(test=_url, what="a wheel or sdist URL"),
                "sha256": Str(pattern=r"[0-9a-f]{64}", what="a sha256"),
                "component": Str(pattern=NAME, what="a component producing wheels"),
                "deps": Bool(description="false: install this one without its dependencies"),
                "requires-from": ListOf(Str(test=_requires_from, what="a requirements file or pyproject.toml of the "
                                                                      "component's source"),
                                        unique=True, max_items=16,
                                        description="where the component's source states what its wheel needs "
                                                    "(default: its pyproject.toml's dependencies; "
                                                    "`pyproject.toml#build-system`: what its build requires, for a "
                                                    "build on the runtime's own environment)"),
                "exclude": ListOf(Str(pattern=r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?",
                                      what="a distribution name"), unique=True, max_items=64,
                                  description="distributions left out of what the component's source states it "
                                              "needs (provided otherwise: the base's build, another component), "
                                              "the rest of those files followed as they move")},
               required=("requirement",), exclusive=(("index", "git", "url", "component"),),
               doc="{requirement, index | git | url (+ sha256) | component (+ requires-from, exclude), deps}"),
    ))
    return Record({
        "requirements": ListOf(requirement, unique=True),
        "indexes": MapOf(Str(test=_url, what="an index URL (PEP 503 simple API)"), key_pattern=NAME,
                         key_what="an index name", description="named indexes; a requirement naming one is "
                                                               "resolved only there"),
        "version": Str(pattern=r"3\.[0-9]{1,2}", what="a Python version such as '3.12'",
                       description="required: the version of the image's Python interpreter (the base's or the "
                                   "system packages'), which every wheel is chosen for"),
        "site-packages": ABS,
        "interpreter": ABS,
        "constraints": ListOf(Str(test=_requirement, what="a requirement (PEP 508)"), unique=True),
        "overrides": ListOf(Str(test=_requirement, what="a requirement (PEP 508)"), unique=True,
                            description="requirements that replace every requirement on the same name in the "
                                        "closure, as uv's --override does (lift a package's cap: transformers>=5)"),
    }, doc="{requirements, indexes, version, site-packages, interpreter, constraints, overrides}")


def builder_field(description: str) -> Schema:
    """An environment written out, or the name of one: `runtime`, or a key of `environments`."""
    return OneOf((Str(pattern=NAME, what="the name of an environment (a key of environments:, or runtime)"),
                  Record(environment_fields(), doc="{base, system, python}")), description=description)


def environment_fields() -> dict[str, Schema]:
    return {"base": Str(pattern=r"scratch|" + IMAGE_REF, what="an image reference (repo:tag or repo@sha256:...) "
                                                              "or scratch"),
            "system": system_schema(), "python": python_schema()}


def component_schema() -> Record:
    outputs = Record({
        "wheels": ABS, "prefix": ABS, "to": ABS,
        "paths": ListOf(ABS, unique=True, max_items=256),
        "editable": ABS,
    }, exclusive=(("wheels", "prefix", "paths", "editable"),), need_one_of=("wheels", "prefix", "paths", "editable"),
        doc="{wheels} | {prefix, to} | {paths} | {editable}",
        description="what the component keeps: a folder of wheels, a prefix copied to `to`, paths, or its "
                    "source tree at a path with an editable install of it (`pip install -e`)")
    build = Record({"script": REL, "args": ARGS, "cache": ListOf(CACHE_DIR, unique=True), "secrets": SECRETS},
                   required=("script",), doc="{script, args, cache, secrets}")
    release = Record({"name": Str(pattern=r"[A-Za-z0-9][A-Za-z0-9._-]*", what="a project name"),
                      "version": Str(pattern=r"[0-9][A-Za-z0-9.!+_-]*", what="a version such as 0.21.0"),
                      "index": Str(test=_url, what="an index URL (PEP 503 simple API)")},
                     required=("version",), doc="{name, version, index}",
                     description="take the component's output from that release's wheel for the target platform "
                                 "and Python (pinned by sha256 per platform in the lock) instead of building it: "
                                 "its source, build and steps are not run; a patch of its stack reaching its "
                                 "declared inputs is refused (the release cannot carry it)")
    extra_source = Record({"source": source_schema(), "env": Str(pattern=ENV_NAME, what="a variable name")},
                          required=("source",), doc="{source, env}")
    return Record({
        "source": source_schema(),
        "sources": MapOf(extra_source, key_pattern=NAME, key_what="a source name", nullable=True,
                         description="more sources, unpacked at /opt/enginebuild/sources/NAME (vendored code, "
                                     "data files); `env` names a variable that receives the folder"),
        "patches": PATCHES,
        "builder": builder_field("the environment it builds on (default: the image's builder)"),
        "build": build,
        "needs": ListOf(Str(pattern=NAME, what="a component name"), unique=True),
        "outputs": outputs,
        "steps": STEPS,
        "cuda-archs": ListOf(Str(pattern=CUDA_ARCH, what="a CUDA arch such as 12.1a"), unique=True),
        "inputs": ListOf(Str(test=_input_glob, what="a path or glob of the component's source"), unique=True,
                         max_items=256,
                         description="the paths of its (patched) source the build reads, as globs (`csrc/**`, "
                                     "`CMakeLists.txt`): its key covers only those, and only those are in its "
                                     "build; default: the whole source"),
        "release": release,
        "patches-as-files": Bool(description="false: every patch of its stack goes into its build; default: a "
                                             "patch whose files its build installs verbatim (checked from the "
                                             "bytes) is applied to them as a layer of its own, and the build runs "
                                             "without it (docs/patches.md)"),
    }, need_one_of=("build", "release"), doc="a component")


def _check_fields() -> dict[str, Schema]:
    """How `verify` and `image` judge what was built: kernel architectures, the runtime closure, imports."""
    return {
    "cuda-verify": Record({
        "jit": Bool(description="accept PTX the driver can compile for a declared arch in place of its SASS"),
        "driver": Str(pattern=r"5[0-9]{2}", allow_int=True, what="a driver branch such as 580",
                      description="the NVIDIA driver branch the image must run on (580 for DGX Spark: CUDA "
                                  "13.0): PTX newer than its CUDA version and CUDA libraries of a newer "
                                  "major version fail verify"),
        "skip": ListOf(Record({"path": Str(test=no_control, what="a path glob in the image"), "why": TEXT},
                              required=("path", "why"), doc="{path, why}"),
                       description="binaries not held to cuda-archs, each with the reason"),
    }, doc="{jit, driver, skip}", description="how `verify` judges the kernel architectures of CUDA binaries"),
    "runtime-check": Record({
        "skip": ListOf(Record({"path": Str(test=no_control, what="a path glob in the image"), "why": TEXT},
                              required=("path", "why"), doc="{path, why}"),
                       description="binaries whose unresolved libraries do not fail the image, each with "
                                   "the reason (what is truly optional)"),
        "imports": Record({
            "env": MapOf(SCALAR_TEXT, key_pattern=ENV_NAME, key_what="a variable name",
                         description="variables the imports need (VLLM_TARGET_DEVICE: cpu on a machine "
                                     "without a GPU)"),
            "skip": ListOf(Record({"name": Str(pattern=r"[A-Za-z_][A-Za-z0-9_]*", what="a top-level module"),
                                   "why": TEXT}, required=("name", "why"), doc="{name, why}"),
                           description="top-level modules not imported, each with the reason"),
        }, doc="{env, skip}", description="import the top-level modules of every Python distribution "
                                          "enginebuild installs, in a container of the built image"),
    }, doc="{skip, imports}", description="how `image` and `verify` judge the runtime closure: every "
                                          "DT_NEEDED library of the binaries enginebuild adds must resolve "
                                          "inside the image; with `imports`, its Python packages import"),
    }


# the nodes a model field's `spec_key` names (recipe/model.py): the key is declared there, once
NODES: dict[str, Schema] = {
    "BOOL": Bool(),
    "TEXT": TEXT,
    "ABS": ABS,
    "USER": Str(pattern=r"[a-z0-9_][a-z0-9_.-]{0,31}(?::[a-z0-9_][a-z0-9_.-]{0,31})?|[0-9]{1,10}(?::[0-9]{1,10})?",
                what="a user[:group]"),
    "SIGNAL": Str(pattern=r"SIG[A-Z0-9]{2,8}|[0-9]{1,2}", what="a signal such as SIGTERM"),
    "DURATION": Str(pattern=DURATION, what="a duration such as 30s"),
    "COMPONENT_NAMES": ListOf(Str(pattern=NAME, what="a component name"), unique=True),
    "LABELS": MapOf(SCALAR_TEXT, key_pattern=LABEL_KEY, key_what="a label key (lower-case, dotted)", nullable=True),
    "CUDA_ARCHS": ListOf(Str(pattern=CUDA_ARCH, what="a CUDA arch such as 12.1a"), unique=True),
    "MANIFEST": Enum(("layer", "label")),
    "CACHE_FOLDERS": MapOf(Str(test=_abs_path, what="a folder in the image"), key_pattern=NAME,
                           key_what="a cache name", nullable=True),
}


def declared(model: type) -> dict[str, Schema]:
    """The schema of each key a field of `model` declares (`spec_key`), with its description."""
    out: dict[str, Schema] = {}
    for _, key in spec_keys(model):
        node = NODES[key.schema]
        out[key.key] = dataclasses.replace(node, description=key.doc) if key.doc else node  # type: ignore[type-var]
    return out


def image_schema() -> Record:
    healthcheck = Record({"test": COMMAND, "interval": Str(pattern=DURATION, what="a duration such as 30s"),
                          "timeout": Str(pattern=DURATION, what="a duration"),
                          "start-period": Str(pattern=DURATION, what="a duration"),
                          "retries": Int(minimum=0, maximum=100)},
                         required=("test",), doc="{test, interval, timeout, start-period, retries}")
    overlay = Record({"source": source_schema(), "installed": ABS, "patches": PATCHES},
                     required=("installed", "source"), doc="{installed, source, patches}")
    model = Record({"name": TEXT, "quantization": Str(pattern=r"[A-Za-z0-9][A-Za-z0-9_.+-]{0,63}",
                                                           what="a quantization such as nvfp4, fp8, Q4_K_M or IQ3_XXS"),
                    "format": Enum(("modelopt", "compressed-tensors", "gguf", "hf")), "drafter": TEXT},
                   doc="{name, quantization, format, drafter}")
    scan = Record({"allow": ListOf(Record({"path": Str(test=no_control, what="a path glob in the image"),
                                           "rule": Str(pattern=r"[a-z0-9-]+", what="a rule name"),
                                           "why": TEXT}, required=("path", "rule", "why"), doc="{path, rule, why}"))},
                  doc="{allow}")
    fields: dict[str, Schema] = {
        "extends": Str(pattern=NAME, what="the name of another image"),
        "model": model,
        "platform": Str(pattern=PLATFORM, what="a platform such as linux/arm64", hint=platform_hint),
        "platforms": ListOf(Str(pattern=PLATFORM, what="a platform such as linux/arm64", hint=platform_hint),
                            unique=True, max_items=8),
        **environment_fields(),
        "builder": builder_field("the default environment components build on"),
        "init": Bool(description="run Debian's tini (pinned by lock) as PID 1 before the entrypoint, so that "
                     "signals reach a launcher that does not handle them (docker run --init)"),
        "environments": MapOf(Record(environment_fields(), doc="{base, system, python}"), key_pattern=NAME,
                              key_what="an environment name", nullable=True,
                              description="named environments that `builder` (of the image or a component) "
                                          "names instead of repeating them"),
        "components": MapOf(component_schema(), key_pattern=NAME, key_what="a component name", nullable=True),
        "overlays": MapOf(overlay, key_pattern=NAME, key_what="an engine name", nullable=True,
                          description="patches applied to what the base already ships"),
        "steps": STEPS,
        "files": FILES,
        "env": MapOf(SCALAR_TEXT, key_pattern=ENV_NAME, key_what="a variable name", nullable=True,
                     description="the image's variables, set after its commands: a change rewrites the config "
                                 "and runs nothing"),
        "build-env": MapOf(SCALAR_TEXT, key_pattern=ENV_NAME, key_what="a variable name", nullable=True,
                           description="variables the runtime's commands (system.run, steps) see, as ENV before "
                                       "RUN: part of their keys; the image keeps them too"),
        "shell": ListOf(Str(test=no_control), max_items=16),
        "healthcheck": healthcheck,
        "expose": ListOf(OneOf((Int(minimum=1, maximum=65535),
                                Str(pattern=r"[0-9]{1,5}(?:/(?:tcp|udp|sctp))?", test=_port_protocol,
                                    what="a port such as 8000, or PORT/PROTOCOL such as 5353/udp"))),
                         unique=True, description="ports the server listens on: 8000 (TCP), or 5353/udp",
                         what="a list of ports (8000, or PORT/PROTOCOL such as 5353/udp)"),
        "entrypoint": ListOf(Str(test=no_control)),
        "cmd": ListOf(Str(test=no_control)),
        "secret-scan": scan,
        **_check_fields(),
        **declared(ImageSpec),
    }
    schema = Record(fields, exclusive=(("platform", "platforms"),), doc="an image spec")
    schema.fields["variants"] = MapOf(Record(dict(fields), doc="a partial spec merged over this one"),
                                      key_pattern=NAME, key_what="a variant name",
                                      description="named variations of this image (IMAGE:VARIANT), each locked "
                                                  "separately")
    schema.required = ("base",)
    return schema


_IMAGE: Record | None = None


def image() -> Record:
    global _IMAGE
    if _IMAGE is None:
        _IMAGE = image_schema()
    return _IMAGE
