"""Domain lints: each has a spec that triggers it and one that does not."""
import pytest

from enginebuild.errors import SpecError
from enginebuild.recipe.catalog import Catalog
from enginebuild.recipe.lints import lint_spec
from helpers.inprocess import run_in_process
from helpers.specs import BUSYBOX_BUILDER, write_image

SOURCE_BUILD = """
base: scratch
platform: linux/arm64
model: {{quantization: {quant}}}
components:
  vllm:
    source: {{path: src}}
    build:
      script: build.sh
      args: {{TORCH_CUDA_ARCH_LIST: "{arch}"}}
    outputs: {{wheels: /out}}
"""


def lint(workspace, name, text, files=None):
    write_image(workspace, name, text, files or {})
    return lint_spec(Catalog(workspace).load(name))


def lint_error(workspace, name, text, files=None) -> SpecError:
    with pytest.raises(SpecError) as info:
        lint(workspace, name, text, files)
    return info.value


FILES = {"src/a.c": "int a;\n", "build.sh": "#!/bin/sh\ntrue\n"}


def test_bare_12_1_in_an_nvfp4_image_is_an_error_at_its_line(workspace):
    error = lint_error(workspace, "t", SOURCE_BUILD.format(quant="nvfp4", arch="12.1"), FILES)
    assert error.message.startswith("images/t/image.yaml:9: components.vllm.build.args.TORCH_CUDA_ARCH_LIST: "
                                    "bare 12.1")


def test_bare_12_1_in_cuda_archs_is_an_error_too(workspace):
    error = lint_error(workspace, "t", "base: scratch\nmodel: {quantization: nvfp4}\ncuda-archs: ['12.1']\n")
    assert error.message.startswith("images/t/image.yaml:3: cuda-archs: bare 12.1")


def test_12_1a_in_an_nvfp4_image_passes(workspace):
    assert lint(workspace, "t", SOURCE_BUILD.format(quant="nvfp4", arch="12.1a"), FILES) == []


def test_bare_12_1_is_not_an_nvfp4_error_in_a_bf16_image(workspace):
    assert lint(workspace, "t", SOURCE_BUILD.format(quant="bf16", arch="12.1"), FILES) == []


def test_dflash_with_an_fp8_kv_cache_is_an_error(workspace):
    error = lint_error(workspace, "t", "base: scratch\nenv:\n  DFLASH_DRAFTER: /models/d\n  KV_CACHE_DTYPE: fp8_e4m3\n"
                                       "  ATTENTION_BACKEND: flash_attn\n")
    assert error.message == "images/t/image.yaml:4: env.KV_CACHE_DTYPE: DFlash needs a BF16 KV cache, got 'fp8_e4m3'"


def test_dflash_with_fp8_in_extra_args_is_an_error(workspace):
    error = lint_error(workspace, "t", "base: scratch\nenv:\n  DFLASH_DRAFTER: /models/d\n"
                                       "  EXTRA_ARGS: --kv-cache-dtype fp8\n  ATTENTION_BACKEND: flash_attn\n")
    assert "env.EXTRA_ARGS: DFlash needs a BF16 KV cache" in error.message


def test_dflash_with_a_bf16_cache_and_flash_attn_passes(workspace):
    assert lint(workspace, "t", "base: scratch\nenv:\n  DFLASH_DRAFTER: /models/d\n  KV_CACHE_DTYPE: auto\n"
                                "  ATTENTION_BACKEND: flash_attn\n") == []


def test_fp8_kv_without_dflash_passes(workspace):
    assert lint(workspace, "t", "base: scratch\nenv:\n  KV_CACHE_DTYPE: fp8\n") == []


def test_dflash_without_flash_attn_is_a_warning_with_its_line(workspace):
    warnings = lint(workspace, "t", "base: scratch\nenv:\n  DFLASH_DRAFTER: /models/d\n  ATTENTION_BACKEND: flashinfer\n")
    assert warnings == ["images/t/image.yaml:4: warning: DFlash is non-causal and is meant to run with "
                        "ATTENTION_BACKEND=flash_attn (got 'flashinfer')"]


