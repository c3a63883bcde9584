"""enginebuild as a user installs it: `pip install` of this checkout into a virtual environment
(its dependencies from the running interpreter's site-packages: the suite's .venv, where
scripts/setup.sh installed requirements.txt)."""
import subprocess
import sys
import sysconfig
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def install_enginebuild(folder: Path) -> Path:
    """The `enginebuild` command of a fresh virtual environment in `folder`."""
    venv = folder / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True)
    site = subprocess.run([str(venv / "bin/python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    ours = dict.fromkeys([sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]])
    (Path(site) / "suite-dependencies.pth").write_text("".join(f"{p}\n" for p in ours))
    install = subprocess.run([str(venv / "bin/python"), "-m", "pip", "install", "-q", "--no-deps", str(ROOT)],
                             capture_output=True, text=True)
    assert install.returncode == 0, install.stderr
    return venv / "bin/enginebuild"
