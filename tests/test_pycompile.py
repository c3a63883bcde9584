"""The bytecode compiler a bytecode layer runs in the image (layerkinds/pycompile.py), run here by
this machine's interpreter: what it writes for a layer is the same bytes whether that layer is
compiled alone, one folder at a time or beside others on every CPU, so a layer's bytecode key
names one content on any machine."""
import json
import os
import subprocess
import sys
from pathlib import Path

from conftest import ROOT

COMPILER = ROOT / "src" / "enginebuild" / "layerkinds" / "pycompile.py"
VERSION = "{}.{}".format(*sys.version_info[:2])


def sources(root: Path, folders: dict[str, dict[str, str]]) -> None:
    for folder, files in folders.items():
        for path, text in files.items():
            target = root / "src" / folder / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text)


def compiled(root: Path, cpus: set[int] | None = None) -> tuple[list[dict], dict[str, bytes]]:
    """What the compiler printed and wrote, run on `cpus` only (None: every CPU of this process)."""
    def pinned() -> None:
        if cpus is not None:
            os.sched_setaffinity(0, cpus)

    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    proc = subprocess.run([sys.executable, str(COMPILER), str(root), VERSION], env=env, preexec_fn=pinned,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = root / "out"
    written = {p.relative_to(out).as_posix(): p.read_bytes() for p in sorted(out.rglob("*.pyc"))}
    return [json.loads(line) for line in proc.stdout.splitlines()], written


def module(n: int) -> str:
    # shared constants and names across modules: what marshal may share within one process
    return "".join(f"NAME_{i} = ('shared', {i}, frozenset({{'a', 'b', 'c{i}'}}))\n"
                   f"def f{i}(x):\n    return x + NAME_{i}[1]\n" for i in range(n))


def test_a_layers_bytecode_is_the_same_bytes_alone_in_turn_or_beside_others(tmp_path):
    layers = {f"{i:04d}": {f"usr/lib/python3/dist-packages/pkg{i}/__init__.py": module(40 + i),
                           f"usr/lib/python3/dist-packages/pkg{i}/sub/mod.py": module(200 * (i + 1)),
                           f"usr/lib/python3/dist-packages/pkg{i}/broken.py": "def (:\n"}
              for i in range(5)}
    every_cpu = sorted(os.sched_getaffinity(0))
    sources(tmp_path / "wide", layers)
    sources(tmp_path / "narrow", layers)
    sources(tmp_path / "alone", {"0003": layers["0003"]})
    wide_said, wide = compiled(tmp_path / "wide")
    narrow_said, narrow = compiled(tmp_path / "narrow", {every_cpu[0]})
    _, alone = compiled(tmp_path / "alone")

    # one line per layer, in the layers' order, whichever ended first
    assert [line["folder"] for line in wide_said] == sorted(layers)
    assert wide_said == narrow_said
    assert all(line["compiled"] == 2 and line["failed"] == 1 and line["first_failed"] == [
        f"/usr/lib/python3/dist-packages/pkg{int(line['folder'])}/broken.py"] for line in wide_said)
    assert len(wide) == 10 and wide == narrow
    assert alone == {name: data for name, data in wide.items() if name.startswith("0003/")}
    # PEP 552: hash-based and checked (flags 0b11), named by the source's path in the image
    tag = sys.implementation.cache_tag
    pyc = wide[f"0001/usr/lib/python3/dist-packages/pkg1/sub/__pycache__/mod.{tag}.pyc"]
    assert int.from_bytes(pyc[4:8], "little") == 0b11


def test_an_interpreter_of_another_version_than_the_plans_refuses_to_compile(tmp_path):
    sources(tmp_path, {"0000": {"a.py": "x = 1\n"}})
    proc = subprocess.run([sys.executable, str(COMPILER), str(tmp_path), "2.7"], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 3
    assert json.loads(proc.stdout)["error"] == f"the interpreter is Python {VERSION} ({sys.implementation.cache_tag}), " \
                                               "the plan says 2.7"
    assert not (tmp_path / "out").exists()
