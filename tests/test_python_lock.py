"""Python locked by a real resolver (uv): the whole closure with files and sha256 for the target
platform, extras, indexes pinned per package, git and URL requirements, the base's distributions
as constraints, and conflicts refused naming both sides and where each comes from."""
import hashlib

import pytest

from enginebuild.lock.lockfile import read_lock
from enginebuild.recipe.catalog import Catalog
from helpers.gitrepo import Repo
from helpers.inprocess import run_in_process
from helpers.pyindex import Index, make_wheel
from helpers.registry import push_files_image
from helpers.specs import write_image

pytestmark = pytest.mark.network


def packages(workspace, name="t", platform="linux/amd64"):
    spec = Catalog(workspace).load(name)
    resolved = read_lock(workspace, spec).raw(f"runtime.python@{platform}")
    return {p["name"]: p for p in resolved["packages"]}


def python_spec(requirements: str, extra: str = "", platform: str = "linux/amd64", base: str = "scratch") -> str:
    return f"base: {base}\nplatform: {platform}\n{extra}python:\n  version: \"3.12\"\n  requirements:\n{requirements}"


def test_the_whole_closure_with_extras_is_locked_for_the_target_platform(workspace, pypi_reachable):
    write_image(workspace, "t", python_spec("    - \"tabulate[widechars]==0.9.0\"\n    - \"numpy>=2.0,<2.1\"\n",
                                            platform="linux/arm64"))
    proc = run_in_process(["lock", "t"], workspace)
    assert proc.returncode == 0, proc.stderr
    found = packages(workspace, platform="linux/arm64")
    assert set(found) == {"tabulate", "wcwidth", "numpy"}  # wcwidth comes with the extra
    assert found["numpy"]["version"] == "2.0.2" and "aarch64" in found["numpy"]["filename"]
    assert all(len(p["sha256"]) == 64 and p["url"].startswith("https://") for p in found.values())


def test_a_package_pinned_to_a_second_index_is_never_taken_from_pypi(workspace, tmp_path, pypi_reachable):
    index = Index(tmp_path / "index")
    try:
        wheel = make_wheel(tmp_path / "wheels", "tabulate", "99.0.0")  # PyPI has tabulate, not this one
        sha = index.add("tabulate", wheel)
        write_image(workspace, "t", python_spec("    - {requirement: tabulate, index: ours}\n    - six==1.16.0\n",
                                                extra="") .replace("python:\n", f"python:\n  indexes: {{ours: \"{index.url}\"}}\n"))
        proc = run_in_process(["lock", "t"], workspace)
        assert proc.returncode == 0, proc.stderr
        found = packages(workspace)
        assert found["tabulate"]["version"] == "99.0.0" and found["tabulate"]["sha256"] == sha
        assert found["tabulate"]["url"] == index.file_url(wheel.name) and found["tabulate"]["index"] == index.url
        assert found["six"]["url"].startswith("https://files.pythonhosted.org/")
        assert run_in_process(["fetch", "t"], workspace).returncode == 0
    finally:
        index.stop()


def test_a_url_wheel_is_pinned_by_its_sha256_and_a_wrong_one_is_refused(workspace, tmp_path, pypi_reachable):
    index = Index(tmp_path / "index")
    try:
        wheel = make_wheel(tmp_path / "wheels", "localpkg", "1.0", requires=("six",))
        index.add("localpkg", wheel)
        sha = hashlib.sha256(wheel.read_bytes()).hexdigest()
        url = index.file_url(wheel.name)
        write_image(workspace, "t", python_spec(f"    - {{requirement: localpkg, url: \"{url}\", sha256: {sha}}}\n"))
        proc = run_in_process(["lock", "t"], workspace)
        assert proc.returncode == 0, proc.stderr
        found = packages(workspace)
        assert found["localpkg"]["origin"] == "url" and found["localpkg"]["sha256"] == sha
        assert "six" in found  # its requirement is locked too
        write_image(workspace, "u", python_spec(f"    - {{requirement: localpkg, url: \"{url}\", sha256: \"{'0' * 64}\"}}\n"))
        proc = run_in_process(["lock", "u"], workspace)
        assert proc.returncode == 1 and f"the spec pins {'0' * 64}" in proc.stderr
    finally:
        index.stop()


