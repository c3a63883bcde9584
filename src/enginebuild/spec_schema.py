"""The schema of `images/<name>/image.yaml`. docs/spec.md is its reference page."""
from __future__ import annotations

import re

from packaging.requirements import InvalidRequirement, Requirement
from packaging.version import InvalidVersion, Version

from enginebuild.schema import Bool, Enum, Int, ListOf, MapOf, OneOf, Record, Str

NAME = r"[a-z0-9][a-z0-9-]{0,62}"
ENV_NAME = r"[A-Za-z_][A-Za-z0-9_]{0,127}"
LABEL_KEY = r"[a-z0-9][a-z0-9._-]{0,127}"
HEX40 = re.compile(r"[0-9a-f]{40}")
DIGEST = r"sha256:[0-9a-f]{64}"
# registry[:port]/path[:tag][@sha256:...], lower-case repository path as the distribution spec demands
IMAGE_REF = (
    r"(?:[a-zA-Z0-9.-]+(?::[0-9]{1,5})?/)?[a-z0-9]+(?:[._-][a-z0-9]+)*(?:/[a-z0-9]+(?:[._-][a-z0-9]+)*)*"
    r"(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(?:@" + DIGEST + r")?"
)
PLATFORM = r"linux/(?:amd64|arm64|arm/v[5-8]|ppc64le|s390x|riscv64|386)"
ABS_PATH = re.compile(r"/(?:[A-Za-z0-9._@+=,-]+/?)*")


def _no_control(value: str) -> str | None:
    if any(ch in value for ch in "\n\r\x00"):
        return "newlines and NUL bytes are not allowed in this value"
    if len(value) > 4096:
        return f"value is {len(value)} characters; at most 4096"
    return None


def _abs_path(value: str) -> str | None:
    if not ABS_PATH.fullmatch(value):
        return ("expected an absolute path of letters, digits and ._@+=,- "
                f"(no spaces, quotes or $), got {value!r}")
    if any(part == ".." for part in value.split("/")):
        return f"'..' is not allowed in a path, got {value!r}"
    return None


def _rel_path(value: str) -> str | None:
    if value.startswith("/"):
        return f"expected a path relative to the spec's folder, got absolute path {value!r}"
    if "\\" in value or _no_control(value):
        return f"invalid path {value!r}"
    if any(part == ".." for part in value.split("/")):
        return f"'..' is not allowed: files must live inside the image folder, got {value!r}"
    if not value or value in (".",):
        return "empty path"
    return None


def _git_url(value: str) -> str | None:
    if value.startswith("-") or any(c.isspace() for c in value) or _no_control(value):
        return f"invalid git URL {value!r}"
    if not re.match(r"(?:https?|ssh|git|file)://|[A-Za-z0-9._-]+@[A-Za-z0-9.-]+:", value):
        return f"expected a git URL (https://, ssh://, git@host:, file://), got {value!r}"
    return None


def _git_ref(value: str) -> str | None:
    if (value.startswith("-") or ".." in value or value.endswith(".lock") or value.endswith("/")
            or not re.fullmatch(r"[A-Za-z0-9._/+-]{1,200}", value)):
        return f"invalid git ref {value!r}"
    return None


def _version(value: str) -> str | None:
    try:
        Version(value)
    except InvalidVersion:
        return f"expected a version such as 0.21.0, got {value!r}"
    return None


def _requirement(value: str) -> str | None:
    try:
        req = Requirement(value)
    except InvalidRequirement as exc:
        return f"invalid requirement {value!r}: {exc}"
    if req.url:
        return f"direct URL requirements are not allowed ({value!r}); name a version from the index"
    return None


def _url(value: str) -> str | None:
    if not re.fullmatch(r"https?://[A-Za-z0-9.:\[\]-]+(?:/[A-Za-z0-9._~%/+-]*)?", value):
        return f"expected an http(s) URL, got {value!r}"
    return None


def _patch_name(value: str) -> str | None:
    problem = _rel_path(value)
    if problem:
        return problem
    if not re.fullmatch(r"[A-Za-z0-9._/-]+\.(?:patch|diff)", value):
        return f"expected a patch file name under patches/ ending in .patch or .diff, got {value!r}"
    return None


def _mode(value: str) -> str | None:
    if not re.fullmatch(r"[0-7]{3,4}", value):
        return f"expected an octal file mode such as '0755', got {value!r}"
    if int(value, 8) & 0o7000:
        return "setuid, setgid and sticky bits are not allowed"
    return None


TEXT = Str(test=_no_control)
SCALAR_TEXT = Str(test=_no_control, allow_int=True, what="a string (quote it)")
ABS = Str(test=_abs_path, what="an absolute path")
REL = Str(test=_rel_path, what="a relative path")
def _command(value: str) -> str | None:
    problem = _no_control(value)
    if problem:
        return problem
    if value.rstrip().endswith("\\"):
        return "a command may not end in a backslash (it would continue into the next instruction)"
    return None


COMMAND = OneOf((Str(test=_command, what="a shell command"),
                 ListOf(Str(test=_no_control), max_items=256)))
