"""A registry cache written by another (hostile) writer can make a build slower, never wrong and
never harmful to the host: entries no trusted key signed are not taken, a trusted entry whose
record is not of its kind's shape is refused, and either way the build makes what they
described, touching no file outside the store. docs/cache.md is the trust model these check."""
from __future__ import annotations

import json
import uuid

import pytest

from conftest import run_cli
from helpers.cacheentry import get_entry, new_key, public_text, put_entry
from helpers.docker import docker
from helpers.specs import BUSYBOX_BUILDER, write_image

pytestmark = [pytest.mark.docker, pytest.mark.registry, pytest.mark.network]

AMD64 = ["--platform", "linux/amd64"]


def spec(marker: str) -> str:
    """busybox in the runtime and the builder, a component `e` and a command layer reading it."""
    return BUSYBOX_BUILDER + f"""system:
  install: extract
  packages: [busybox-static]
  run: [["/bin/busybox", "--install", "-s", "/bin"]]
components:
  e:
    source: {{path: src}}
    build: {{script: build.sh, args: {{MARKER: "{marker}"}}}}
    outputs: {{paths: [/opt/e]}}
install: [e]
steps:
  - name: stamp
    run: cat /opt/e/out > /opt/stamp
"""


@pytest.fixture(scope="module")
def built(tmp_path_factory, registry, docker_engine, debian_reachable):
    """An image with a component and a command layer, built once by a trusted writer (the suite's
    signing key) with the cache; the cache's tags for them."""
    ws = tmp_path_factory.mktemp("trust") / "repo"
    (ws / "lockfiles").mkdir(parents=True)
    marker = uuid.uuid4().hex[:12]
    write_image(ws, "t", spec(marker), {"src/a": marker, "build.sh": "#!/bin/sh\nset -e\nmkdir -p /opt/e\n"
                                                                      f"echo honest-{marker} > /opt/e/out\n"})
    assert run_cli(["lock", "t"], ws).returncode == 0
    cache = f"{registry.host}/enginebuild-test/trust-{marker}"
    home = tmp_path_factory.mktemp("writer-home")
    proc = run_cli(["image", "t", *AMD64, "--cache", cache], ws, env={"ENGINEBUILD_HOME": str(home)})
    assert proc.returncode == 0, proc.stderr
    assert "component e: outputs pushed to" in proc.stderr
    plan = json.loads(run_cli(["plan", "t", "--json", *AMD64], ws).stdout)["images"][0]
    component = next(c["key"] for c in plan["components"] if c["name"] == "e")
    layer = next(row["key"] for row in plan["layers"] if row["by"] == "buildkit" and "stamp" in row["name"])
    return {"ws": ws, "cache": cache, "repo": cache.split("/", 1)[1], "marker": marker, "component": component,
            "layer": layer}


def forge(built, registry, tmp_path, key, break_signature=False) -> None:
    """Replace the component's and the command layer's entries with records that name a file of
    the host by a relative path (what deleted host files before), carrying the honest blobs."""
    repo = built["repo"]
    victim_name = "../../victim/v1"  # from a store at tmp_path/home: tmp_path/victim/v1
    doc, config = get_entry(registry.host, repo, built["component"])
    blobs = [(la["digest"], la["size"], la["mediaType"]) for la in doc["layers"]]
    record = {**config["record"], "sha256": victim_name}
    put_entry(registry.host, repo, built["component"], "component-output", record, blobs, key=key,
              break_signature=break_signature)
    doc, config = get_entry(registry.host, repo, built["layer"])
    blobs = [(la["digest"], la["size"], la["mediaType"]) for la in doc["layers"]]
    record = {"layers": [[victim_name, blobs[0][1]]], "name": config["record"]["name"]}
    put_entry(registry.host, repo, built["layer"], "layer", record, blobs, key=key, break_signature=break_signature)


def fresh_build(built, tmp_path, extra_env=None):
    victim = tmp_path / "victim" / "v1"
    victim.parent.mkdir(exist_ok=True)
    victim.write_text("a file of the host")
    env = {"ENGINEBUILD_HOME": str(tmp_path / "home"), **(extra_env or {})}
    proc = run_cli(["image", "t", *AMD64, "--cache", built["cache"], "--cache-readonly"], built["ws"], env=env)
    assert proc.returncode == 0, proc.stderr
    assert victim.read_text() == "a file of the host"  # never hashed, found "damaged" and deleted
    out = docker("run", "--rm", "--entrypoint", "/bin/cat", "enginebuild/t:latest", "/opt/stamp").stdout
    assert out.strip() == f"honest-{built['marker']}"  # the image is the one its inputs make
    return proc


