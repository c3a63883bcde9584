"""The converted public recipes under examples/ render, and what they render is what their
specs say: each spec is read here on its own (plain YAML, `extends` and variants merged as
docs/spec.md describes) and every construct it uses is looked for in `render --unpinned`."""
from __future__ import annotations

import json
import re

import pytest
import yaml

from conftest import ROOT
from helpers.inprocess import run_in_process

EXAMPLES = ROOT / "examples"
NAMES = sorted(p.parent.name for p in (EXAMPLES / "images").glob("*/image.yaml"))


def merged(over: dict, under: dict) -> dict:
    out = dict(under)
    for key, value in over.items():
        out[key] = merged(value, out[key]) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def spec_of(name: str) -> dict:
    text = yaml.safe_load((EXAMPLES / "images" / name / "image.yaml").read_text())
    if "extends" in text:
        parent = spec_of(text["extends"])
        parent.pop("abstract", None)
        text = merged({k: v for k, v in text.items() if k != "extends"}, parent)
    return text


def buildable() -> list[str]:
    out = []
    for name in NAMES:
        spec = spec_of(name)
        if spec.get("abstract"):
            continue
        out.append(name)
        out += [f"{name}:{variant}" for variant in spec.get("variants", {})]
    return out


def sections(text: str) -> dict[str, str]:
    """`### ...` headed parts of render's output, and the NOT PINNED preamble as "pending"."""
    parts: dict[str, str] = {}
    head = "pending"
    for line in text.splitlines():
        if line.startswith("### "):
            head = re.sub(r" \(linux/[a-z0-9]+\).*", "", line[4:])
            continue
        parts[head] = parts.get(head, "") + line + "\n"
    return parts


def pending(parts: dict[str, str]) -> dict[str, str]:
    out = {}
    for line in parts.get("pending", "").splitlines():
        match = re.match(r"#   (\S+?)(?:@linux/\w+)?: (.*)", line)
        if match:
            out[match.group(1)] = match.group(2)
    return out


def dq(value: object) -> str:
    return '"' + str(value).replace("\\", "\\\\").replace('"', '\\"').replace("$", "\\$") + '"'


def check_environment(role: str, env: dict, todo: dict[str, str]) -> None:
    system, python = env.get("system") or {}, env.get("python") or {}
    if system.get("packages"):
        line = todo[f"{role}.system"]
        assert line.split(";")[0].split(",")[0] == "packages " + " ".join(sorted(system["packages"]))
        assert ("upgrading what the base has" in line) == bool(system.get("upgrade"))
        for archive in system.get("archives", []):
            assert archive["url"] in line and archive["suite"] in line
            if archive.get("fingerprint"):
                assert f"key {archive['fingerprint']}" in line
    for req in python.get("requirements", []):
        line = todo[f"{role}.python"]
        if isinstance(req, str):
            assert f" {req};" in line + ";" or f" {req} (" in line, (req, line)
            continue
        notes = [f"{k} {req[k]}" for k in ("index", "component") if k in req]
        if "git" in req:
            notes += [f"git_url {req['git']['url']}", f"git_ref {req['git']['ref']}"]
        notes += ["no deps"] if req.get("deps") is False else []
        notes += [f"its needs from {' '.join(req['requires-from'])}"] if req.get("requires-from") else []
        assert f"{req['requirement']} ({', '.join(notes)})" in line, (req, line)
    for constraint in python.get("constraints", []):
        assert constraint in todo[f"{role}.python"].split("; constraints ")[1]


def rendered(name: str) -> str:
    """One example rendered (each test its own: parallel workers share no module fixture)."""
    proc = run_in_process(["render", name, "--unpinned"], EXAMPLES)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_at_least_five_public_recipes_are_converted_and_each_has_a_readme_line():
    readme = (EXAMPLES / "README.md").read_text()
    recipes = set(re.findall(r"^- `([a-z0-9.-]+)`", readme, re.M))
    assert recipes == set(NAMES)
    assert len([n for n in NAMES if not spec_of(n).get("abstract")]) >= 5


