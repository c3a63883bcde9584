"""The plan is pure: a component's key covers only its own inputs, a runtime layer only what
shapes its bytes, so each kind of edit moves exactly the keys it should (no engine, no builder)."""
import json
import re

from conftest import ROOT
from enginebuild.layerkinds.commands import Run
from enginebuild.lock.lockfile import read_lock
from enginebuild.plan.image import Options, plan_image
from enginebuild.recipe.catalog import Catalog
from helpers.inprocess import run_in_process
from helpers.specs import write_image


def plan_of(workspace, name="demo", **kw):
    spec = Catalog(workspace).load(name)
    return plan_image(spec, read_lock(workspace, spec), spec.platforms[0], Options(**kw))


def keys(plan) -> dict:
    out = {f"component {c.name}": c.key for c in plan.components}
    out.update({layer.name: layer.chain for layer in plan.runtime.layers})
    return out


def moved(before, after) -> list:
    return [name for name in after if before.get(name) != after[name]]


def test_planning_twice_gives_identical_keys_and_dockerfiles(workspace):
    first, second = plan_of(workspace), plan_of(workspace)
    assert keys(first) == keys(second)
    assert [c.dockerfile for c in first.components] == [c.dockerfile for c in second.components]


def test_editing_a_launch_script_moves_only_its_own_layer(workspace):
    before = keys(plan_of(workspace))
    with open(workspace / "images/demo/launch_server.sh", "a") as handle:
        handle.write("# tuned\n")
    assert moved(before, keys(plan_of(workspace))) == ["files /opt/enginebuild/bin/launch_server.sh",
                                                        "files /opt/enginebuild/bin/wait_for_server.sh"]


def test_editing_a_components_patch_moves_that_component_what_needs_it_and_the_runtime_after_it(workspace):
    plan = plan_of(workspace)
    before = keys(plan)
    patch = workspace / "patches/demo-engine/0001-aux-layer-ids-off-by-one.patch"
    patch.write_text(patch.read_text().replace("Subject:", "Subject: (edited)"))
    changed = moved(before, keys(plan_of(workspace)))
    assert "component engine" in changed and "component kernels" not in changed
    assert not any(name.startswith(("system", "python")) for name in changed)


def test_a_runtime_system_package_moves_no_component(workspace):
    before = keys(plan_of(workspace))
    spec = workspace / "images/demo/image.yaml"
    text = spec.read_text()
    assert "packages: [busybox-static, python3, libstdc++6]" in text
    spec.write_text(text.replace("packages: [busybox-static, python3, libstdc++6]",
                                 "packages: [busybox-static, python3, libstdc++6, jq]"))
    lock = json.loads((workspace / "lockfiles/demo.lock").read_text())
    for arch in ("amd64", "arm64"):
        entry = lock["inputs"][f"runtime.system@linux/{arch}"]
        entry["request"]["packages"] = sorted(entry["request"]["packages"] + ["jq"])
        entry["resolved"]["packages"].append({"name": "jq", "version": "1", "arch": arch, "filename": "pool/j/jq.deb",
                                              "sha256": "0" * 64, "size": 1, "archive": 0})
    (workspace / "lockfiles/demo.lock").write_text(json.dumps(lock))
    changed = moved(before, keys(plan_of(workspace)))
    assert not any(name.startswith("component") for name in changed)
    assert changed[0].startswith("system packages")


def test_a_build_argument_moves_its_component_and_what_needs_it(workspace):
    before = keys(plan_of(workspace))
    changed = moved(before, keys(plan_of(workspace, build_args={"DEMO_KERNEL_UNITS": "3"})))
    assert "component kernels" in changed and "component engine" in changed
    assert not any(name.startswith(("system", "python")) for name in changed)


def test_a_component_context_holds_only_its_own_files(workspace):
    plan = plan_of(workspace)
    engine = plan.component("engine")
    assert sorted(i.arcname for i in engine.context) == ["build.sh", "deps/kernels.tar", "source.tar"]
    kernels = plan.component("kernels")  # its compiler cache's seed folder too (build.cache)
    assert sorted(i.arcname for i in kernels.context) == ["build.sh", "compiler-cache/.keep", "source.tar"]


def test_the_runtime_receives_outputs_not_build_trees(workspace):
    plan = plan_of(workspace)
    kinds = [layer.kind for layer in plan.runtime.layers]
    assert kinds.count("output") == 3 and "run" not in kinds[kinds.index("output"):]
    assert [layer.kind for layer in plan.runtime.layers if isinstance(layer.payload, Run)] == ["system"]


def test_the_image_carries_oci_labels_and_the_patch_list(workspace):
    plan = plan_of(workspace)
    labels = plan.config.labels
    spec = Catalog(workspace).load("demo")
    assert labels["org.opencontainers.image.created"] == "1970-01-01T00:00:01Z" != read_lock(workspace, spec).created
    assert labels["org.opencontainers.image.title"] == "demo"
    assert labels["org.enginebuild.patches"].startswith("demo-engine/0001-aux-layer-ids-off-by-one.patch@sha256:")
    assert labels["org.enginebuild.patches"].count("@sha256:") == 1  # engine and engine-py share the stack: named once
    assert plan.manifest["patches"][0]["applies_to"] == "engine"


def test_env_values_refer_to_the_base_or_earlier_entries(workspace):
    write_image(workspace, "t", "base: scratch\nplatform: linux/amd64\nenv:\n  A: /opt\n  PATH: \"$A/bin:${PATH:-/bin}\"\n"
                                "  PRICE: \"$$5\"\n")
    assert run_in_process(["lock", "t"], workspace).returncode == 0
    plan = plan_of(workspace, "t")
    assert dict(plan.config.env) == {"A": "/opt", "PATH": "/opt/bin:/bin", "PRICE": "$5"}


