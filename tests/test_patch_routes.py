"""Which patches of a stack go into the component's build and which are applied as files
(plan/routes.py), what a build installs verbatim (layerkinds/verbatim.py, learned from the
bytes), and the RECORD a wheel's install would write with some members replaced (the installer
replayed without unpacking the wheel)."""
import base64
import hashlib
import io
import json
import tarfile
import textwrap
import zipfile
from pathlib import Path

import pytest

from enginebuild.core.patchfile import parse_patch
from enginebuild.errors import Where
from enginebuild.io.store import Store
from enginebuild.io.tars import TarWriter
from enginebuild.layerkinds.installer import install_wheel, installed_record
from enginebuild.layerkinds.verbatim import (
    Placed,
    keep_facts,
    learn,
    read_facts,
    same_names,
    tar_members,
    wheel_members,
)
from enginebuild.plan.routes import route_patches
from enginebuild.recipe.model import PatchRef

HEADER = "Subject: t\nDescription: t\nUpstream: not forwarded (tests)\n---\n"


def modify(path: str, old: str = "a = 1", new: str = "a = 2") -> str:
    return f"--- a/{path}\n+++ b/{path}\n@@ -1 +1 @@\n-{old}\n+{new}\n"


def ref(tmp_path: Path, name: str, diff: str) -> PatchRef:
    text = (HEADER + textwrap.dedent(diff)).encode()
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text)
    return PatchRef(name, path, Where(str(path)), parse_patch(name, text))


def fact(path: str) -> dict:
    return {path: True}


def routes(patches, facts=None, **kw):
    build, files, found = route_patches(tuple(patches), facts, **kw)
    return [p.name for p in build], [p.name for p in files], {r.patch: (r.route, r.why) for r in found}


def test_a_python_fix_is_applied_as_files_checked_once_built_and_by_the_facts_after(tmp_path):
    fix = ref(tmp_path, "e/0001-fix.patch", modify("pkg/runner.py"))
    build, files, why = routes([fix])
    assert (build, files) == ([], ["e/0001-fix.patch"])
    assert why["e/0001-fix.patch"][1].endswith("not yet in the routes file: `image` learns it from its build first")
    build, files, why = routes([fix], fact("pkg/runner.py"))
    assert files == ["e/0001-fix.patch"] and why["e/0001-fix.patch"][1].startswith("1 file, ")
    build, files, why = routes([fix], fact("pkg/other.py"))  # another file learned: this one is not known yet
    assert files == ["e/0001-fix.patch"] and why["e/0001-fix.patch"][1].endswith("`image` learns it from its build first")
    build, files, why = routes([fix], {**fact("pkg/other.py"), "pkg/runner.py": False})  # learned: not verbatim
    assert build == ["e/0001-fix.patch"] and why["e/0001-fix.patch"] == ("build", "pkg/runner.py is not installed "
                                                                          "verbatim")


def test_what_a_build_reads_or_a_change_a_layer_of_files_cannot_say_goes_into_the_build(tmp_path):
    cases = {
        "csrc/attention.cu": "csrc/attention.cu is compiled by the build (a .cu file)",
        "engine.c": "engine.c is compiled by the build (a .c file)",
        "include/api.h": "include/api.h is compiled by the build (a .h file)",
        "setup.py": "setup.py defines the build",
        "CMakeLists.txt": "CMakeLists.txt defines the build",
        "cmake/utils.cmake": "cmake/utils.cmake defines the build",
        "requirements/cuda.txt": "requirements/cuda.txt states the build's requirements",
        "requirements-dev.txt": "requirements-dev.txt states the build's requirements",
    }
    for path, reason in cases.items():
        patch = ref(tmp_path, f"e/{path.replace('/', '-')}.patch", modify(path))
        assert routes([patch], fact(path))[2][patch.name] == ("build", reason)
    new = ref(tmp_path, "e/new.patch", "--- /dev/null\n+++ b/pkg/new.py\n@@ -0,0 +1 @@\n+a = 1\n")
    gone = ref(tmp_path, "e/gone.patch", "--- a/pkg/old.py\n+++ /dev/null\n@@ -1 +0,0 @@\n-a = 1\n")
    moved = ref(tmp_path, "e/moved.patch", "diff --git a/pkg/a.py b/pkg/b.py\nsimilarity index 100%\n"
                                           "rename from pkg/a.py\nrename to pkg/b.py\n")
    mode = ref(tmp_path, "e/mode.patch", "diff --git a/pkg/a.py b/pkg/a.py\nold mode 100644\nnew mode 100755\n")
    why = routes([new, gone, moved, mode])[2]
    assert why == {"e/new.patch": ("build", "pkg/new.py is a new file"),
                   "e/gone.patch": ("build", "pkg/old.py is deleted"),
                   "e/moved.patch": ("build", "pkg/a.py is renamed to pkg/b.py"),
                   "e/mode.patch": ("build", "pkg/a.py changes its mode")}