@pytest.mark.parametrize("who", ["unsigned", "another key", "a signature that does not hold"])
def test_entries_no_trusted_key_signed_are_not_taken_and_the_build_makes_them(built, registry, tmp_path, who):
    key = None if who == "unsigned" else new_key(tmp_path / "hostile.pem")
    forge(built, registry, tmp_path, key, break_signature=who.startswith("a signature"))
    proc = fresh_build(built, tmp_path)
    said = {"unsigned": "entries unsigned or not signed as enginebuild signs are not used",
            "another key": "a key not trusted here are not used",
            "a signature that does not hold": "does not hold are not used"}[who]
    assert said in proc.stderr, proc.stderr
    assert "pulled from" not in proc.stderr
    assert "built 1 component(s) (e)" in proc.stdout and "Traceback" not in proc.stderr


def test_a_trusted_entry_whose_record_names_a_path_is_refused_and_made_here(built, registry, tmp_path,
                                                                           cache_signing_key):
    forge(built, registry, tmp_path, cache_signing_key)  # a writer holding the key, or a broken one
    proc = fresh_build(built, tmp_path)
    assert f"{built['cache']}:{built['component'][:12]} refused (sha256: not a sha256)" in proc.stderr, proc.stderr
    assert f"{built['cache']}:{built['layer'][:12]} refused (layers[0]: not a sha256)" in proc.stderr
    assert "built 1 component(s) (e)" in proc.stdout


def test_a_store_signs_with_its_own_key_and_another_takes_its_entries_once_it_trusts_that_key(
        built, registry, tmp_path, monkeypatch):
    """Without ENGINEBUILD_CACHE_KEY a store makes its own key at its first push; a machine that
    does not list it builds, one that lists it (ENGINEBUILD_CACHE_TRUST) takes the entries."""
    monkeypatch.delenv("ENGINEBUILD_CACHE_KEY")
    cache = f"{built['cache']}-own"
    proc = run_cli(["image", "t", *AMD64, "--cache", cache], built["ws"], env={"ENGINEBUILD_HOME": str(tmp_path / "a")})
    assert proc.returncode == 0, proc.stderr
    own = tmp_path / "a" / "keys" / "cache-signing.pem"
    assert own.is_file() and (own.stat().st_mode & 0o077) == 0
    assert f"note: this store's cache signing key was made ({own})" in proc.stderr
    assert "PRIVATE KEY" not in proc.stderr + proc.stdout
    elsewhere = run_cli(["image", "t", *AMD64, "--cache", cache, "--cache-readonly"], built["ws"],
                        env={"ENGINEBUILD_HOME": str(tmp_path / "b")})
    assert elsewhere.returncode == 0, elsewhere.stderr
    # the writer's key is named by its fingerprint, and the log never advises trusting a key the writer chose
    assert "a key not trusted here are not used" in elsewhere.stderr and public_text(own) not in elsewhere.stderr
    assert "`doctor` prints it on the machine that wrote them" in elsewhere.stderr
    assert "pulled from" not in elsewhere.stderr
    trusting = run_cli(["image", "t", *AMD64, "--cache", cache, "--cache-readonly"], built["ws"],
                       env={"ENGINEBUILD_HOME": str(tmp_path / "c"), "ENGINEBUILD_CACHE_TRUST": public_text(own)})
    assert trusting.returncode == 0, trusting.stderr
    assert "component e: outputs pulled from" in trusting.stderr and "built" not in trusting.stdout.split("(")[0]