FILE_ENTRY = OneOf((REL, Record({"src": REL, "mode": Str(test=_mode, what="an octal mode")},
                                required=("src",), doc="{src, mode}")))
FILES = MapOf(FILE_ENTRY, key_pattern=ABS_PATH.pattern, key_what="an absolute destination path")

SOURCE = Record(
    {
        "git": Record({"url": Str(test=_git_url, what="a git URL"), "ref": Str(test=_git_ref, what="a git ref"),
                       "commit": Str(pattern=r"[0-9a-f]{40}", what="a full commit id (40 lower-case hex digits)")},
                      exclusive=(("ref", "commit"),), need_one_of=("ref", "commit"), required=("url",),
                      doc="{url, ref} or {url, commit}"),
        "pypi": Record({"name": Str(pattern=r"[A-Za-z0-9][A-Za-z0-9._-]*", what="a project name"),
                        "version": Str(test=_version, what="a version")},
                       required=("version",), doc="{name, version}"),
        "path": REL,
    },
    exclusive=(("git", "pypi", "path"),),
    need_one_of=("git", "pypi", "path"),
    doc="one of git, pypi, path",
)

BUILD = Record(
    {
        "script": REL,
        "args": MapOf(SCALAR_TEXT, key_pattern=ENV_NAME, key_what="a variable name"),
        "cache": ListOf(ABS, unique=True),
        "secrets": ListOf(Str(pattern=ENV_NAME, what="an environment variable name"), unique=True),
    },
    required=("script",),
    doc="{script, args, cache, secrets}",
)

VENDOR = Record(
    {
        "name": Str(pattern=NAME, what="a lower-case name"),
        "source": SOURCE,
        "env": Str(pattern=ENV_NAME, what="an environment variable name"),
    },
    required=("name", "source", "env"),
    doc="{name, source, env}",
)

ENGINE = Record(
    {
        "name": Str(pattern=NAME, what="a lower-case name"),
        "source": SOURCE,
        "installed": ABS,
        "dest": ABS,
        "build": BUILD,
        "vendor": ListOf(VENDOR),
    },
    required=("name", "source"),
    doc="{name, source, installed, dest, build, vendor}",
)

MODEL = Record(
    {
        "name": TEXT,
        "quantization": Enum(("nvfp4", "mxfp4", "fp8", "bf16", "int4", "gguf")),
        "format": Enum(("modelopt", "compressed-tensors", "gguf", "hf")),
        "drafter": TEXT,
    },
    doc="{name, quantization, format, drafter}",
)

PLUGIN = Record(
    {
        "name": Str(pattern=NAME, what="a lower-case name"),
        "source": SOURCE,
        "patches": ListOf(Str(test=_patch_name, what="a patch name"), unique=True),
        "files": FILES,
    },
    required=("name", "source"),
    doc="{name, source, patches, files}",
)

IMAGE = Record(
    {
        "extends": Str(pattern=NAME, what="the name of another image"),
        "abstract": Bool(),
        "description": TEXT,
        "model": MODEL,
        "platform": Str(pattern=PLATFORM, what="a platform such as linux/arm64"),
        "base": Str(pattern=r"scratch|" + IMAGE_REF, what="an image reference (repo:tag or repo@sha256:...) or scratch"),
        "system": Record(
            {
                "packages": ListOf(Str(pattern=r"[a-z0-9][a-z0-9+.-]+", what="a Debian package name"), unique=True),
                "archive": Record({"url": Str(test=_url, what="an archive URL"),
                                   "suite": Str(pattern=r"[a-z0-9-]+", what="a suite name"),
                                   "components": ListOf(Str(pattern=r"[a-z0-9-]+", what="a component"))},
                                  doc="{url, suite, components}"),
                "install": Enum(("dpkg", "extract")),
                "run": ListOf(COMMAND),
            },
            doc="{packages, archive, install, run}",
        ),
        "python": Record(
            {
                "requirements": ListOf(Str(test=_requirement, what="a requirement"), unique=True),
                "index": Str(test=_url, what="an index URL"),
                "version": Str(pattern=r"3\.[0-9]{1,2}", what="a Python version such as '3.12'"),
                "pip": TEXT,
            },
            doc="{requirements, index, version, pip}",
        ),
        "engine": ENGINE,
        "patches": ListOf(Str(test=_patch_name, what="a patch name"), unique=True),
        "plugins": ListOf(PLUGIN),
        "files": FILES,
        "env": MapOf(SCALAR_TEXT, key_pattern=ENV_NAME, key_what="a variable name"),
        "workdir": ABS,
        "user": Str(pattern=r"[a-z0-9_][a-z0-9_.-]{0,31}(?::[a-z0-9_][a-z0-9_.-]{0,31})?", what="a user[:group]"),
        "expose": ListOf(Int(minimum=1, maximum=65535), unique=True),
        "entrypoint": ListOf(Str(test=_no_control)),
        "cmd": ListOf(Str(test=_no_control)),
        "labels": MapOf(SCALAR_TEXT, key_pattern=LABEL_KEY, key_what="a label key (lower-case, dotted)"),
    },
    required=("base",),
    doc="an image spec",
)
