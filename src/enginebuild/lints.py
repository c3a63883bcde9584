"""Domain lints for Spark serving images, run when a spec loads.

Errors (exit 2, at the file:line that causes them):
- a CUDA arch list with a bare `12.1` in an NVFP4 image: it compiles the native FP4
  kernels out and vLLM silently falls back to Marlin; GB10 needs `12.1a`;
- DFlash with an fp8 KV cache (DFlash needs BF16);
- a secret-looking value in env defaults, build args, labels, entrypoint or cmd.
Warnings: DFlash without the flash_attn attention backend (DFlash is non-causal).
"""
from __future__ import annotations

import re

from enginebuild.errors import SpecError
from enginebuild.spec import ImageSpec

ARCH_KEYS = ("TORCH_CUDA_ARCH_LIST", "FLASHINFER_CUDA_ARCH_LIST")
SECRET_NAME = re.compile(r"(?:^|_)(?:API_?KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIALS?|PRIVATE_KEY)(?:$|_)", re.I)
SECRET_VALUE = re.compile(
    r"hf_[A-Za-z0-9]{20,}|gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}|sk-[A-Za-z0-9_-]{20,}"
    r"|glpat-[A-Za-z0-9_-]{20,}|AKIA[0-9A-Z]{16}|xox[baprs]-[A-Za-z0-9-]{10,}|nvapi-[A-Za-z0-9_-]{20,}"
    r"|-----BEGIN [A-Z ]*PRIVATE KEY-----")
FP8_ARG = re.compile(r"--kv-cache-dtype[= ]+fp8")


def _arch_entries(value: str) -> list:
    return [e for e in re.split(r"[;,\s]+", value) if e]


def _check_secrets(spec: ImageSpec, pairs, prefix: str) -> None:
    for key, value in pairs:
        where = spec.where(f"{prefix}.{key}")
        if value and SECRET_NAME.search(key):
            raise SpecError(where, f"{prefix}.{key}", "looks like a secret; a secret must never be baked into an image",
                            hint="pass it at run time (docker run -e NAME) or to the build as a secret (engine.build.secrets)")
        if SECRET_VALUE.search(value or ""):
            raise SpecError(where, f"{prefix}.{key}", "the value looks like a token or key; secrets must never be baked "
                                                      "into an image", hint="pass it at run time instead")


def lint_spec(spec: ImageSpec) -> list:
    """Raise on the first error; return warnings as strings with their file:line."""
    warnings = []
    env = dict(spec.env)
    build_args = dict(spec.engine.build.args) if spec.engine and spec.engine.build else {}
    if spec.model.quantization == "nvfp4":
        for prefix, pairs in (("engine.build.args", build_args), ("env", env)):
            for key in ARCH_KEYS:
                if key in pairs and any(e in ("12.1", "12.1+PTX") for e in _arch_entries(pairs[key])):
                    raise SpecError(spec.where(f"{prefix}.{key}"), f"{prefix}.{key}",
                                    f"bare 12.1 in an NVFP4 image compiles the native FP4 kernels out "
                                    f"(vLLM silently falls back to Marlin); GB10 needs 12.1a, got {pairs[key]!r}")
    dflash = bool(env.get("DFLASH_DRAFTER") or spec.model.drafter)
    if dflash:
        kv = env.get("KV_CACHE_DTYPE", "")
        if kv.startswith("fp8"):
            raise SpecError(spec.where("env.KV_CACHE_DTYPE"), "env.KV_CACHE_DTYPE",
                            f"DFlash needs a BF16 KV cache, got {kv!r}", hint="remove KV_CACHE_DTYPE or set it to auto")
        if FP8_ARG.search(env.get("EXTRA_ARGS", "")):
            raise SpecError(spec.where("env.EXTRA_ARGS"), "env.EXTRA_ARGS", "DFlash needs a BF16 KV cache; "
                                                                            "--kv-cache-dtype fp8 is not allowed with it")
        backend = env.get("ATTENTION_BACKEND", "")
        if backend != "flash_attn":
            key = "env.ATTENTION_BACKEND" if "ATTENTION_BACKEND" in env else "env.DFLASH_DRAFTER"
            warnings.append(f"{spec.where(key)}: warning: DFlash is non-causal and is meant to run with "
                            f"ATTENTION_BACKEND=flash_attn (got {backend or 'the default'!r})")
    _check_secrets(spec, spec.env, "env")
    _check_secrets(spec, build_args.items(), "engine.build.args")
    _check_secrets(spec, spec.labels, "labels")
    for field in ("entrypoint", "cmd"):
        for i, arg in enumerate(getattr(spec, field) or ()):
            if SECRET_VALUE.search(arg) or re.search(r"--(?:api-key|hf-token|token)[= ]+\S", arg):
                raise SpecError(spec.where(field), f"{field}[{i}]", "looks like a secret on the command line; "
                                                                   "pass it at run time instead")
    return warnings