def test_a_git_requirement_is_pinned_to_a_full_commit_and_built_into_a_wheel(workspace, tmp_path, pypi_reachable,
                                                                             git_available):
    repo = Repo(tmp_path / "gpkg")
    commit = repo.commit({"pyproject.toml": "[build-system]\nrequires = [\"setuptools>=68\"]\n"
                                            "build-backend = \"setuptools.build_meta\"\n[project]\nname = \"gpkg\"\n"
                                            "version = \"1.2.3\"\ndependencies = [\"six\"]\n",
                          "src/gpkg/__init__.py": "X = 1\n"}, "first", tag="v1.2.3")
    write_image(workspace, "t", python_spec(f"    - {{requirement: gpkg, git: {{url: \"{repo.url}\", ref: v1.2.3}}}}\n"))
    proc = run_in_process(["lock", "t"], workspace)
    assert proc.returncode == 0, proc.stderr
    found = packages(workspace)
    assert found["gpkg"]["origin"] == "git" and found["gpkg"]["commit"] == commit and "six" in found
    assert run_in_process(["fetch", "t"], workspace).returncode == 0


def test_a_conflicting_pair_is_refused_naming_both_and_where_each_comes_from(workspace, pypi_reachable):
    write_image(workspace, "t", python_spec("    - rich==15.0.0\n    - pygments<2.13\n"))
    proc = run_in_process(["lock", "t"], workspace)
    assert proc.returncode == 2
    assert "the Python requirements cannot be satisfied together" in proc.stderr
    assert "rich: required at images/t/image.yaml:6" in proc.stderr
    assert "pygments: required at images/t/image.yaml:7" in proc.stderr
    assert not (workspace / "lockfiles/t.lock").exists()


def test_flashinfer_wheels_from_different_releases_are_refused(workspace, pypi_reachable):
    write_image(workspace, "t", python_spec("    - {requirement: flashinfer-python==0.7.2.post1, deps: false}\n"
                                            "    - {requirement: flashinfer-cubin==0.6.9, deps: false}\n"))
    proc = run_in_process(["lock", "t"], workspace)
    assert proc.returncode == 2
    assert "flashinfer-python==0.7.2.post1 (required at images/t/image.yaml:6)" in proc.stderr
    assert "flashinfer-cubin==0.6.9 (required at images/t/image.yaml:7)" in proc.stderr


@pytest.mark.registry
def python_base(registry, name: str, dists: dict, files: dict | None = None) -> str:
    """A base image in the test registry whose Python ships `dists` (name -> version), as their
    .dist-info METADATA in site-packages, and `files` beside them; its reference."""
    site = "usr/local/lib/python3.12/dist-packages"
    content = {f"{site}/{n}-{v}.dist-info/METADATA": f"Metadata-Version: 2.1\nName: {n}\nVersion: {v}\n\n".encode()
               for n, v in dists.items()}
    content.update({f"{site}/{path}": data for path, data in (files or {}).items()})
    push_files_image(registry.host, f"enginebuild-test/{name}", "1", content)
    return f"{registry.host}/enginebuild-test/{name}:1"


