"""Domain lints for Spark serving images, run when a spec loads.

Errors (exit 2, at the file:line that causes them):
- a CUDA arch list with a bare `12.1` in an NVFP4 image (component build args, env or
  `cuda-archs`): it compiles the native FP4 kernels out and vLLM silently falls back to
  Marlin; GB10 needs `12.1a`;
- DFlash with an fp8 KV cache (DFlash needs BF16);
- a secret-looking value in env defaults, build args, labels, entrypoint or cmd.
Warnings: DFlash without the flash_attn attention backend (DFlash is non-causal); a step that
names a path `files:` writes (steps run below the file layers, so the step never sees it).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from enginebuild.errors import SpecError
from enginebuild.recipe.model import ImageSpec

ARCH_KEYS = ("TORCH_CUDA_ARCH_LIST", "FLASHINFER_CUDA_ARCH_LIST")
SECRET_NAME = re.compile(r"(?:^|_)(?:API_?KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIALS?|PRIVATE_KEY)(?:$|_)", re.I)
SECRET_VALUE = re.compile(
    r"hf_[A-Za-z0-9]{20,}|gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}|sk-[A-Za-z0-9_-]{20,}"
    r"|glpat-[A-Za-z0-9_-]{20,}|AKIA[0-9A-Z]{16}|xox[baprs]-[A-Za-z0-9-]{10,}|nvapi-[A-Za-z0-9_-]{20,}"
    r"|-----BEGIN [A-Z ]*PRIVATE KEY-----")
FP8_ARG = re.compile(r"--kv-cache-dtype[= ]+fp8")
BARE = ("12.1", "12.1+PTX")


def _arch_entries(value: str) -> list[str]:
    return [e for e in re.split(r"[;,\s]+", value) if e]


def _check_secrets(spec: ImageSpec, pairs: Iterable[tuple[str, str]], prefix: str) -> None:
    for key, value in pairs:
        where = spec.where(f"{prefix}.{key}")
        if value and SECRET_NAME.search(key):
            raise SpecError(where, f"{prefix}.{key}", "looks like a secret; a secret must never be baked into an image",
                            hint="pass it at run time (docker run -e NAME), or to a build as a secret "
                                 "(components.NAME.build.secrets)")
        if SECRET_VALUE.search(value or ""):
            raise SpecError(where, f"{prefix}.{key}", "the value looks like a token or key; secrets must never be "
                                                      "baked into an image", hint="pass it at run time instead")


def _bare_arch(spec: ImageSpec) -> None:
    places: list[tuple[str, str]] = [(f"env.{k}", v) for k, v in spec.env if k in ARCH_KEYS]
    places += [(f"build-env.{k}", v) for k, v in spec.build_env if k in ARCH_KEYS]
    for comp in spec.components:
        places += [(f"components.{comp.name}.build.args.{k}", v) for k, v in comp.build.args if k in ARCH_KEYS]
        places += [(f"components.{comp.name}.cuda-archs", a) for a in comp.cuda_archs]
    places += [("cuda-archs", a) for a in spec.cuda_archs]
    for path, value in places:
        if any(e in BARE for e in _arch_entries(value)):
            raise SpecError(spec.where(path), path,
                            "bare 12.1 in an NVFP4 image compiles the native FP4 kernels out (vLLM silently falls "
                            f"back to Marlin); GB10 needs 12.1a, got {value!r}")


def lint_spec(spec: ImageSpec) -> list[str]:
    """Raise on the first error; return warnings as strings with their file:line."""
    warnings = []
    env = dict(spec.env)
    if spec.model.quantization.lower() == "nvfp4":
        _bare_arch(spec)
    dflash = bool(env.get("DFLASH_DRAFTER") or spec.model.drafter)
    if dflash:
        kv = env.get("KV_CACHE_DTYPE", "")
        if kv.startswith("fp8"):
            raise SpecError(spec.where("env.KV_CACHE_DTYPE"), "env.KV_CACHE_DTYPE",
                            f"DFlash needs a BF16 KV cache, got {kv!r}", hint="remove KV_CACHE_DTYPE or set it to auto")
        if FP8_ARG.search(env.get("EXTRA_ARGS", "")):
            raise SpecError(spec.where("env.EXTRA_ARGS"), "env.EXTRA_ARGS",
                            "DFlash needs a BF16 KV cache; --kv-cache-dtype fp8 is not allowed with it")
        backend, key = _attention_backend(spec, env)
        if backend != "flash_attn":
            warnings.append(f"{spec.where(key)}: warning: DFlash is non-causal and is meant to run with "
                            f"ATTENTION_BACKEND=flash_attn (got {backend or 'the default'!r})")
    _check_secrets(spec, spec.env, "env")
    _check_secrets(spec, spec.build_env, "build-env")
    for comp in spec.components:
        _check_secrets(spec, comp.build.args, f"components.{comp.name}.build.args")
    _check_secrets(spec, spec.labels, "labels")
    _check_launcher_mode(spec)
    warnings += _steps_reading_files(spec)
    for _, ref in spec.all_patches:
        if ref.patch.lacks:
            warnings.append(f"{ref.where}: warning: patches/{ref.name} has no {', '.join(ref.patch.lacks)} line: "
                            "taken as it is; say what it does and where it stands upstream in a header "
                            f"(docs/patches.md), or in patches/{ref.name}.header beside it where the patch's "
                            "bytes must stay, so `patches check` can tell when it is no longer needed")
    for field in ("entrypoint", "cmd"):
        for i, arg in enumerate(getattr(spec, field) or ()):
            if SECRET_VALUE.search(arg) or re.search(r"--(?:api-key|hf-token|token)[= ]+\S", arg):
                raise SpecError(spec.where(field), f"{field}[{i}]", "looks like a secret on the command line; "
                                                                   "pass it at run time instead")
    return warnings


BACKEND_ARG = re.compile(r"--attention[-_]backend(?:=|\s+)[\"']?([A-Za-z0-9_]+)")


def _attention_backend(spec: ImageSpec, env: dict[str, str]) -> tuple[str, str]:
    """The attention backend the image's server is started with, and the key that says it:
    `ATTENTION_BACKEND` (the launchers' variable), `VLLM_ATTENTION_BACKEND`, or `--attention-backend`
    on the command line (the entrypoint, cmd, a variable such as EXTRA_ARGS, or a launch script the
    image's files: copy)."""
    if env.get("ATTENTION_BACKEND"):
        return env["ATTENTION_BACKEND"].lower(), "env.ATTENTION_BACKEND"
    if env.get("VLLM_ATTENTION_BACKEND"):
        return env["VLLM_ATTENTION_BACKEND"].lower(), "env.VLLM_ATTENTION_BACKEND"
    said = [(" ".join(getattr(spec, field) or ()), field) for field in ("entrypoint", "cmd")]
    said += [(value, f"env.{name}") for name, value in env.items()]
    for group in spec.files:
        for entry in group.entries:
            if entry.src is not None and entry.src.is_file() and entry.src.stat().st_size < 1 << 20:
                said.append((entry.src.read_text(errors="replace"), f"files.{group.key}"))
    for text, key in said:
        found = BACKEND_ARG.search(text)
        if found:
            return found.group(1).lower(), key
    return "", "env.DFLASH_DRAFTER" if "DFLASH_DRAFTER" in env else "model.drafter"


def _steps_reading_files(spec: ImageSpec) -> list[str]:
    """Steps run on the runtime below the manifest and the `files` layers: a step naming a path
    that `files:` writes reads what is there before (usually nothing)."""
    out = []
    written = [(group.key.rstrip("/") or "/", group) for group in spec.files]
    for i, step in enumerate(spec.steps):
        text = step.run if isinstance(step.run, str) else " ".join(step.run)
        for dest, group in written:
            if re.search(rf"(?<![\w./-]){re.escape(dest)}(?![\w.-])", text):
                out.append(f"{spec.where(f'steps[{i}]')}: warning: step {step.name} names {dest}, which files: "
                           f"({group.where}) writes after the steps run: the step does not see it (copy it in the "
                           "step's own files:, or read it at run time)")
                break
    return out


def _check_launcher_mode(spec: ImageSpec) -> None:
    """The program the entrypoint starts (after an init's `--`), when the spec's files write it,
    must be executable: Docker would only say "permission denied" when the container starts."""
    argv = list(spec.entrypoint or ())
    if "--" in argv:
        argv = argv[argv.index("--") + 1:]
    if not argv:
        return
    for group in spec.files:
        for entry in group.entries:
            if entry.dest == argv[0] and not entry.mode & 0o111:
                raise SpecError(group.where, f"files.{group.key}",
                                f"{entry.display} is the entrypoint's program ({argv[0]}) but is not executable "
                                f"(mode {entry.mode:04o}): the container would fail to start",
                                hint=f"chmod +x {entry.display}, or give it mode: \"0755\"")

