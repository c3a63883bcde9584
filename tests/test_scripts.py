"""Shell scripts pass shellcheck; the TurboQuant start-up bootstrap hooks vLLM's model runner."""
import shutil
import subprocess
import sys
import textwrap

import pytest

from conftest import ROOT, need

SCRIPTS = sorted(p for p in [*ROOT.glob("images/*/*.sh"), *ROOT.glob("images/*/*/*.sh"), *ROOT.glob("scripts/*.sh"),
                             ROOT / ".ci/run", *ROOT.glob("examples/*/*.sh"),
                             *ROOT.glob("tests/standin/*.sh")])


def test_there_are_scripts_to_check():
    assert len(SCRIPTS) >= 10


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_shellcheck_is_clean(script):
    need(shutil.which("shellcheck") is not None, "shellcheck is not installed (run scripts/setup.sh)")
    proc = subprocess.run(["shellcheck", str(script)], capture_output=True, text=True)  # the shebang names the shell
    assert proc.returncode == 0, proc.stdout


def _site(tmp_path, runner_body: str):
    """A site folder with the bootstrap, a vllm package whose runner loads, and a turboquant
    package whose install hook records what it was given."""
    site = tmp_path / "site"
    (site / "vllm/v1/worker").mkdir(parents=True)
    for init in ("vllm", "vllm/v1", "vllm/v1/worker"):
        (site / init / "__init__.py").write_text("")
    (site / "vllm/v1/worker/gpu_model_runner.py").write_text(runner_body)
    (site / "turboquant").mkdir()
    (site / "turboquant/__init__.py").write_text("")
    (site / "turboquant/vllm_attn_backend.py").write_text(textwrap.dedent("""\
        MODE_HYBRID = "hybrid-mode"
        CALLS = []
        def install_turboquant_hooks(model_runner, key_bits=3, value_bits=2, mode=None):
            CALLS.append((type(model_runner).__name__, key_bits, value_bits, mode))
        """))
    boot = ROOT / "images/qwen35-dflash-turboquant"
    shutil.copy(boot / "enginebuild_turboquant_boot.py", site)
    shutil.copy(boot / "enginebuild-turboquant.pth", site)
    return site


RUNNER = textwrap.dedent("""\
    class GPUModelRunner:
        def load_model(self):
            return "loaded"
    """)

PROBE = textwrap.dedent("""\
    import site, sys
    site.addsitedir(sys.argv[1])
    from vllm.v1.worker.gpu_model_runner import GPUModelRunner
    print(GPUModelRunner().load_model())
    from turboquant import vllm_attn_backend
    print(vllm_attn_backend.CALLS)
    """)


def test_the_bootstrap_installs_turboquant_hooks_after_the_model_loads(tmp_path):
    site = _site(tmp_path, RUNNER)
    env = {"ENABLE_TURBOQUANT": "1", "TQ_MODE": "hybrid", "TQ_KEY_BITS": "4", "TQ_VALUE_BITS": "3", "PATH": "/usr/bin:/bin"}
    proc = subprocess.run([sys.executable, "-c", PROBE, str(site)], capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["loaded", "[('GPUModelRunner', 4, 3, 'hybrid-mode')]"]


def test_the_bootstrap_does_nothing_unless_enabled(tmp_path):
    site = _site(tmp_path, RUNNER)
    proc = subprocess.run([sys.executable, "-c", PROBE, str(site)], capture_output=True, text=True,
                          env={"PATH": "/usr/bin:/bin"})
    assert proc.stdout.splitlines() == ["loaded", "[]"]


def test_the_bootstrap_refuses_a_bad_mode_at_start_up(tmp_path):
    site = _site(tmp_path, RUNNER)
    proc = subprocess.run([sys.executable, "-c", PROBE, str(site)], capture_output=True, text=True,
                          env={"ENABLE_TURBOQUANT": "1", "TQ_MODE": "turbo", "PATH": "/usr/bin:/bin"})
    assert "TQ_MODE must be one of off, capture_only, hybrid, full_tq" in proc.stderr


@pytest.mark.parametrize("venv", ["demo", "test"])
def test_the_fast_tier_after_the_demo_sets_up_the_test_tools_first(tmp_path, venv):
    """`scripts/test.sh --fast` skips set-up only for a venv that holds the test tools: after
    `scripts/demo.sh` (a venv without pytest) it runs `scripts/setup.sh test` first. Run on a copy
    of the scripts whose setup.sh records that it was called."""
    repo = tmp_path / "repo"
    (repo / "scripts").mkdir(parents=True)
    shutil.copy(ROOT / "scripts/test.sh", repo / "scripts/test.sh")
    for name in ("requirements.txt", "requirements-test.txt"):
        shutil.copy(ROOT / name, repo / name)
    (repo / "scripts/setup.sh").write_text('#!/usr/bin/env bash\necho "set up: $*" > set-up.txt\n')
    bin_dir = repo / ".venv/bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "python").write_text('#!/bin/sh\necho "pytest: $*" > pytest.txt\n')
    (bin_dir / "python").chmod(0o755)
    if venv == "test":  # what `setup.sh test` leaves: the stamp of requirements-test.txt installed
        digest = subprocess.run("cat requirements.txt requirements-test.txt | sha256sum | cut -c1-16", shell=True,
                                cwd=repo, capture_output=True, text=True, check=True).stdout.strip()
        (repo / f".venv/.installed-{digest}-test").touch()
    proc = subprocess.run(["bash", "scripts/test.sh", "--fast", "-q"], cwd=repo, capture_output=True, text=True,
                          env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})
    assert proc.returncode == 0, proc.stderr
    assert (repo / "set-up.txt").exists() == (venv == "demo")
    called = (repo / "pytest.txt").read_text()
    assert "-m pytest -m fast -n auto " in called and called.rstrip().endswith(" -q"), called