def test_a_patch_sharing_a_file_with_one_in_the_build_goes_with_it_and_others_stay_files(tmp_path):
    first = ref(tmp_path, "e/0001-py.patch", modify("pkg/ops.py"))
    second = ref(tmp_path, "e/0002-kernel.patch", modify("pkg/ops.py", "a = 2", "a = 3") + modify("csrc/ops.cu"))
    third = ref(tmp_path, "e/0003-other.patch", modify("pkg/cli.py"))
    build, files, why = routes([first, second, third])
    assert build == ["e/0001-py.patch", "e/0002-kernel.patch"] and files == ["e/0003-other.patch"]
    assert why["e/0001-py.patch"] == ("build", "pkg/ops.py is also changed by 0002-kernel.patch, which goes into "
                                                "the build")


def test_a_component_that_refuses_or_a_patch_outside_its_declared_inputs(tmp_path):
    fix = ref(tmp_path, "e/0001-fix.patch", modify("py/runner.py"))
    assert routes([fix], refused="patches-as-files: false")[2][fix.name] == ("build", "patches-as-files: false")
    build, files, why = routes([fix], inputs=("csrc/**",))
    assert files == [] and build == [fix.name] and why[fix.name][0] == "outside"


def out_tar(path: Path, files: dict) -> Path:
    with open(path, "wb") as sink:
        writer = TarWriter(sink, mtime=0)
        for name, (data, mode) in files.items():
            writer.add_bytes(name, data, mode)
        writer.close()
    return path


def test_learning_matches_by_bytes_and_the_longest_shared_path_end(tmp_path):
    sources = {
        "py/launcher.py": b"print('serve')\n",
        "py/tool.py": b"print('tool')\n",
        "pkg/a/__init__.py": b"",
        "pkg/b/__init__.py": b"",
        "x/__init__.py": b"",
        "gen/version.py": b"V = 1\n",
    }
    digests = {p: (len(d), hashlib.sha256(d).hexdigest()) for p, d in sources.items()}
    tar = out_tar(tmp_path / "out.tar", {
        "opt/py/launcher.py": (sources["py/launcher.py"], 0o755),  # copied: verbatim, its mode as installed
        "usr/local/bin/tool": (sources["py/tool.py"], 0o755),  # renamed: no path in common
        "opt/pkg/a/__init__.py": (b"", 0o644),  # three empty files: the nearest path decides
        "gen/version.py": (b"V = 2\n", 0o644),  # rewritten by the build
        "y/__init__.py": (b"", 0o644),  # the same bytes as three files, none nearer: no fact
    })
    facts = learn(digests, tar_members(tar))
    assert {path for path, placed in facts.items() if placed} == {"py/launcher.py", "pkg/a/__init__.py"}
    assert set(facts) == set(sources)  # every file asked about is known after: the rest not verbatim
    assert facts["py/launcher.py"][0].at == "opt/py/launcher.py" and facts["py/launcher.py"][0].mode == 0o755


def wheel(folder: Path, runner: bytes) -> tuple[Path, str]:
    """A wheel with a module, an executable member, a console script and a script in .data/."""
    name = "eng-1.0-py3-none-any.whl"
    folder.mkdir(parents=True, exist_ok=True)
    members = {
        "eng/__init__.py": (b"", 0o644),
        "eng/runner.py": (runner, 0o644),
        "eng/tool.sh": (b"#!/bin/sh\necho tool\n", 0o755),
        "eng-1.0.data/scripts/eng-helper": (b"#!python\nprint('helper')\n", 0o755),
        "eng-1.0.dist-info/METADATA": (b"Metadata-Version: 2.1\nName: eng\nVersion: 1.0\n", 0o644),
        "eng-1.0.dist-info/WHEEL": (b"Wheel-Version: 1.0\nGenerator: t\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
                                    0o644),
        "eng-1.0.dist-info/entry_points.txt": (b"[console_scripts]\neng = eng.runner:main\n", 0o644),
    }
    rows = []
    for arc, (data, _) in members.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        rows.append(f"{arc},sha256={digest},{len(data)}")
    rows.append("eng-1.0.dist-info/RECORD,,")
    members["eng-1.0.dist-info/RECORD"] = ("\n".join(rows).encode() + b"\n", 0o644)
    with zipfile.ZipFile(folder / name, "w") as archive:
        for arc, (data, mode) in members.items():
            info = zipfile.ZipInfo(arc, date_time=(2020, 1, 1, 0, 0, 0))
            info.external_attr = (0o100000 | mode) << 16
            archive.writestr(info, data)
    return folder / name, name