@pytest.mark.parametrize("text,where", [
    ("env:\n  VLLM_API_KEY: abc123\n", "images/t/image.yaml:3: env.VLLM_API_KEY: looks like a secret"),
    ("env:\n  HF_TOKEN: x\n", "images/t/image.yaml:3: env.HF_TOKEN: looks like a secret"),
    ("env:\n  NOTE: hf_abcdefghijklmnopqrstuvwxyz0123\n", "images/t/image.yaml:3: env.NOTE: the value looks like a token"),
    ("labels:\n  org.x.token: ghp_abcdefghijklmnopqrstuvwxyz0123\n", "images/t/image.yaml:3: labels.org.x.token"),
    ("cmd: [\"--api-key=abc\"]\n", "images/t/image.yaml:2: cmd[0]: looks like a secret on the command line"),
])
def test_secret_looking_values_are_errors(workspace, text, where):
    assert lint_error(workspace, "t", "base: scratch\n" + text).message.startswith(where)


def test_secret_names_with_empty_defaults_and_ordinary_values_pass(workspace):
    assert lint(workspace, "t", "base: scratch\nenv:\n  VLLM_API_KEY: \"\"\n  MAX_NUM_SEQS: 16\n"
                                "labels:\n  org.opencontainers.image.title: t\n") == []


def test_a_secret_in_build_args_is_an_error(workspace):
    error = lint_error(workspace, "t", SOURCE_BUILD.format(quant="bf16", arch="12.1a").replace(
        'TORCH_CUDA_ARCH_LIST: "12.1a"', 'TORCH_CUDA_ARCH_LIST: "12.1a", HF_TOKEN: "hf_x"'), FILES)
    assert "components.vllm.build.args.HF_TOKEN: looks like a secret" in error.message


def test_lint_errors_exit_2_from_the_cli_and_warnings_do_not(workspace):
    write_image(workspace, "bad", "base: scratch\nenv:\n  HF_TOKEN: x\n")
    proc = run_in_process(["lock", "--check", "bad"], workspace)
    assert proc.returncode == 2 and "env.HF_TOKEN: looks like a secret" in proc.stderr
    write_image(workspace, "warn", "base: scratch\nplatform: linux/amd64\nenv:\n  DFLASH_DRAFTER: d\n")
    proc = run_in_process(["lock", "warn"], workspace)
    assert proc.returncode == 0 and "warning: DFlash is non-causal" in proc.stderr


def test_a_floating_base_without_a_lock_entry_is_refused_at_its_line(workspace):
    write_image(workspace, "t", "platform: linux/amd64\nbase: ghcr.io/spark-arena/dgx-vllm-eugr-nightly:latest\n")
    proc = run_in_process(["render", "t"], workspace)  # locked first: the registry is not reachable here
    assert proc.returncode == 2
    assert "error: images/t/image.yaml:2: t: runtime.base@linux/amd64 could not be locked" in proc.stderr, proc.stderr
    proc = run_in_process(["render", "t", "--locked"], workspace)
    assert proc.returncode == 1 and proc.stderr.startswith("error: images/t/image.yaml:2: t: the lock would change")


def test_a_bare_diff_is_built_with_and_the_fields_it_lacks_are_named(workspace):
    """A patch as `git diff` writes it (no header) plans and renders; every command that reads
    the spec warns, naming the patch and what it lacks."""
    write_image(workspace, "bare", BUSYBOX_BUILDER + "components:\n  e:\n    source: {path: src}\n"
                                   "    patches: [e/0001-bare.patch]\n    build: {script: src/build.sh}\n"
                                   "    outputs: {paths: [/opt/e]}\ninstall: [e]\n",
                {"src/build.sh": "#!/bin/sh\nmkdir -p /opt/e && cp mod.py /opt/e/\n", "src/mod.py": "a = 1\n"})
    (workspace / "patches/e").mkdir(parents=True)
    (workspace / "patches/e/0001-bare.patch").write_text(
        "diff --git a/mod.py b/mod.py\n--- a/mod.py\n+++ b/mod.py\n@@ -1 +1 @@\n-a = 1\n+a = 2\n")
    proc = run_in_process(["render", "bare", "--unpinned"], workspace)
    assert proc.returncode == 0, proc.stderr
    line = (workspace / "images/bare/image.yaml").read_text().splitlines().index("    patches: [e/0001-bare.patch]") + 1
    assert f"images/bare/image.yaml:{line}: warning: patches/e/0001-bare.patch has no Subject, Description, Upstream " \
           "line" in proc.stderr, proc.stderr
    assert "COPY" in proc.stdout and "0001-bare.patch" in proc.stdout  # the patch is in the stack rendered


