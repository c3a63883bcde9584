"""Compiler caches that travel: a component's ccache folder, kept after its build and pushed to
the registry cache, fills the empty cache of a fresh engine, so a one-file change there
compiles one file and finds every other in the cache."""
import os
import shutil
import uuid

import pytest

from conftest import need
from helpers.engines import start_engine
from helpers.inprocess import run_in_process
from helpers.specs import CCACHE_UNITS as SPEC
from helpers.specs import write_image

pytestmark = [pytest.mark.docker, pytest.mark.registry, pytest.mark.network]

# four translation units through ccache; the counters of this build are kept in the output
BUILD = """#!/bin/sh
set -eu
export CCACHE_DIR=/root/.ccache PATH=/usr/bin:/bin
ccache -z >/dev/null
mkdir -p /opt/units /tmp/objs
for f in *.c; do ccache gcc -O2 -c "$f" -o "/tmp/objs/${f%.c}.o"; done
ccache --print-stats > /opt/units/stats.txt
cat /tmp/objs/*.o | wc -c > /opt/units/size.txt
"""


def units(marker: str, edited: str = "") -> dict:
    # the marker is code, not a comment: ccache's preprocessed mode would see through a comment
    files = {f"units/{n}.c": f"const char *{n}_build = \"{marker}\";\nint {n}_value(int x) {{ return x * {i + 2}; }}\n"
             for i, n in enumerate("abcd")}
    if edited:
        files[f"units/{edited}.c"] += "int extra_value(void) { return 7; }\n"
    return {**files, "units/build.sh": BUILD}


def stats(folder) -> dict:
    text = (folder / "opt/units/stats.txt").read_text()
    counts = dict(line.split("\t")[:2] for line in text.splitlines() if "\t" in line)
    hits = int(counts.get("direct_cache_hit", 0)) + int(counts.get("preprocessed_cache_hit", 0))
    return {"hits": hits, "misses": int(counts.get("cache_miss", 0))}


def test_a_one_file_change_on_a_fresh_engine_compiles_one_file(workspace, registry, docker_engine, tmp_path,
                                                                 tmp_path_factory, debian_reachable):
    need(os.geteuid() == 0 and shutil.which("dockerd") is not None, "a fresh Docker engine needs root and dockerd")
    marker = uuid.uuid4().hex[:8]
    cache = f"{registry.host}/enginebuild-test/cc-{marker}"
    write_image(workspace, "cc", SPEC, units(marker))
    first = run_in_process(["image", "cc", "--cache", cache, "--output", tmp_path / "first"], workspace,
                    env={"ENGINEBUILD_HOME": str(tmp_path / "home1")})
    assert first.returncode == 0, first.stderr
    assert stats(tmp_path / "first") == {"hits": 0, "misses": 4}
    assert f"component units: compiler cache pushed to {cache}" in first.stderr, first.stderr

    write_image(workspace, "cc", SPEC, units(marker, edited="b"))  # one file changed
    fresh = start_engine(tmp_path_factory.mktemp("fresh-cc"), index=4)
    try:
        second = run_in_process(["image", "cc", "--cache", cache, "--output", tmp_path / "second"], workspace,
                         env={**fresh.env, "ENGINEBUILD_HOME": str(tmp_path / "home2")})
    finally:
        fresh.stop()
    assert second.returncode == 0, second.stderr
    assert f"component units: compiler cache restored from {cache}" in second.stderr, second.stderr
    assert "built 1 component(s) (units)" in second.stdout  # its key changed: it was built, not pulled
    assert stats(tmp_path / "second") == {"hits": 3, "misses": 1}


def test_without_the_registry_cache_a_fresh_machine_compiles_everything(workspace, docker_engine, tmp_path,
                                                                         debian_reachable):
    marker = uuid.uuid4().hex[:8]
    write_image(workspace, "cc", SPEC, units(marker))
    home = {"ENGINEBUILD_HOME": str(tmp_path / "home")}
    proc = run_in_process(["image", "cc", "--output", tmp_path / "out"], workspace, env=home)
    assert proc.returncode == 0, proc.stderr
    assert stats(tmp_path / "out") == {"hits": 0, "misses": 4}
    # the kept cache damaged in the store: not trusted, the build goes on without it
    import json

    from enginebuild.io.store import Store

    store = Store(tmp_path / "home")
    (record,) = (tmp_path / "home").rglob("compiler-cache/*.json")
    (_, sha, _), = json.loads(record.read_text())["tars"]
    blob = store.path(sha)
    blob.chmod(0o644)
    data = bytearray(blob.read_bytes())
    data[len(data) // 2] ^= 0xFF
    blob.write_bytes(bytes(data))
    write_image(workspace, "cc", SPEC, units(marker, edited="c"))
    proc = run_in_process(["image", "cc"], workspace, env=home)
    assert proc.returncode == 0, proc.stderr
    assert "component units: a stored compiler cache is damaged; building without it" in proc.stderr, proc.stderr


def compiler_line(home) -> str:
    """What the demo's kernel build said of its compiler cache (its log, kept in the store)."""
    (log,) = (home / "logs").glob("demo-kernels-*.log")
    return next(line.split(" ", 2)[2] for line in log.read_text().splitlines() if " compiler cache: " in line)


def test_the_demo_on_a_fresh_engine_compiles_only_the_kernel_file_that_changed(
        workspace, registry, docker_engine, tmp_path, tmp_path_factory, debian_reachable, pypi_reachable):
    """The demo's kernel library compiles through ccache (`cache: [/root/.ccache]`): after a
    one-file change (a declaration added to kernels.h, which only run_kernels.c includes), a
    fresh engine with an empty store and the registry cache compiles that one file and takes
    every kernel unit from the compiler cache the registry carried."""
    need(os.geteuid() == 0 and shutil.which("dockerd") is not None, "a fresh Docker engine needs root and dockerd")
    marker = uuid.uuid4().hex[:8]
    cache = f"{registry.host}/enginebuild-test/demo-cc-{marker}"
    header = workspace / "images/demo/kernels/kernels.h"
    original = header.read_text()
    header.write_text(original + f"extern const char *kernels_build_{marker};\n")  # code: a new key, a new entry
    amd64 = ["--platform", "linux/amd64"]
    first = run_in_process(["image", "demo", *amd64, "--cache", cache], workspace, env={"ENGINEBUILD_HOME": str(tmp_path / "h1")})
    assert first.returncode == 0, first.stderr
    assert f"component kernels: compiler cache pushed to {cache}" in first.stderr, first.stderr

    header.write_text(original + f"extern const char *kernels_build_{marker};\nextern int kernels_edited;\n")
    fresh = start_engine(tmp_path_factory.mktemp("fresh-demo-cc"), index=4)
    home = tmp_path / "h2"
    try:
        second = run_in_process(["image", "demo", *amd64, "--cache", cache], workspace,
                         env={**fresh.env, "ENGINEBUILD_HOME": str(home)})
    finally:
        fresh.stop()
    assert second.returncode == 0, second.stderr
    assert f"component kernels: compiler cache restored from {cache}" in second.stderr, second.stderr
    assert "kernels" in second.stdout.split("built ", 1)[1].split("\n", 1)[0]  # built there, not pulled
    units = 2  # DEMO_KERNEL_UNITS of the demo
    assert compiler_line(home) == f"compiler cache: 1 compiled, {units} from the cache"