def test_what_the_base_ships_constrains_the_lock_and_is_not_installed_again(workspace, registry, tmp_path,
                                                                           pypi_reachable):
    site = "usr/local/lib/python3.12/dist-packages"
    digest = push_files_image(registry.host, "enginebuild-test/pybase", "1", {
        f"{site}/six-1.16.0.dist-info/METADATA": b"Metadata-Version: 2.1\nName: six\nVersion: 1.16.0\n\n",
        f"{site}/six.py": b"# six\n"})
    base = f"{registry.host}/enginebuild-test/pybase:1"
    write_image(workspace, "t", python_spec("    - six\n    - tabulate==0.9.0\n", base=base))
    proc = run_in_process(["lock", "t"], workspace)
    assert proc.returncode == 0, proc.stderr
    found = packages(workspace)
    assert found["six"] == {"name": "six", "version": "1.16.0", "origin": "base"}
    assert found["tabulate"]["origin"] == "index"
    lock = read_lock(workspace, Catalog(workspace).load("t"))
    assert lock.raw("runtime.python@linux/amd64")["base_digest"] == digest
    plan = run_in_process(["plan", "t", "--json"], workspace)
    layers = [row["name"] for row in __import__("json").loads(plan.stdout)["images"][0]["layers"]]
    assert any("tabulate 0.9.0" in name for name in layers) and not any("six" in name for name in layers)
    # a version the base's does not satisfy replaces it, and the lock says so
    write_image(workspace, "u", python_spec("    - six==1.17.0\n", base=base))
    proc = run_in_process(["lock", "u"], workspace)
    assert proc.returncode == 0, proc.stderr
    assert packages(workspace, "u")["six"]["replaces"] == "1.16.0"
    assert packages(workspace, "u")["six"]["version"] == "1.17.0"
    plan = __import__("json").loads(run_in_process(["plan", "u", "--json"], workspace).stdout)
    assert any("six 1.17.0 (replaces the base's 1.16.0)" in row["name"] for row in plan["images"][0]["layers"])
    # a dependency that needs another version of what the base ships, unasked, is refused naming the base
    index = Index(tmp_path / "index")
    try:
        wheel = make_wheel(tmp_path / "wheels", "needsnewsix", "1.0", requires=("six>=1.17",))
        sha = index.add("needsnewsix", wheel)
        write_image(workspace, "v", python_spec(f"    - {{requirement: needsnewsix, url: \"{index.file_url(wheel.name)}\", "
                                                f"sha256: {sha}}}\n", base=base))
        proc = run_in_process(["lock", "v"], workspace)
        assert proc.returncode == 2
        assert f"six==1.16.0: shipped by the base {registry.host}/enginebuild-test/pybase@{digest}" in proc.stderr
        assert "NAME==VERSION replaces what the base ships" in proc.stderr
        # a conflict the base's distributions play no part in: the hint does not send the user to them
        old = make_wheel(tmp_path / "wheels", "needsoldtab", "1.0", requires=("tabulate<0.9",))
        sha = index.add("needsoldtab", old)
        write_image(workspace, "w", python_spec(f"    - {{requirement: needsoldtab, url: \"{index.file_url(old.name)}\", "
                                                f"sha256: {sha}}}\n    - tabulate==0.9.0\n", base=base))
        proc = run_in_process(["lock", "w"], workspace)
        assert proc.returncode == 2 and "relax a requirement" in proc.stderr, proc.stderr
        assert "replaces what the base ships" not in proc.stderr and "shipped by the base" not in proc.stderr
    finally:
        index.stop()


def test_a_python_version_other_than_the_runtimes_interpreter_is_refused_at_lock(workspace, pypi_reachable,
                                                                                  debian_reachable):
    extra = "system:\n  install: extract\n  packages: [python3-minimal]\n"
    write_image(workspace, "t", python_spec("    - \"six==1.16.0\"\n", extra=extra))
    proc = run_in_process(["lock", "t"], workspace)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    line = next(n for n, text in enumerate((workspace / "images/t/image.yaml").read_text().splitlines(), 1)
                if "version:" in text)
    assert f"images/t/image.yaml:{line}: python.version: python.version is 3.12, but the interpreter here is " \
           "Python 3.11 (its system packages install python3.11-minimal" in proc.stderr
    assert "Traceback" not in proc.stderr and not (workspace / "lockfiles/t.lock").exists()
    write_image(workspace, "t", python_spec("    - \"six==1.16.0\"\n", extra=extra).replace('"3.12"', '"3.11"'))
    assert run_in_process(["lock", "t"], workspace).returncode == 0


def test_a_distribution_the_base_ships_and_no_index_serves_satisfies_what_needs_it(workspace, registry, tmp_path,
                                                                                  pypi_reachable):
    """NGC's bases ship builds no index serves (torch 2.11.0+cu130): what the base has installed
    is a fact the resolution starts from, not a request to an index. Before, the lock pinned it
    as an exact constraint no index could meet, and anything needing it was unsatisfiable."""
    base = python_base(registry, "ngclike", {"basetorch": "2.11.0+cu130"},
                       {"basetorch/__init__.py": b"# the base's build\n"})
    index = Index(tmp_path / "index")
    try:
        index.add("needstorch", make_wheel(tmp_path / "wheels", "needstorch", "1.0", requires=("basetorch==2.11.0",)))
        write_image(workspace, "t", python_spec("    - {requirement: needstorch, index: local}\n", base=base)
                    + f"  indexes: {{local: \"{index.url}\"}}\n")
        proc = run_in_process(["lock", "t"], workspace)
        assert proc.returncode == 0, proc.stderr
        found = packages(workspace)
        assert found["basetorch"] == {"name": "basetorch", "version": "2.11.0+cu130", "origin": "base"}
        assert found["needstorch"]["origin"] == "index" and found["needstorch"]["version"] == "1.0"
        plan = run_in_process(["plan", "t", "--json"], workspace)
        layers = [row["name"] for row in __import__("json").loads(plan.stdout)["images"][0]["layers"]]
        assert any("needstorch 1.0" in n for n in layers) and not any("basetorch" in n for n in layers)
    finally:
        index.stop()


