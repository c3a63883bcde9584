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