@pytest.mark.parametrize("name", buildable())
def test_the_rendered_dockerfiles_say_what_the_spec_says(name):
    image, _, variant = name.partition(":")
    spec = spec_of(image)
    if variant:
        spec = merged(spec["variants"][variant], spec)
    parts = sections(rendered(name))
    todo = pending(parts)
    runtime = parts["runtime image"]

    # the runtime: its base, environments, installed components, files, steps and settings
    assert f"\nFROM {spec['base']}  # NOT PINNED\n" in runtime
    assert todo["runtime.base"] == spec["base"]
    check_environment("runtime", spec, todo)
    for req in (spec.get("python") or {}).get("requirements", []):
        if isinstance(req, dict) and "component" in req:
            assert f"# enginebuild: python {req['requirement']} (built by component {req['component']}) " \
                   "installed into" in runtime
    for comp_name in spec.get("install", []):
        outputs = spec["components"][comp_name]["outputs"]
        assert f"COPY --from=component:{comp_name} {outputs.get('prefix', '')} {outputs.get('to', '/')}" in runtime
    copied = re.findall(r"^COPY files/\d+-[0-9a-f]{12}/ /   # enginebuild: (.*)$", runtime, re.M)
    assert sorted(d for line in copied for d in line.split(", ")) == sorted(spec.get("files", {}))
    runs = [step_command(r) for r in re.findall(r"^RUN (.*?)(?:   # BuildKit, then normalised)?$", runtime, re.M)]
    shell = spec.get("shell")
    expected_runs = [c if isinstance(c, str) else json.dumps(c) for c in (spec.get("system") or {}).get("run", [])]
    for step in spec.get("steps", []):
        command = expected_step(step)
        several = command.startswith('["/bin/sh", "/opt/enginebuild/step-script.sh"]')
        expected_runs.append(json.dumps([*shell, command]) if shell and not several else
                             json.dumps([*shell[:-1], "/opt/enginebuild/step-script.sh"]) if shell else command)
    assert runs == expected_runs
    for step in spec.get("steps", []):
        for name in step.get("files", []) if isinstance(step, dict) else []:  # mounted, never copied
            assert f"target=/opt/enginebuild/step/{name}" in runtime
    env_line = next((line for line in runtime.splitlines() if line.startswith("ENV ")), "ENV")
    assert env_line == "ENV" + "".join(f" {k}={dq(v)}" for k, v in (spec.get("env") or {}).items())
    settings = [line for line in runtime.splitlines()
                if line.split(" ")[0] in ("EXPOSE", "WORKDIR", "SHELL", "HEALTHCHECK", "ENTRYPOINT", "CMD", "USER")]
    expected = [f"EXPOSE {p}" for p in spec.get("expose", [])]
    expected += [f"WORKDIR {spec['workdir']}"] if "workdir" in spec else []
    expected += [f"USER {spec['user']}"] if "user" in spec else []
    expected += [f"SHELL {json.dumps(shell)}"] if shell else []
    if "healthcheck" in spec:
        check = spec["healthcheck"]
        test = check["test"] if isinstance(check["test"], list) else ["/bin/sh", "-c", check["test"]]
        options = "".join(f" --{k}={check[k]}" for k in ("interval", "timeout", "start-period", "retries") if k in check)
        expected.append(f"HEALTHCHECK{options} CMD {json.dumps(test)}")
    expected += [f"ENTRYPOINT {json.dumps(spec['entrypoint'])}"] if "entrypoint" in spec else []
    expected += [f"CMD {json.dumps(spec['cmd'])}"] if "cmd" in spec else []
    assert settings == expected

    # each component the runtime takes (and what those need): its builder, source, arguments,
    # caches and steps; a component nothing installs or needs is not built, so not rendered
    used = used_components(spec)
    assert sorted(p.removeprefix("component ") for p in parts if p.startswith("component ")) == sorted(used)
    for comp_name in used:
        comp = spec["components"][comp_name]
        text = parts[f"component {comp_name}"]
        builder = builder_of(spec, comp)
        assert f"\nFROM {builder['base']}  # NOT PINNED\n" in text
        check_environment(role_of(todo, builder), builder, todo)
        git = comp["source"]["git"]
        source = todo[f"components.{comp_name}.source"]
        assert f"url {git['url']}, ref {git.get('ref') or git['commit']}" in source
        assert ("submodules" in source) == bool(git.get("submodules"))
        env = text.split("\nENV ", 1)[1].split("\n", 1)[0]
        for arg, value in comp["build"].get("args", {}).items():
            assert f" {arg}={dq(value)}" in f" {env}", (arg, env)
        if "version" in git:
            assert f'SETUPTOOLS_SCM_PRETEND_VERSION="{git["version"]}"' in env
        for folder in comp["build"].get("cache", []):
            assert f"--mount=type=cache,target={folder}" in text
        steps = re.findall(r"^RUN (?!--mount=type=bind,source=build.sh)(.*)$", text, re.M)
        # a component with caches also restores them before its build and writes them out after it
        carried = [s for s in steps if "/opt/enginebuild/compiler-cache-" in s]
        assert len(carried) == (2 if comp["build"].get("cache") else 0), carried
        assert all(folder in " ".join(carried) for folder in comp["build"].get("cache", []))
        steps = [s for s in steps if s not in carried]
        editable = [s for s in steps if "target=/opt/enginebuild/editable_wheel.py" in s]
        if "editable" in comp["outputs"]:  # built where the image keeps the tree, then its editable wheel
            tree = comp["outputs"]["editable"]
            assert re.search(rf"\nADD source.tar {re.escape(tree)}/\n(ADD sources/.*\n)*WORKDIR {re.escape(tree)}\n", text)
            assert len(editable) == 1 and steps[-1] == editable[0]
            assert f"COPY --from=component:{comp_name} {tree} /" in runtime
        assert editable == [] or "editable" in comp["outputs"]
        steps = [s for s in steps if s not in editable]
        assert [step_command(s) for s in steps] == [expected_step(s) for s in comp.get("steps", [])]