def installed(path: Path, name: str) -> dict:
    sink = io.BytesIO()
    writer = TarWriter(sink, mtime=0)
    install_wheel(path, name, "/usr/lib/python3/dist-packages", "/usr/bin/python3", writer)
    writer.close()
    sink.seek(0)
    with tarfile.open(fileobj=sink) as tar:
        return {m.name: (tar.extractfile(m).read(), m.mode) for m in tar if m.isreg()}


def test_the_record_replayed_with_a_member_replaced_is_what_installing_the_patched_wheel_writes(tmp_path):
    before, name = wheel(tmp_path / "a", b"a = 1\ndef main(): pass\n")
    after, _ = wheel(tmp_path / "b", b"a = 2\ndef main(): pass\n")
    where, record = installed_record(before, name, "/usr/lib/python3/dist-packages", "/usr/bin/python3",
                                     {"eng/runner.py": b"a = 2\ndef main(): pass\n"})
    real = installed(after, name)
    assert where == "usr/lib/python3/dist-packages/eng-1.0.dist-info/RECORD"
    assert record == real[where][0]  # the console script, the .data script's new shebang, INSTALLER, all
    assert installed_record(before, name, "/usr/lib/python3/dist-packages", "/usr/bin/python3", {})[1] == \
        installed(before, name)[where][0]
    # what a wheel's install copies as it is: its root, never .data/ or .dist-info/, with the installer's modes
    members = {m.at: m.mode for m in wheel_members(before, name)}
    assert members == {"eng/__init__.py": 0o644, "eng/runner.py": 0o644, "eng/tool.sh": 0o755}
    assert installed(before, name)["usr/lib/python3/dist-packages/eng/tool.sh"][1] == 0o755


def test_facts_kept_in_the_store_are_read_back_and_a_record_of_another_shape_is_none(tmp_path):
    store = Store(tmp_path / "home")
    facts = {"py/a.py": (Placed("opt/py/a.py", "", "a" * 64, 3, 0o644),)}
    keep_facts(store, "k" * 64, facts)
    assert read_facts(store, "k" * 64) == facts
    store.put_record("verbatim", "b" * 64, {"format": 1, "files": {"py/a.py": [["opt/py/a.py", "", "../x", 3, 420]]}})
    assert read_facts(store, "b" * 64) is None
    assert read_facts(store, "c" * 64) is None


def test_learning_one_file_and_those_named_alike_gives_what_learning_every_file_gives(tmp_path):
    """A layer of patched files learns only what its patches touch (and the source files of the
    same name, which alone can be nearer to a member): the facts for those files are the ones a
    look at every source file gives."""
    sources = {
        "vllm/worker/runner.py": b"r = 1\n",
        "runner.py": b"r = 1\n",  # the same bytes, a shorter shared path end than the package's file
        "vllm/a/__init__.py": b"",
        "vllm/b/__init__.py": b"",
        "tools/runner.py": b"r = 1\n",
        "vllm/util.py": b"u = 1\n",
        "vllm/gen.py": b"g = 1\n",
    }
    digests = {p: (len(d), hashlib.sha256(d).hexdigest()) for p, d in sources.items()}
    tar = out_tar(tmp_path / "out.tar", {
        "site/vllm/worker/runner.py": (sources["vllm/worker/runner.py"], 0o644),
        "site/vllm/a/__init__.py": (b"", 0o644),
        "site/vllm/b/__init__.py": (b"", 0o644),
        "site/vllm/util.py": (sources["vllm/util.py"], 0o644),
        "site/vllm/gen.py": (b"g = 2\n", 0o644),  # rewritten by the build
    })
    every = learn(digests, tar_members(tar))
    for path in sources:
        alike = same_names(sources, [path])
        assert path in alike and all(p.rsplit("/", 1)[-1] == path.rsplit("/", 1)[-1] for p in alike)
        some = learn({p: digests[p] for p in alike}, tar_members(tar))
        assert some[path] == every[path], path
    assert every["vllm/worker/runner.py"][0].at == "site/vllm/worker/runner.py"
    assert every["runner.py"] == () and every["vllm/gen.py"] == ()