def test_a_hostile_description_and_verdict_are_not_stood_in_for_a_layer(built, registry, tmp_path):
    """`--no-load` takes the cache's descriptions of layers instead of their bytes; forged ones
    (another blob for a layer, a size of 99,999,999, a verdict that was never reached, a line
    meant for the CI log) are not taken, and the image pushed is whole: a fresh pull runs it."""
    repo_to = f"{registry.host}/enginebuild-test/trust-pushed-{built['marker']}"
    first = run_cli(["image", "t", *AMD64, "--no-load", "--cache", built["cache"], "--push", "--to", repo_to,
                     "--push-tag", "honest"], built["ws"], env={"ENGINEBUILD_HOME": str(tmp_path / "w")})
    assert first.returncode == 0, first.stderr
    import requests

    tags = requests.get(f"http://{registry.host}/v2/{built['repo']}/tags/list", timeout=30).json()["tags"]
    subs = [t for t in tags if t.endswith("-sub") and not t.startswith(built["component"])]
    verdicts = [t for t in tags if t.endswith("-ok")]
    assert subs and verdicts, tags
    hostile = new_key(tmp_path / "hostile.pem")
    _, other = get_entry(registry.host, built["repo"], subs[0])
    for tag in subs:
        doc, config = get_entry(registry.host, built["repo"], tag)
        record = dict(config["record"])
        form = next(iter(record["forms"]))
        record["forms"] = {form: [[other["record"]["forms"][form][0][0], 99_999_999] for _ in record["layers"]]}
        put_entry(registry.host, built["repo"], tag, "layer-substitute", record,
                  [(la["digest"], la["size"], la["mediaType"]) for la in doc["layers"]], key=hostile)
    for tag in verdicts:
        doc, _ = get_entry(registry.host, built["repo"], tag)
        put_entry(registry.host, built["repo"], tag, "image-verdict",
                  {"lines": {"runtime": "ok\n::warning::forged \x1b[2J"}},
                  [(la["digest"], la["size"], la["mediaType"]) for la in doc["layers"]], key=hostile)
    repo_two = f"{registry.host}/enginebuild-test/trust-second-{built['marker']}"
    second = run_cli(["image", "t", *AMD64, "--no-load", "--cache", built["cache"], "--cache-readonly", "--push",
                      "--to", repo_two, "--push-tag", "second"], built["ws"], env={"ENGINEBUILD_HOME": str(tmp_path / "r")})
    assert second.returncode == 0, second.stderr
    assert "a key not trusted here are not used" in second.stderr
    assert "stood in by" not in second.stderr and "::warning::forged" not in second.stdout + second.stderr
    assert "\x1b[2J" not in second.stdout + second.stderr
    docker("pull", f"{repo_two}:second")
    try:
        out = docker("run", "--rm", "--entrypoint", "/bin/cat", f"{repo_two}:second", "/opt/stamp").stdout
        assert out.strip() == f"honest-{built['marker']}"
    finally:
        docker("image", "rm", f"{repo_two}:second", check=False)


def test_a_trusted_description_of_a_bomb_is_unpacked_no_further_than_its_layer(built, registry, tmp_path,
                                                                             cache_signing_key):
    """A description names a compressed blob for a layer; where the layer's bytes must be read (no
    verdict for the checks) the blob is unpacked no further than the layer's size: a gzip of 256
    MiB of zeros named for a layer of a few KB stops there (before: 2.1 GiB of memory, a tmpfs
    filled)."""
    import gzip

    import requests

    from helpers.cacheentry import put_blob

    target = f"{registry.host}/enginebuild-test/trust-bomb-{built['marker']}"
    honest = run_cli(["image", "t", *AMD64, "--no-load", "--cache", built["cache"], "--push", "--to", target],
                     built["ws"], env={"ENGINEBUILD_HOME": str(tmp_path / "w")})
    assert honest.returncode == 0, honest.stderr
    bomb = gzip.compress(b"\0" * (256 << 20), compresslevel=6, mtime=0)
    bomb_digest = put_blob(registry.host, target.split("/", 1)[1], bomb)
    step = f"{built['layer']}-sub"
    doc, config = get_entry(registry.host, built["repo"], step)
    record = dict(config["record"])
    record["forms"] = {form: [[bomb_digest[7:], len(bomb)]] for form in record["forms"]}
    record["homes"] = {bomb_digest[7:]: [target]}
    put_entry(registry.host, built["repo"], step, "layer-substitute", record,
              [(la["digest"], la["size"], la["mediaType"]) for la in doc["layers"]], key=cache_signing_key)
    tags = requests.get(f"http://{registry.host}/v2/{built['repo']}/tags/list", timeout=30).json()["tags"]
    for tag in (t for t in tags if t.endswith("-ok")):  # no verdict: the layers' bytes must be read here
        doc, _ = get_entry(registry.host, built["repo"], tag)
        put_entry(registry.host, built["repo"], tag, "image-verdict", {"lines": {}},
                  [(la["digest"], la["size"], la["mediaType"]) for la in doc["layers"]], key=None)
    proc = run_cli(["image", "t", *AMD64, "--no-load", "--cache", built["cache"], "--cache-readonly", "--push", "--to",
                    f"{target}-again"], built["ws"], env={"ENGINEBUILD_HOME": str(tmp_path / "r")})
    assert proc.returncode == 1, proc.stderr
    assert "stood in by" in proc.stderr
    assert f"blob {bomb_digest[:19]} unpacks to more than the " in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr
    left = [p for p in (tmp_path / "r").rglob("*") if p.is_file() and (p.stat().st_size > 16 << 20
                                                                        or p.name.startswith(".ingest"))]
    assert left == [], left  # nothing of the bomb kept (the largest layer here is busybox's, ~2 MB)


