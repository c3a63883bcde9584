"""A corpus of hostile and broken specs (tests/corpus/specs): each must exit 2 with file:line and
the key path, no traceback, nothing written, and bounded memory."""
import os
import re
import shutil
from pathlib import Path

import pytest

from conftest import ROOT, cli_server
from helpers import report

CORPUS = sorted((ROOT / "tests/corpus/specs").glob("*.yaml"))
MEMORY_LIMIT = 1 << 30  # 1 GiB of address space: an expanding YAML bomb would hit it


def parse_case(path: Path) -> dict:
    case = {"expect": None, "setup": [], "command": ["lock", "--check", "t"], "body": []}
    for line in path.read_text(encoding="utf-8").split("\n"):
        if line.startswith("# expect: "):
            case["expect"] = line[len("# expect: "):]
        elif line.startswith("# setup: "):
            case["setup"].append(line[len("# setup: "):].split())
        elif line.startswith("# command: "):
            case["command"] = line[len("# command: "):].split()
        else:
            case["body"].append(line)
    case["body"] = "\n".join(case["body"])
    return case


def snapshot(root: Path) -> dict:
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in filenames + dirnames:
            path = Path(dirpath) / name
            st = os.lstat(path)
            out[str(path.relative_to(root))] = (st.st_size, st.st_mtime_ns)
    return out


def run_limited(args, cwd):
    """`python -m enginebuild ARGS` in a child with an address space of MEMORY_LIMIT (forked by the
    suite's CLI server, as conftest.run_cli's calls are); its exit code, output and peak memory."""
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    done = cli_server().run([str(a) for a in args], cwd, env, 300, None, limit_as=MEMORY_LIMIT)
    return done.returncode, done.stdout, done.stderr, done.peak_rss_kib


@pytest.fixture(scope="module")
def shared_recipes(tmp_path_factory) -> Path:
    """The recipe repository's images and patches, among which each bad spec is put in turn; its
    lockfiles (1.2 MB, most of a copy) play no part in refusing a spec, so the folder is there, empty."""
    dest = tmp_path_factory.mktemp("hostile") / "repo"
    for name in ("images", "patches"):
        shutil.copytree(ROOT / name, dest / name, symlinks=True)
    (dest / "lockfiles").mkdir()
    return dest


@pytest.fixture
def recipes(shared_recipes):
    """That repository with no image `t`, before and after a case (a case that wrote anything
    else fails on its own snapshot, and the next case's snapshot starts from what it left)."""
    folder = shared_recipes / "images/t"
    shutil.rmtree(folder, ignore_errors=True)
    yield shared_recipes
    shutil.rmtree(folder, ignore_errors=True)


def test_the_corpus_has_at_least_forty_bad_specs():
    assert len(CORPUS) >= 40


@pytest.mark.parametrize("path", CORPUS, ids=lambda p: p.stem)
def test_a_bad_spec_is_refused_clearly_and_changes_nothing(path, recipes):
    workspace = recipes
    case = parse_case(path)
    assert case["expect"], f"{path.name} has no '# expect:' line"
    folder = workspace / "images/t"
    folder.mkdir(parents=True)
    body = case["body"].encode("utf-8")
    (folder / "src").mkdir()
    (folder / "src/a.c").write_text("int a;\n")
    for step in case["setup"]:
        if step[0] == "symlink":
            os.symlink(step[2], folder / step[1])
        elif step[0] == "file":
            (folder / step[1]).write_text("#!/bin/sh\necho\n")
        elif step[0] == "huge":
            body += b"\n" + b"# padding padding padding padding padding padding\n" * 40_000
        elif step[0] == "nul":
            body = body.replace(b"A: b", b"A: b\x00")
        elif step[0] == "latin1":
            body = case["body"].encode("latin-1")
    (folder / "image.yaml").write_bytes(body)
    before = snapshot(workspace)
    code, stdout, stderr, rss_kib = run_limited(case["command"], workspace)
    report.count("hostile specs", "tried")
    report.count("hostile specs", "tracebacks", int("Traceback" in stderr))
    report.peak("hostile specs", "peak RSS MiB", rss_kib // 1024)
    after = snapshot(workspace)
    partial = before != after
    report.count("hostile specs", "partial writes", int(partial))
    assert "Traceback" not in stderr, stderr
    assert code == 2, (code, stdout, stderr)
    assert stderr.startswith("error: "), stderr
    assert re.search(case["expect"], stderr), f"expected /{case['expect']}/ in:\n{stderr}"
    assert re.search(r"images/t/image\.yaml(:\d+)?: ", stderr), stderr
    assert not partial, set(after) ^ set(before)
    report.count("hostile specs", "clear errors")
