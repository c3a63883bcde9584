"""The plan is pure: keys move only at and after the stage whose inputs changed."""
import json

from conftest import run_cli

from enginebuild.catalog import Catalog
from enginebuild.lockfile import read_lock
from enginebuild.stages import plan_image


def plan_of(workspace, name="demo", **kw):
    return plan_image(Catalog(workspace).load(name), read_lock(workspace, name), **kw)


def keys(plan) -> dict:
    return {s.name: s.key for s in plan.stages}


def test_demo_stages_run_from_least_to_most_often_changed(workspace):
    assert [s.name for s in plan_of(workspace).stages] == [
        "system", "engine-source", "patches", "engine-build", "files"]


def test_planning_twice_gives_identical_keys_and_dockerfiles(workspace):
    first, second = plan_of(workspace), plan_of(workspace)
    assert keys(first) == keys(second)
    assert [s.dockerfile for s in first.stages] == [s.dockerfile for s in second.stages]


def test_editing_a_launch_script_changes_only_the_last_stage(workspace):
    before = keys(plan_of(workspace))
    with open(workspace / "images/demo/launch_server.sh", "a") as handle:
        handle.write("# tuned\n")
    after = keys(plan_of(workspace))
    assert [name for name in before if before[name] != after[name]] == ["files"]


def test_editing_a_patch_changes_the_patch_stage_and_everything_after_it(workspace):
    before = keys(plan_of(workspace))
    patch = workspace / "patches/demo-engine/0001-aux-layer-ids-off-by-one.patch"
    patch.write_text(patch.read_text().replace("Subject:", "Subject: (edited)"))
    after = keys(plan_of(workspace))
    assert [name for name in before if before[name] != after[name]] == ["patches", "engine-build", "files"]


def test_a_build_argument_changes_the_build_stage_and_after(workspace):
    before = keys(plan_of(workspace))
    after = keys(plan_of(workspace, build_args={"DEMO_ENGINE_UNITS": "3"}))
    assert [name for name in before if before[name] != after[name]] == ["engine-build", "files"]


def test_each_stage_context_holds_only_its_own_files(workspace):
    contexts = {s.name: sorted(i.arcname for i in s.context) for s in plan_of(workspace).stages}
    assert contexts["engine-source"] == ["source/demo-engine.tar"]
    assert contexts["engine-build"] == ["build.sh"]
    assert contexts["patches"] == ["patches/apply_patches.sh",
                                   "patches/demo-engine__0001-aux-layer-ids-off-by-one.patch"]
    assert "files/01/opt/enginebuild/bin/launch_server.sh" in contexts["files"]
    assert not any(a.startswith("files/") for a in contexts["system"])


def test_each_stage_is_built_from_its_parents_key(workspace):
    plan = plan_of(workspace)
    for parent, child in zip(plan.stages, plan.stages[1:]):
        assert child.dockerfile.splitlines()[1] == f"FROM enginebuild/stage:{parent.key}"
    assert plan.stages[0].dockerfile.splitlines()[1] == "FROM scratch"


def test_render_prints_every_stage_with_scripts_last(workspace):
    proc = run_cli(["render", "demo"], workspace)
    assert proc.returncode == 0, proc.stderr
    headers = [line for line in proc.stdout.splitlines() if line.startswith("### stage")]
    assert headers[-1].startswith("### stage 5/5: files")
    assert proc.stdout.count("\nFROM ") == 5


def test_the_final_stage_carries_oci_labels_and_the_patch_list(workspace):
    plan = plan_of(workspace)
    final = plan.final.dockerfile
    assert '"org.opencontainers.image.created"="' + read_lock(workspace, "demo").created + '"' in final
    assert '"org.opencontainers.image.title"="demo"' in final
    assert "demo-engine/0001-aux-layer-ids-off-by-one.patch@sha256:" in final
    manifest = next(i for i in plan.final.context if i.arcname == "files/00/opt/enginebuild/manifest.json")
    doc = json.loads(manifest.data)
    assert doc["patches"][0]["name"] == "demo-engine/0001-aux-layer-ids-off-by-one.patch"
    assert doc["inputs"]["system"]["packages"][0]["sha256"]
