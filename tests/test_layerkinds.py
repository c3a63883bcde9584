"""A layer kind is one module: a `LayerPayload` subclass that says how its bytes are written and
how it behaves. A toy kind added that way (here, in the test) is planned, shown, fetched for and
written by the same code as the real kinds, none of which knows its class."""
from __future__ import annotations

import dataclasses
import hashlib
import tarfile

import pytest

from enginebuild.core import keys
from enginebuild.errors import BuildFailed
from enginebuild.execution.chains import stands_alone
from enginebuild.execution.fetch import layer_downloads
from enginebuild.execution.layers import LayerMaker
from enginebuild.io.store import Store
from enginebuild.io.tars import TarWriter
from enginebuild.layerkinds import KINDS
from enginebuild.layerkinds.base import Download, LayerPayload, WriteJob
from enginebuild.plan.model import LayerNode
from enginebuild.plan.stored import layer_blobs
from enginebuild.plan.views import runtime_dockerfile
from test_plan import plan_of


@dataclasses.dataclass(frozen=True)
class Links(LayerPayload):
    """Toy kind: symbolic links, and one downloaded file copied under /opt/toy."""

    links: tuple[tuple[str, str], ...]
    blob: str = ""

    def key(self, epoch: int) -> str:
        return keys.key_of("links", links=[list(link) for link in self.links], blob=self.blob, epoch=epoch)

    def write(self, job: WriteJob, writer: TarWriter) -> None:
        for name, target in self.links:
            writer.add_symlink(name, target)
        if self.blob:
            writer.add_file("opt/toy/data.bin", job.store.verified(self.blob, "toy data"), 0o644)

    def downloads(self) -> list[Download]:
        return [Download(self.blob, ("https://example.invalid/data.bin",), "toy data")] if self.blob else []

    def describe(self, name: str, folder: str) -> str:
        return f"# toy: {len(self.links)} link(s) ({name})"


def with_toy_layer(plan, payload: Links):
    """What the kind's one line in plan/ does: a node keyed by the payload's own recipe, on the chain."""
    runtime = plan.runtime
    key = payload.key(plan.epoch)
    node = LayerNode("links", "toy links", key, keys.chain(runtime.tip, key), payload, {"blob": payload.blob})
    return dataclasses.replace(plan, runtime=dataclasses.replace(runtime, layers=(*runtime.layers, node))), node


def test_a_toy_layer_kind_is_planned_shown_fetched_for_and_written_by_the_common_code(workspace, tmp_path):
    store = Store(tmp_path / "home")
    data = b"toy bytes\n"
    sha = hashlib.sha256(data).hexdigest()
    plan, node = with_toy_layer(plan_of(workspace), Links((("usr/bin/toy", "/opt/toy/data.bin"),), sha))

    assert "# toy: 1 link(s) (toy links)" in runtime_dockerfile(plan)  # render asks the payload
    assert layer_downloads(node) == [Download(sha, ("https://example.invalid/data.bin",), "toy data")]
    assert node.key != with_toy_layer(plan_of(workspace), Links((("usr/bin/toy", "/opt/other"),), sha))[1].key
    assert stands_alone(node)  # written from its own inputs: no chain loaded, written beside the others

    store.put_bytes(data)  # what the fetcher leaves: the download, by sha256
    maker = LayerMaker(store, engine=None, assembler=None, mtime=plan.epoch, image=plan.image, outputs={})
    first = maker.make(node)
    assert layer_blobs(store, node) == first  # recorded under the node's key, as every kind's
    with tarfile.open(store.path(first[0][0])) as tar:
        members = {m.name: m for m in tar.getmembers()}
        assert tar.extractfile("opt/toy/data.bin").read() == data
    assert members["usr/bin/toy"].issym() and members["usr/bin/toy"].linkname == "/opt/toy/data.bin"
    assert {m.mtime for m in members.values()} == {plan.epoch}  # the common writer's determinism
    assert LayerMaker(store, None, None, plan.epoch, plan.image, {}).make(node) == first


def test_a_kind_that_writes_nothing_on_the_host_says_so_by_name(workspace, tmp_path):
    class Elsewhere(LayerPayload):
        pass

    plan = plan_of(workspace)
    node = LayerNode("toy", "made elsewhere", "k" * 64, "c" * 64, Elsewhere())
    maker = LayerMaker(Store(tmp_path / "home"), None, None, plan.epoch, plan.image, {})
    with pytest.raises(BuildFailed, match="layer made elsewhere: Elsewhere layers are not written on the host"):
        maker.make(node)
    assert layer_blobs(maker.store, node) is None  # nothing recorded for it


def test_every_kind_of_the_catalogue_is_listed_and_answers_for_itself():
    """KINDS lists the real kinds; each either writes on the host or says what BuildKit runs."""
    assert len(KINDS) == len(set(KINDS)) == 10
    for kind in KINDS:
        writes = kind.write is not LayerPayload.write or kind.write_layers is not LayerPayload.write_layers
        assert writes != kind.by_command, kind.__name__
        assert (kind.commands is not LayerPayload.commands) == kind.by_command, kind.__name__
        assert kind.key is LayerPayload.key, f"{kind.__name__} keys itself by hand, not from its fields"


def test_an_image_deeper_than_docker_holds_is_refused_before_anything_is_loaded(tmp_path):
    """Docker's layer store loads an image of 125 layers and refuses one of 126 ("max depth
    exceeded", measured on this machine's engine): the assembler refuses the 126th before it
    sends a byte, naming the depth and what makes it."""
    from enginebuild.execution.assemble import MAX_DEPTH, Assembler
    from enginebuild.io.store import Store
    from enginebuild.layerkinds.data import Data
    from enginebuild.oci.engine import Engine
    from enginebuild.plan.model import EnvNode, LayerNode
    from enginebuild.plan.stored import put_layer_blobs

    store = Store(tmp_path / "home")

    def env(depth: int) -> EnvNode:
        nodes = []
        for i in range(depth):
            key = keys.sha(f"layer {i}".encode())
            node = LayerNode("files", f"files {i}", key, key, Data(f"f{i}", b"x"))
            put_layer_blobs(store, node, [(keys.sha(f"blob {i}".encode()), 1)], {})
            nodes.append(node)
        return EnvNode("runtime", "linux/amd64", None, tuple(nodes), "0" * 64)

    assembler = Assembler(Engine("unix:///nonexistent.sock"), store)  # a scratch base: never asked
    assert MAX_DEPTH == 125 and len(assembler.layers(env(125))) == 125
    with pytest.raises(BuildFailed) as refused:
        assembler.layers(env(126))
    assert "the runtime image would be 126 layers deep (its base's 0, enginebuild's 126): Docker's layer store " \
           "refuses an image deeper than 125" in refused.value.message