def test_an_env_value_naming_an_unknown_variable_is_refused_at_its_line(workspace):
    write_image(workspace, "t", "base: scratch\nplatform: linux/amd64\nenv:\n  PATH: \"/x:$PATH\"\n")
    assert run_in_process(["lock", "t"], workspace).returncode == 0
    proc = run_in_process(["render", "t"], workspace)
    assert proc.returncode == 2
    assert proc.stderr.startswith("error: images/t/image.yaml:4: env.PATH: refers to $PATH, which neither the base")


def test_render_prints_components_command_layers_and_the_runtime_with_files_last(workspace):
    proc = run_in_process(["render", "demo"], workspace)
    assert proc.returncode == 0, proc.stderr
    headers = [line.split(" (")[0] for line in proc.stdout.splitlines() if line.startswith("###")]
    components = [h for h in headers if h.startswith("### component")]
    assert components.index("### component kernels") < components.index("### component engine")  # needs first
    assert headers.index("### runtime image") > max(headers.index(c) for c in components)
    runtime = proc.stdout.split("### runtime image")[1]
    copies = [line for line in runtime.splitlines() if line.startswith("COPY files/")]
    assert len(copies) == 2
    assert runtime.index("COPY --from=component:engine") < runtime.index(copies[0])


def test_render_unpinned_works_without_a_lockfile(workspace):
    (workspace / "lockfiles/demo.lock").unlink()
    proc = run_in_process(["render", "demo", "--unpinned"], workspace)
    assert proc.returncode == 0, proc.stderr
    assert "### runtime image" in proc.stdout
    locked = run_in_process(["render", "demo", "--locked"], workspace)  # without --unpinned it would lock first
    assert locked.returncode == 1 and "the lock would change" in locked.stderr, locked.stderr
    assert not (workspace / "lockfiles/demo.lock").exists()


def test_plan_never_writes_the_lock_it_says_what_lock_would_change(workspace):
    """A verb that sounds read-only changes no committed state: a platform dropped from the spec
    and a package added show as what `lock` would change; the lockfile keeps every byte."""
    spec = workspace / "images/demo/image.yaml"
    spec.write_text(spec.read_text().replace("platforms: [linux/amd64, linux/arm64]", "platforms: [linux/amd64]"))
    before = (workspace / "lockfiles/demo.lock").read_bytes()
    proc = run_in_process(["plan", "demo"], workspace)
    assert proc.returncode == 0, proc.stderr
    assert "`python BUILD.py lock demo` would change the lock: " in proc.stderr
    assert "runtime.system@linux/arm64: in the lock but no longer in the spec" in proc.stderr
    assert "(plan writes nothing)" in proc.stderr and "not buildable" not in proc.stdout  # the rest is pinned
    assert (workspace / "lockfiles/demo.lock").read_bytes() == before
    locked = run_in_process(["plan", "demo", "--locked"], workspace)
    assert locked.returncode == 1 and "the lock would change" in locked.stderr
    listed = run_in_process(["list"], workspace)
    assert listed.returncode == 0 and (workspace / "lockfiles/demo.lock").read_bytes() == before
    without = workspace / "images/demo/image.yaml"
    (workspace / "lockfiles/demo.lock").unlink()  # no lock at all: every input shown unpinned, none written
    proc = run_in_process(["plan", "demo", "--json"], workspace)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)["images"][0]
    assert not doc["buildable"] and "runtime.system@linux/amd64" in doc["unresolved"]
    assert not (workspace / "lockfiles/demo.lock").exists() and without.exists()


def test_relocking_identical_pins_gives_the_same_image(workspace):
    """The image's created time, manifest and ID depend on the pins only, never on when the lock
    was written (a relock from scratch, or of a copied recipe, stamps the lock anew)."""
    before = plan_of(workspace)
    path = workspace / "lockfiles/demo.lock"
    doc = json.loads(path.read_text())
    doc["created"] = "2031-05-05T05:05:05Z"
    path.write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n")
    after = plan_of(workspace)
    assert keys(after) == keys(before) and after.config == before.config and after.created == before.created
    assert after.manifest == before.manifest
    assert plan_of(workspace, source_date_epoch=1700000000).created == "2023-11-14T22:13:20Z"  # SOURCE_DATE_EPOCH


def test_the_fast_paths_and_the_full_path_describe_a_default_run_alike():
    """The no-op and file-edit answers look the memo up by RunOptions built from the command line
    alone; the full path stores it by the plan's own options: a default run must be the same key."""
    from enginebuild.state.memo import RunOptions
    from enginebuild.usecases.remembering import run_options

    assert run_options(Options(), ()) == RunOptions() and RunOptions().answerable()
    assert run_options(Options(), ("linux/arm64",)).answerable()
    assert not run_options(Options(build_args={"X": "1"}), ()).answerable()
    assert not run_options(Options(only=frozenset({"files"})), ()).answerable()
    assert run_options(Options(), ()).key("/r", "demo") != run_options(Options(), ("linux/arm64",)).key("/r", "demo")


def test_one_long_layer_name_does_not_pad_every_row_of_plan():
    """vllm-pypi's groups of wheels have names of ~370 characters: each has a line of its own, and
    the other rows keep a column of at most 72."""
    out = run_in_process(["plan", "vllm-pypi", "--platform", "linux/amd64"], ROOT).stdout
    rows = [line for line in out.splitlines() if re.match(r"\s+\d+\. ", line)]
    assert any(len(row) > 200 for row in rows), "the catalogue's long names are still there"
    short = [row for row in rows if len(row.split(". ", 1)[1].split("  ")[0]) <= 72]
    assert short and all(len(row) < 160 for row in short), max(short, key=len)