@pytest.mark.registry
def test_a_bases_metadata_naming_a_path_is_left_out_and_never_becomes_a_file(workspace, registry, tmp_path,
                                                                            pypi_reachable):
    """A base is another party's: its METADATA's Name and Version are read, never trusted as
    names (before, `Name: /abs/path` wrote a file there and a Version with `/..` ended in a
    traceback)."""
    site = "usr/local/lib/python3.12/dist-packages"
    target = tmp_path / "planted"
    push_files_image(registry.host, "enginebuild-test/hostilebase", "1", {
        f"{site}/evil-1.0.dist-info/METADATA": f"Metadata-Version: 2.1\nName: {target}\nVersion: 1.0\n\n".encode(),
        f"{site}/evil2-1.0.dist-info/METADATA": b"Metadata-Version: 2.1\nName: evil2\nVersion: 1.0/../../x\n\n",
        f"{site}/six-1.16.0.dist-info/METADATA": b"Metadata-Version: 2.1\nName: six\nVersion: 1.16.0\n\n"})
    base = f"{registry.host}/enginebuild-test/hostilebase:1"
    write_image(workspace, "t", python_spec("    - six\n", base=base))
    proc = run_in_process(["lock", "t"], workspace)
    assert proc.returncode == 0, proc.stderr
    assert f"names '{target}' '1.0', not a distribution and version: left out" in proc.stderr
    assert "names 'evil2' '1.0/../../x', not a distribution and version: left out" in proc.stderr
    assert not list(tmp_path.glob("planted*")) and not (tmp_path / "x").exists()
    assert packages(workspace)["six"] == {"name": "six", "version": "1.16.0", "origin": "base"}


def test_a_lock_that_lists_a_base_distribution_by_a_path_is_refused(tmp_path):
    from enginebuild.errors import LockError
    from enginebuild.lock.python import provided_wheel

    for name, version in ((str(tmp_path / "x"), "1.0"), ("ok", "1.0/../../y"), ("../x", "1")):
        with pytest.raises(LockError, match="not a distribution's name and version"):
            provided_wheel(tmp_path / "provided", name, version)
    assert list(tmp_path.iterdir()) == []
    (tmp_path / "provided").mkdir()
    assert provided_wheel(tmp_path / "provided", "torch", "2.10.0a0+a36e1d39eb.nv26.1").name == \
        "torch-2.10.0a0+a36e1d39eb.nv26.1-py3-none-any.whl"


def test_an_override_lifts_a_packages_cap(workspace, tmp_path, pypi_reachable):
    """`python.overrides` replaces every requirement on that name, as uv's --override: a recipe
    that forces a newer release over a package's cap says so in the spec."""
    index = Index(tmp_path / "index")
    try:
        index.add("capped", make_wheel(tmp_path / "wc", "capped", "1.0", requires=("six<1.17",)))
        reqs = (f"    - {{requirement: capped, index: local}}\n    - six==1.17.0\n  indexes: {{local: \"{index.url}\"}}\n")
        write_image(workspace, "t", python_spec(reqs))
        proc = run_in_process(["lock", "t"], workspace)
        assert proc.returncode == 2 and "six" in proc.stderr  # the cap, unlifted
        write_image(workspace, "t", python_spec(reqs) + "  overrides: [\"six==1.17.0\"]\n")
        proc = run_in_process(["lock", "t"], workspace)
        assert proc.returncode == 0, proc.stderr
        assert packages(workspace)["six"]["version"] == "1.17.0"
        assert packages(workspace)["capped"]["version"] == "1.0"
    finally:
        index.stop()