@pytest.mark.parametrize("said", [
    'cmd: ["--attention-backend", "flash_attn"]\n',
    "env:\n  EXTRA_ARGS: --max-num-seqs 8 --attention-backend=FLASH_ATTN\n",
    "env:\n  VLLM_ATTENTION_BACKEND: FLASH_ATTN\n",
    "files:\n  /opt/launch.sh: launch.sh\n",
])
def test_dflash_with_flash_attn_passed_on_the_command_line_or_by_the_launcher_passes(workspace, said):
    launcher = {"launch.sh": "#!/bin/sh\nexec vllm serve \"$MODEL\" --attention-backend flash_attn \"$@\"\n"}
    text = "base: scratch\nmodel: {drafter: /models/d}\n" + said
    assert lint(workspace, "t", text, launcher) == []
    wrong = lint(workspace, "t", text.replace("flash_attn", "flashinfer").replace("FLASH_ATTN", "FLASHINFER"),
                 {"launch.sh": launcher["launch.sh"].replace("flash_attn", "flashinfer")})
    assert len(wrong) == 1 and "(got 'flashinfer')" in wrong[0], wrong


def test_a_warning_names_the_file_where_its_key_is_written_not_a_set_of_a_sibling(workspace):
    """`--set model.quantization=…` writes one key of `model`: a warning about `model.drafter`
    names the spec's line of the drafter, not the `--set`."""
    write_image(workspace, "t", "base: scratch\nplatform: linux/amd64\nmodel:\n  drafter: /models/d\n"
                                "  quantization: bf16\n")
    proc = run_in_process(["render", "t", "--unpinned", "--set", "model.quantization=fp8"], workspace)
    assert proc.returncode == 0, proc.stderr
    assert "images/t/image.yaml:4: warning: DFlash is non-causal" in proc.stderr, proc.stderr
    proc = run_in_process(["render", "t", "--unpinned", "--set", "model.drafter=/models/other"], workspace)
    assert "--set model.drafter: warning: DFlash is non-causal" in proc.stderr, proc.stderr  # the --set's own


BARE = "--- a/a.c\n+++ b/a.c\n@@ -1 +1 @@\n-int a;\n+int b;\n"
PATCHED = BUSYBOX_BUILDER + """components:
  e:
    source: {path: src}
    patches: [e/0001-bare.patch]
    build: {script: build.sh}
    outputs: {paths: [/x]}
install: [e]
"""


def test_a_bare_patch_warns_until_a_header_file_beside_it_says_what_it_is(workspace):
    """Adding a header to a bare patch changes its bytes (a recipe's own sha256 receipts of its
    patch files break): a NAME.header file beside it is its header, and the warning goes."""
    patch = workspace / "patches/e/0001-bare.patch"
    patch.parent.mkdir(parents=True, exist_ok=True)
    patch.write_text(BARE)
    warnings = lint(workspace, "t", PATCHED, FILES)
    assert any("patches/e/0001-bare.patch has no Subject, Description, Upstream line" in w
               and "e/0001-bare.patch.header" in w for w in warnings), warnings
    header = patch.with_name("0001-bare.patch.header")
    header.write_text("Subject: e: b, not a\nDescription: the fix\nUpstream: not forwarded (tests)\n")
    assert not [w for w in lint(workspace, "t", PATCHED, FILES) if "0001-bare.patch" in w]
    assert patch.read_text() == BARE  # the patch's bytes as they were
    assert Catalog(workspace).load("t").component("e").patches[0].patch.subject == "e: b, not a"
    header.write_text("Subject: only a subject\n")
    refused = run_in_process(["plan", "t"], workspace, env={"DOCKER_HOST": "unix:///nonexistent.sock"})
    assert refused.returncode == 2 and "header lacks Description, Upstream" in refused.stderr, refused.stderr