def _recipe(key: str = "a" * 64, verbatim: dict | None = None):
    from enginebuild.lock.routesfile import Recipe

    return Recipe("vllm", "linux/amd64", key, verbatim or {"vllm/runner.py": True})


def test_what_a_build_learns_is_written_beside_the_lock_and_read_back_by_recipe(tmp_path):
    from enginebuild.lock.routesfile import committed, record, routes_path

    (tmp_path / "lockfiles").mkdir()
    assert committed(tmp_path)("img")("a" * 64) is None  # no routes file: nothing known
    assert record(tmp_path, "img", _recipe(verbatim={"vllm/runner.py": True}))
    assert not record(tmp_path, "img", _recipe(verbatim={"vllm/runner.py": True}))  # already said: the file is not written again
    assert record(tmp_path, "img", _recipe(verbatim={"vllm/other.py": False}))  # the same recipe: what it knew is kept
    assert committed(tmp_path)("img")("a" * 64) == {"vllm/runner.py": True, "vllm/other.py": False}
    text = routes_path(tmp_path, "img").read_text()
    assert text.endswith("\n") and json.loads(text)["components"][0]["verbatim"] == \
        {"vllm/other.py": False, "vllm/runner.py": True}
    # another recipe of the same component and platform (a new pin, another build): the old one is no fact
    assert record(tmp_path, "img", _recipe("b" * 64, {"vllm/runner.py": False}))
    assert committed(tmp_path)("img")("a" * 64) is None
    assert committed(tmp_path)("img")("b" * 64) == {"vllm/runner.py": False}
    assert committed(tmp_path)("other")("b" * 64) is None  # an image's plan reads its own file, as its own lock


@pytest.mark.parametrize("edit, where", [
    (lambda d: d.update(format=9), "lockfiles/img.routes.json: not an enginebuild routes file"),
    (lambda d: d["components"][0].update(recipe="../x"), "lockfiles/img.routes.json: components[0].recipe: '../x' is "
                                                          "not a recipe"),
    (lambda d: d["components"][0].update(platform="linux"), "components[0].platform: 'linux' is not a platform"),
    (lambda d: d["components"][0]["verbatim"].update({"../etc/passwd": True}), "components[0].verbatim.../etc/passwd: "
                                                                                 "expected a relative source path"),
    (lambda d: d["components"][0]["verbatim"].update({"a.py": "yes"}), "components[0].verbatim.a.py: expected"),
    (lambda d: d["components"][0].pop("recipe"), "components[0]: expected the keys component, platform, recipe"),
])
def test_a_routes_file_edited_wrong_is_an_error_naming_its_key_never_a_fact(tmp_path, edit, where):
    from enginebuild.errors import LockError
    from enginebuild.lock.routesfile import committed, record, routes_path

    (tmp_path / "lockfiles").mkdir()
    record(tmp_path, "img", _recipe())
    path = routes_path(tmp_path, "img")
    doc = json.loads(path.read_text())
    edit(doc)
    path.write_text(json.dumps(doc))
    with pytest.raises(LockError) as caught:
        committed(tmp_path)("img")
    assert where in caught.value.message and "git checkout" in (caught.value.hint or "")
    before = path.read_bytes()
    with pytest.raises(LockError):  # nothing written over a file it cannot read
        record(tmp_path, "img", _recipe(verbatim={"vllm/x.py": True}))
    assert path.read_bytes() == before


def test_a_routes_file_too_large_or_not_json_is_refused(tmp_path):
    from enginebuild.errors import LockError
    from enginebuild.lock.routesfile import LIMIT, committed, routes_path

    (tmp_path / "lockfiles").mkdir()
    path = routes_path(tmp_path, "img")
    path.write_bytes(b"{" * 10)
    with pytest.raises(LockError, match="not valid JSON"):
        committed(tmp_path)("img")
    path.write_bytes(b" " * (LIMIT + 1))
    with pytest.raises(LockError, match="not a routes file"):
        committed(tmp_path)("img")