def test_an_override_of_what_the_base_ships_keeps_the_bases_build_or_replaces_it(workspace, registry, tmp_path,
                                                                                pypi_reachable):
    """An NGC-like base ships a build no index serves (`basetorch 2.10.0a0+nv26.1`) and six 1.16.0.
    An override the base's build meets (pre-release and local version included) keeps that build
    (not an index's release of the same name); one it does not meet replaces the base's, without
    the requirement being restated (before: the base's version stayed a constraint, unsatisfiable)."""
    base = python_base(registry, "ngcover", {"basetorch": "2.10.0a0+nv26.1", "six": "1.16.0"})
    index = Index(tmp_path / "index")
    try:
        # an engine that pins another release of both; the index also serves a basetorch 2.10.0
        index.add("engine", make_wheel(tmp_path / "we", "engine", "1.0", requires=("basetorch==2.9.0", "six<1.16")))
        index.add("basetorch", make_wheel(tmp_path / "wb", "basetorch", "2.10.0"))
        reqs = f"    - {{requirement: engine, index: local}}\n  indexes: {{local: \"{index.url}\"}}\n"
        write_image(workspace, "t", python_spec(reqs, base=base)
                    + "  overrides: [\"basetorch>=2.9\", \"six>=1.17\"]\n")
        proc = run_in_process(["lock", "t"], workspace)
        assert proc.returncode == 0, proc.stderr
        found = packages(workspace)
        assert found["basetorch"] == {"name": "basetorch", "version": "2.10.0a0+nv26.1", "origin": "base"}, found
        assert found["six"]["version"] != "1.16.0" and found["six"]["replaces"] == "1.16.0", found["six"]
        assert found["engine"]["version"] == "1.0"
        # the same when the name is also required directly (or by a component's requires-from): the
        # override replaces that requirement too, so the base's build is kept, not refused
        direct = (f"    - {{requirement: engine, index: local}}\n    - basetorch==2.9.0\n"
                  f"  indexes: {{local: \"{index.url}\"}}\n")
        write_image(workspace, "d", python_spec(direct, base=base) + "  overrides: [\"basetorch>=2.9\", \"six>=1.17\"]\n")
        proc = run_in_process(["lock", "d"], workspace)
        assert proc.returncode == 0, proc.stderr
        kept = packages(workspace, "d")["basetorch"]
        assert kept == {"name": "basetorch", "version": "2.10.0a0+nv26.1", "origin": "base"}, kept
    finally:
        index.stop()


def test_a_failure_uv_does_not_classify_is_shown_with_its_whole_reason(workspace, tmp_path):
    """An sdist whose build backend fails while uv reads its metadata: not a conflict, not an index
    that did not answer; the lines that say why are shown, not only uv's last one."""
    import io
    import tarfile

    index = Index(tmp_path / "index")
    try:
        backend = ("def _fail(*args, **kwargs):\n"
                   "    raise SystemExit('ebbad cannot be built here:\\n  its compiler is missing\\n  (first cause)')\n"
                   "get_requires_for_build_wheel = prepare_metadata_for_build_wheel = build_wheel = _fail\n"
                   "get_requires_for_build_sdist = build_sdist = _fail\n")
        files = {"ebbad-1.0/pyproject.toml": "[build-system]\nrequires = []\nbuild-backend = \"failing\"\n"
                                             "backend-path = [\".\"]\n",
                 "ebbad-1.0/failing.py": backend,
                 "ebbad-1.0/PKG-INFO": "Metadata-Version: 2.1\nName: ebbad\nVersion: 1.0\n"}
        sdist = tmp_path / "ebbad-1.0.tar.gz"
        with tarfile.open(sdist, "w:gz") as tar:
            for name, text in files.items():
                info = tarfile.TarInfo(name)
                info.size = len(text.encode())
                tar.addfile(info, io.BytesIO(text.encode()))
        index.add("ebbad", sdist)
        write_image(workspace, "t", python_spec("    - {requirement: ebbad, index: ours}\n").replace(
            "python:\n", f"python:\n  indexes: {{ours: \"{index.url}\"}}\n"))
        proc = run_in_process(["lock", "t"], workspace, env={"PIP_INDEX_URL": index.url})
        assert proc.returncode != 0
        assert "uv could not resolve the Python requirements:" in proc.stderr, proc.stderr
        assert "ebbad cannot be built here" in proc.stderr and "its compiler is missing" in proc.stderr, proc.stderr
        assert "Traceback" not in proc.stderr
    finally:
        index.stop()


def test_a_name_no_index_has_is_said_as_such_not_as_a_conflict_to_relax(workspace, pypi_reachable):
    write_image(workspace, "t", python_spec("    - tabulte==0.9.0\n"))
    proc = run_in_process(["lock", "t"], workspace)
    assert proc.returncode != 0
    assert "no index has a distribution named 'tabulte'" in proc.stderr, proc.stderr
    assert "required at images/t/image.yaml:" in proc.stderr
    assert "relax a requirement" not in proc.stderr and "we can conclude" not in proc.stderr
