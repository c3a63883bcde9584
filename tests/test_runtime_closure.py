"""The runtime-closure check's loader model, on layers made here of small ELF files (no engine):
what an image's own loader would find, and what it would not, for both platforms."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pytest

from enginebuild.kernels.closure import Closure, Skip, check_closure
from enginebuild.kernels.filetable import Entry, FileTable, index_layer
from helpers.elfmake import make_elf

TRIPLET = {"amd64": "x86_64-linux-gnu", "arm64": "aarch64-linux-gnu"}
LOADER = {"amd64": "/lib64/ld-linux-x86-64.so.2", "arm64": "/lib/ld-linux-aarch64.so.1"}
SITE = "/usr/local/lib/python3.11/site-packages"


def layer(folder: Path, name: str, files: dict[str, bytes | str]) -> Path:
    """A layer tar: bytes are files, text starting with '->' a symbolic link, '.wh.' names whiteouts."""
    path = folder / f"{name}.tar"
    with tarfile.open(path, "w") as tar:
        for member, data in files.items():
            info = tarfile.TarInfo(member.lstrip("/"))
            if isinstance(data, str):
                info.type, info.linkname = tarfile.SYMTYPE, data[2:]
                tar.addfile(info)
            else:
                info.size, info.mode = len(data), 0o755
                tar.addfile(info, io.BytesIO(data))
    return path


def base_files(arch: str) -> dict[str, bytes | str]:
    lib = f"/lib/{TRIPLET[arch]}"
    return {
        f"{lib}/libc.so.6": make_elf(arch, soname="libc.so.6", needed=(LOADER[arch].rsplit("/", 1)[1],)),
        f"{lib}/{LOADER[arch].rsplit('/', 1)[1]}": make_elf(arch, soname=LOADER[arch].rsplit("/", 1)[1]),
        LOADER[arch]: f"->{lib}/{LOADER[arch].rsplit('/', 1)[1]}",
        f"/usr/lib/{TRIPLET[arch]}/libstdc++.so.6.0.30": make_elf(arch, soname="libstdc++.so.6", needed=("libc.so.6",)),
        f"/usr/lib/{TRIPLET[arch]}/libstdc++.so.6": "->libstdc++.so.6.0.30",
        "/etc/ld.so.conf": b"include /etc/ld.so.conf.d/*.conf\n",
        "/etc/ld.so.conf.d/vendor.conf": b"# a vendor's folder\n/opt/vendor/lib\n",
        "/opt/vendor/lib/libvendor.so.1": make_elf(arch, soname="libvendor.so.1"),
    }


def check(tmp_path: Path, arch: str, ours: dict[str, bytes | str], later: dict[str, bytes | str] | None = None,
          skip: tuple[Skip, ...] = (), library_path: str = "") -> Closure:
    table = FileTable()
    paths: dict[str, Path] = {}
    for name, files in (("base", base_files(arch)), ("ours", ours), ("later", later or {})):
        paths[name] = layer(tmp_path, name, files)
        with tarfile.open(paths[name]) as tar:
            table.add(name, index_layer(tar), name)

    def read(entry: Entry) -> Path | None:
        return paths[entry.at[0]] if entry.at else None

    return check_closure("toy", f"linux/{arch}", table, {"ours", "later"}, library_path, skip, read)


def app(arch: str, *needed: str, runpath: str = "") -> bytes:
    return make_elf(arch, interp=LOADER[arch], executable=True, needed=("libc.so.6", *needed), runpath=runpath)


@pytest.mark.parametrize("arch", ["amd64", "arm64"])
def test_what_the_loader_finds_resolves_and_a_missing_library_fails_naming_both(tmp_path: Path, arch: str) -> None:
    closure = check(tmp_path, arch, {
        "/opt/app/bin/tool": app(arch, "libstdc++.so.6", "libvendor.so.1", "libgomp.so.1"),
        "/opt/app/lib/libok.so": make_elf(arch, soname="libok.so", needed=("libc.so.6",)),
    })
    assert closure.checked == 2
    assert [(u.path, u.name) for u in closure.missing] == [("/opt/app/bin/tool", "libgomp.so.1")]
    assert "libgomp1" in closure.missing[0].note  # where Debian would ship it
    assert closure.resolved == 4  # libc twice, libstdc++ through its link, libvendor through ld.so.conf's include
    assert not closure.ok
    text = "\n".join(closure.lines())
    assert "MISSING libgomp.so.1, needed by /opt/app/bin/tool" in text and "FAILED" in text


@pytest.mark.parametrize("arch", ["amd64", "arm64"])
def test_origin_runpaths_resolve_and_their_absence_fails(tmp_path: Path, arch: str) -> None:
    torch = f"{SITE}/torch"
    files: dict[str, bytes | str] = {
        f"{torch}/lib/libc10.so": make_elf(arch, soname="libc10.so", needed=("libc.so.6",)),
        f"{torch}/lib/libtorch.so": make_elf(arch, soname="libtorch.so", needed=("libc10.so",), runpath="$ORIGIN"),
        f"{torch}/_C.cpython-311-x.so": make_elf(arch, needed=("libtorch.so",), runpath="$ORIGIN/lib"),
        "/opt/llama/bin/llama-server": app(arch, "libllama.so", runpath="$ORIGIN/../lib"),
        "/opt/llama/lib/libllama.so": make_elf(arch, soname="libllama.so", needed=("libstdc++.so.6",)),
        "/usr/local/bin/llama-server": "->/opt/llama/bin/llama-server",  # $ORIGIN by the real path too
    }
    closure = check(tmp_path, arch, files)
    assert closure.ok, closure.lines()
    moved = dict(files)
    moved[f"{torch}/_C.cpython-311-x.so"] = make_elf(arch, needed=("libtorch.so",), runpath="$ORIGIN/../lib")
    missing = check(tmp_path, arch, moved).missing
    assert [(u.path, u.name) for u in missing] == [(f"{torch}/_C.cpython-311-x.so", "libtorch.so")]


def test_a_python_extension_resolves_against_what_its_imports_loaded(tmp_path: Path) -> None:
    files: dict[str, bytes | str] = {
        f"{SITE}/torch/lib/libc10.so": make_elf(soname="libc10.so"),
        f"{SITE}/torch/_C.cpython-311-x.so": make_elf(needed=("libc10.so", "libcudart.so.13"),
                                                      runpath="$ORIGIN/lib:$ORIGIN/../nvidia/cuda_runtime/lib"),
        f"{SITE}/nvidia/cuda_runtime/lib/libcudart.so.13": make_elf(soname="libcudart.so.13"),
        f"{SITE}/vllm/_C.abi3.so": make_elf(needed=("libc10.so", "libcudart.so.13", "libc.so.6")),
        "/opt/elsewhere/libuses.so": make_elf(needed=("libc10.so",)),  # outside a Python process: not found
    }
    closure = check(tmp_path, "amd64", files)
    assert closure.in_process == 2
    assert [(u.path, u.name) for u in closure.missing] == [("/opt/elsewhere/libuses.so", "libc10.so")]
    # nothing loads a library that no binary's own search finds: then it is not there to be matched
    del files[f"{SITE}/torch/_C.cpython-311-x.so"]
    alone = check(tmp_path, "amd64", files)
    assert sorted(u.name for u in alone.missing if u.path.endswith("_C.abi3.so")) == ["libc10.so", "libcudart.so.13"]


def test_driver_libraries_are_listed_apart_not_failed(tmp_path: Path) -> None:
    closure = check(tmp_path, "amd64", {
        "/opt/enginebuild/lib/libdemo_cuda.so": make_elf(needed=("libcuda.so.1", "libnvidia-ml.so.1",
                                                                 "libstdc++.so.6")),
    })
    assert closure.ok
    assert sorted(u.name for u in closure.driver) == ["libcuda.so.1", "libnvidia-ml.so.1"]
    assert "from the host driver" in "\n".join(closure.lines())


def test_a_plugin_its_neighbour_opens_is_optional_but_an_unlinked_library_alone_is_not(tmp_path: Path) -> None:
    lib = f"{SITE}/nvidia/nvshmem/lib"
    closure = check(tmp_path, "amd64", {
        f"{lib}/libnvshmem_host.so.3": make_elf(soname="libnvshmem_host.so.3", extra=b"nvshmem_transport_ucx.so.3\0"),
        f"{lib}/nvshmem_transport_ucx.so.3": make_elf(needed=("libucp.so.0",)),
        "/opt/enginebuild/lib/libdemo.so": make_elf(needed=("libstdc++.so.7",)),  # loaded by a program: required
    })
    assert [(u.path, u.name) for u in closure.optional] == [(f"{lib}/nvshmem_transport_ucx.so.3", "libucp.so.0")]
    assert f"{lib}/libnvshmem_host.so.3" in closure.optional[0].note
    assert [(u.path, u.name) for u in closure.missing] == [("/opt/enginebuild/lib/libdemo.so", "libstdc++.so.7")]


def test_files_for_another_machine_are_listed_not_checked_and_a_wrong_class_candidate_is_passed_over(
        tmp_path: Path) -> None:
    closure = check(tmp_path, "amd64", {
        f"{SITE}/cutlass/stubs/aarch64/libstub.so": make_elf("arm64", needed=("libqnx.so.5",)),
        "/opt/app/first/libpick.so.1": make_elf("arm64", soname="libpick.so.1"),  # found first, wrong machine
        "/opt/app/second/libpick.so.1": make_elf(soname="libpick.so.1"),
        "/opt/app/bin/tool": app("amd64", "libpick.so.1"),
    }, library_path="/opt/app/first:/opt/app/second")
    assert closure.ok, closure.lines()
    assert closure.other_platform == ["/opt/app/first/libpick.so.1", f"{SITE}/cutlass/stubs/aarch64/libstub.so"]
    assert "2 file(s) for another machine, not checked" in "\n".join(closure.lines())


def test_a_later_layer_removing_a_library_breaks_what_needs_it_and_a_skip_names_its_reason(tmp_path: Path) -> None:
    ours: dict[str, bytes | str] = {"/opt/app/lib/libdep.so.2": make_elf(soname="libdep.so.2"),
                                    "/opt/app/bin/tool": app("amd64", "libdep.so.2", runpath="$ORIGIN/../lib")}
    assert check(tmp_path, "amd64", ours).ok
    removed = check(tmp_path, "amd64", ours, {"/opt/app/lib/.wh.libdep.so.2": b""})
    assert [u.name for u in removed.missing] == ["libdep.so.2"]
    skipped = check(tmp_path, "amd64", ours, {"/opt/app/lib/.wh.libdep.so.2": b""},
                    skip=(Skip("/opt/app/bin/*", "only run when configured"),))
    assert skipped.ok and [(u.name, u.note) for u in skipped.skipped] == [("libdep.so.2", "only run when configured")]


def test_a_missing_interpreter_fails(tmp_path: Path) -> None:
    closure = check(tmp_path, "amd64", {"/opt/app/bin/musl": make_elf(interp="/lib/ld-musl-x86_64.so.1",
                                                                      executable=True)})
    assert [u.name for u in closure.missing] == ["/lib/ld-musl-x86_64.so.1"]


def test_a_library_finds_what_the_object_loading_it_loaded_first(tmp_path: Path) -> None:
    libs = f"{SITE}/codec.libs"
    files: dict[str, bytes | str] = {
        f"{libs}/libXau-1a2b.so.6": make_elf(soname="libXau-1a2b.so.6", needed=("libc.so.6",)),
        f"{libs}/libxcb-3c4d.so.1": make_elf(soname="libxcb-3c4d.so.1", needed=("libXau-1a2b.so.6", "libc.so.6")),
        "/opt/codec/bin/decode": app("amd64", "libxcb-3c4d.so.1", "libXau-1a2b.so.6", runpath=libs),
    }
    closure = check(tmp_path, "amd64", files)
    assert closure.ok, closure.lines()
    assert closure.in_process == 1  # libxcb's libXau: loaded by the program before libxcb's needs are looked up
    del files["/opt/codec/bin/decode"]
    alone = check(tmp_path, "amd64", files)
    assert [(u.path, u.name) for u in alone.missing] == [(f"{libs}/libxcb-3c4d.so.1", "libXau-1a2b.so.6")]


def test_a_loaders_rpath_is_searched_for_what_it_loads_but_a_runpath_is_not(tmp_path: Path) -> None:
    def files(tag: str) -> dict[str, bytes | str]:
        paths = {"rpath": "", "runpath": ""}
        paths[tag] = "$ORIGIN:$ORIGIN/../codec."  # a wheel's vendored folder, named as its RECORD names it
        return {
            f"{SITE}/codec./libxcb-5d.so.1": make_elf(soname="libxcb-5d.so.1"),
            f"{SITE}/Codec/libavdevice.so.62": make_elf(soname="libavdevice.so.62", needed=("libxcb-5d.so.1",)),
            f"{SITE}/Codec/Codec.cpython-311-x.so": make_elf(needed=("libavdevice.so.62",), **paths),
        }

    inherited = check(tmp_path, "amd64", files("rpath"))
    assert inherited.ok, inherited.lines()
    assert inherited.resolved == 2  # libavdevice through the module's RPATH, libxcb through it too (inherited)
    # a DT_RUNPATH applies to the object's own needs only: libavdevice's libxcb is then not found
    # (nothing else loads it: not even the Python process has it)
    alone = check(tmp_path, "amd64", files("runpath"))
    assert [(u.path, u.name) for u in alone.missing] == [(f"{SITE}/Codec/libavdevice.so.62", "libxcb-5d.so.1")]


def test_a_library_the_python_code_opens_is_loaded_before_what_needs_it_and_cubins_are_passed_over(
        tmp_path: Path) -> None:
    dsl = f"{SITE}/nvidia_cutlass_dsl"
    files: dict[str, bytes | str] = {
        f"{dsl}/lib/libcute_dsl_runtime.so": make_elf(soname="libcute_dsl_runtime.so"),
        f"{SITE}/mla/objs/fmha_sm_100a.so": make_elf(needed=("libcute_dsl_runtime.so",)),
        f"{SITE}/flashinfer_cubin/cubins/gemm.cubin": make_elf(needed=("libnothing.so",)) .replace(
            b"\x3e\x00", b"\xbe\x00", 1),  # e_machine 190: a CUDA cubin
    }
    unopened = check(tmp_path, "amd64", files)
    assert [(u.path, u.name) for u in unopened.missing] == [(f"{SITE}/mla/objs/fmha_sm_100a.so",
                                                              "libcute_dsl_runtime.so")]
    assert unopened.other_platform == [] and unopened.checked == 2  # the cubin is not the loader's
    files[f"{dsl}/python_packages/cutlass/runtime.py"] = b'ctypes.CDLL(os.path.join(LIB, "libcute_dsl_runtime.so"))\n'
    opened = check(tmp_path, "amd64", files)
    assert opened.ok, opened.lines()
    assert opened.in_process == 1


def test_a_library_with_thousands_of_folders_and_names_costs_their_sum_not_their_product(tmp_path: Path,
                                                                                          monkeypatch) -> None:
    """A library is another party's file: 4,000 RUNPATH folders and 4,000 NEEDED names (a 1.7 MB
    library once took 45 s) are judged with folder lookups that grow with the sum of the two (the
    count is the measure, not the time: the same on any machine)."""
    arch, folders, names = "amd64", 4000, 4000
    runpath = ":".join(f"/opt/many/dir{i}" for i in range(folders))
    needed = tuple(f"libabsent{i}.so" for i in range(names)) + ("libfound.so",)
    files: dict[str, bytes | str] = {
        "/opt/many/lib/libwide.so": make_elf(arch, soname="libwide.so", needed=needed, runpath=runpath),
        f"/opt/many/dir{folders - 1}/libfound.so": make_elf(arch, soname="libfound.so"),
    }
    calls = {"real": 0}
    real = FileTable.real

    def counted(self: FileTable, path: str) -> str | None:
        calls["real"] += 1
        return real(self, path)

    monkeypatch.setattr(FileTable, "real", counted)
    closure = check(tmp_path, arch, files)
    assert [u.name for u in closure.missing] == list(needed[:-1])  # every absent name, the last one found
    assert calls["real"] < 4 * (folders + names), calls


@pytest.mark.parametrize("cut", ["dynamic", "strings"])
def test_a_library_whose_dynamic_segment_lies_past_its_end_is_damaged_not_passed(tmp_path: Path, cut: str) -> None:
    """Before, a PT_DYNAMIC past the end of the file read as "needs nothing": the check passed a
    library the loader refuses to map."""
    whole = make_elf("amd64", soname="libcut.so", needed=("libc.so.6", "libgone.so"))
    dynamic_at = len(whole) - 16 * 5  # two NEEDED, SONAME, STRTAB, STRSZ, NULL: the last 6 entries
    cut_at = dynamic_at - 16 if cut == "dynamic" else 200
    closure = check(tmp_path, "amd64", {"/opt/cut/lib/libcut.so": whole[:max(cut_at, 200)]})
    assert not closure.ok and closure.missing == []
    assert [u.path for u in closure.damaged] == ["/opt/cut/lib/libcut.so"]
    assert "DAMAGED /opt/cut/lib/libcut.so: its dynamic segment" in "\n".join(closure.lines())