def used_components(spec: dict) -> list[str]:
    todo = list(spec.get("install", []))
    todo += [r["component"] for r in (spec.get("python") or {}).get("requirements", [])
             if isinstance(r, dict) and "component" in r]
    used: list[str] = []
    while todo:
        name = todo.pop()
        if name not in used:
            used.append(name)
            todo += spec["components"][name].get("needs", [])
    return used


def builder_of(spec: dict, comp: dict) -> dict:
    """A component's environment: written out, named (`runtime` or a key of `environments`),
    or the image's default."""
    builder = comp.get("builder") or spec.get("builder") or {"base": spec["base"]}
    if builder == "runtime":
        return spec
    return spec["environments"][builder] if isinstance(builder, str) else builder


def role_of(todo: dict[str, str], env: dict) -> str:
    """The lock input prefix holding this environment's system packages (an environment several
    components name is locked once, under the first of them)."""
    packages = "packages " + " ".join(sorted((env.get("system") or {}).get("packages", [])))
    roles = [k[:-len(".system")] for k, v in todo.items() if k.endswith(".system") and v.split(";")[0].split(",")[0]
             == packages]
    return roles[0] if roles else "builder"


def step_command(run: str) -> str:
    """A step's RUN line without its mounts (a script of several lines runs from a mounted file)."""
    return re.sub(r"^(--mount=\S+ )+", "", run)


def expected_step(step) -> str:
    run = step["run"] if isinstance(step, dict) else step
    if "\n" in run.strip():
        return json.dumps(["/bin/sh", "/opt/enginebuild/step-script.sh"])
    return run


def test_an_overlay_patch_of_a_converted_recipe_applies_to_the_release_it_names(tmp_path, pypi_reachable):
    """The SGLang recipe's `sed -i` on an installed file became a patch checked against SGLang's
    own sdist: `patches check` reads that release from PyPI and finds where it applies (the base
    itself, on Docker Hub, cannot be reached here; its lock entry says so)."""
    import shutil

    copy = tmp_path / "examples"
    shutil.copytree(EXAMPLES, copy)
    assert run_in_process(["lock", "btankut-sglang-glm47"], copy).returncode in (0, 1)  # 1: the base unreachable
    proc = run_in_process(["patches", "check", "btankut-sglang-glm47", "--json"], copy)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    doc = json.loads(proc.stdout)
    assert [(d["component"], d["patches"][0]["status"]) for d in doc] == [("sglang", "applies")]
