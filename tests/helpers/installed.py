"""enginebuild as a user installs it: `pip install` of this checkout into a virtual environment
(its dependencies from the running interpreter's site-packages)."""
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def install_enginebuild(folder: Path) -> Path:
    """The `enginebuild` command of a fresh virtual environment in `folder`."""
    venv = folder / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True)
    install = subprocess.run([str(venv / "bin/python"), "-m", "pip", "install", "-q", "--no-deps", str(ROOT)],
                             capture_output=True, text=True)
    assert install.returncode == 0, install.stderr
    return venv / "bin/enginebuild"