def test_entries_nested_5000_deep_by_a_writer_with_no_key_only_make_the_build_slower(built, registry, tmp_path):
    """10 KB of brackets in place of a manifest stopped every build that read it (RecursionError):
    such an entry is refused as unreadable, and the build makes what it names."""
    import requests

    accept = {"Accept": "application/vnd.oci.image.manifest.v1+json"}
    kind = {"Content-Type": "application/vnd.oci.image.manifest.v1+json"}
    base = f"http://{registry.host}/v2/{built['repo']}/manifests"
    honest = {tag: requests.get(f"{base}/{tag}", headers=accept, timeout=30).content
              for tag in (built["component"], built["layer"])}
    try:
        for tag, body in honest.items():
            deep = body.rstrip()[:-1] + b',"z":' + b"[" * 5000 + b"]" * 5000 + b"}"
            requests.put(f"{base}/{tag}", data=deep, headers=kind, timeout=30).raise_for_status()
        proc = fresh_build(built, tmp_path)
        assert "refused (its manifest is not a JSON object that can be read)" in proc.stderr, proc.stderr
        assert "component e: outputs pulled from" not in proc.stderr and "step stamp: pulled from" not in proc.stderr
    finally:
        for tag, body in honest.items():
            requests.put(f"{base}/{tag}", data=body, headers=kind, timeout=30).raise_for_status()


def test_a_pusher_whose_key_is_not_trusted_leaves_the_trusted_descriptions_as_they_are(built, registry, tmp_path,
                                                                                       cache_signing_key):
    """A fork's job (its own key, trusting the project's) pushes after the project's: the layers'
    descriptions stay signed by the project's key, so later trusted runners still take them."""
    import requests

    cache = f"{built['cache']}-fork"  # a cache of its own: what other tests forged is not in it
    repo = cache.split("/", 1)[1]

    def signers() -> dict[str, str]:
        tags = requests.get(f"http://{registry.host}/v2/{repo}/tags/list", timeout=30).json()["tags"]
        return {t: get_entry(registry.host, repo, t)[0].get("annotations", {}).get(
            "org.enginebuild.cache.signer") for t in tags if t.endswith("-sub") and not t.startswith(built["component"])}

    repo_to = f"{registry.host}/enginebuild-test/trust-fork-{built['marker']}"
    trusted = run_cli(["image", "t", *AMD64, "--no-load", "--cache", cache, "--push", "--to", repo_to,
                       "--push-tag", "main"], built["ws"], env={"ENGINEBUILD_HOME": str(tmp_path / "main")})
    assert trusted.returncode == 0, trusted.stderr
    before = signers()
    assert before and set(before.values()) == {public_text(cache_signing_key)}, before
    fork = new_key(tmp_path / "fork.pem")
    forked = run_cli(["image", "t", *AMD64, "--no-load", "--cache", cache, "--push", "--to", repo_to,
                      "--push-tag", "fork"], built["ws"],
                     env={"ENGINEBUILD_HOME": str(tmp_path / "fork"), "ENGINEBUILD_CACHE_KEY": str(fork),
                          "ENGINEBUILD_CACHE_TRUST": public_text(cache_signing_key)})
    assert forked.returncode == 0, forked.stderr
    assert signers() == before
