"""The edit record: what a full build leaves for the file-edit path (fastedit.py) to remake an
image without planning — each runtime layer's key, chain and inputs, the files of each files
layer, the stored layers and the config. Kept as JSON in the plan memo (state/memo.py); read
back into these types, and any record that does not read back is no record (the full way runs).
Standard library only: this is on the fast path."""

from __future__ import annotations

from dataclasses import dataclass

from enginebuild.wire import JsonDoc


@dataclass(frozen=True)
class EditFile:
    """One file of a files layer, as the layer's key saw it."""

    dest: str
    mode: int
    given: bool  # the spec states the mode (else it follows the file's executable bit)
    display: str
    src: str | None  # None: a downloaded file, read from the store by `digest`
    digest: str


@dataclass(frozen=True)
class EditNode:
    """One runtime layer."""

    name: str
    key: str
    chain: str
    inputs: dict[str, str]
    blobs: int  # how many stored layers it is
    run: bool  # a command layer (anything above a changed layer of this kind needs the full way)
    files: tuple[EditFile, ...] | None = None  # for a files layer


@dataclass(frozen=True)
class StoredLayer:
    diff_id: str
    size: int
    created_by: str
    blob: str | None  # the sha256 of the store's copy (None: the base's, in the engine)


@dataclass(frozen=True)
class Listing:
    """A glob or folder copied, and the files it listed."""

    kind: str
    folder: str
    pattern: str
    srcs: tuple[str, ...]


@dataclass(frozen=True)
class EditRecord:
    platform: str
    tag: str
    chain_repo: str
    root: str  # the chain key below the first runtime layer
    epoch: int
    config: str  # the image config, canonical JSON
    layers: tuple[StoredLayer, ...]
    nodes: tuple[EditNode, ...]
    listings: tuple[Listing, ...]
    only_copied: tuple[str, ...]  # the inputs only `files:` reads: the only ones this way may see changed

    def blobs(self) -> list[str]:
        return [la.blob for la in self.layers if la.blob]

    # -- serialisers ------------------------------------------------------------------------
    def to_json(self) -> JsonDoc:
        return {"platform": self.platform, "tag": self.tag, "chain_repo": self.chain_repo, "root": self.root,
                "epoch": self.epoch, "config": self.config,
                "layers": [[la.diff_id, la.size, la.created_by, la.blob] for la in self.layers],
                "nodes": [_node_json(n) for n in self.nodes],
                "listings": [[li.kind, li.folder, li.pattern, list(li.srcs)] for li in self.listings],
                "only_copied": list(self.only_copied)}

    @classmethod
    def from_json(cls, data: JsonDoc) -> EditRecord:
        return cls(platform=str(data["platform"]), tag=str(data["tag"]), chain_repo=str(data["chain_repo"]),
                   root=str(data["root"]), epoch=int(data["epoch"]),
                   config=str(data["config"]),
                   layers=tuple(StoredLayer(str(d), int(s), str(c), str(b) if b else None)
                                for d, s, c, b in data["layers"]),
                   nodes=tuple(_node_from_json(n) for n in data["nodes"]),
                   listings=tuple(Listing(str(k), str(f), str(p), tuple(map(str, s))) for k, f, p, s in data["listings"]),
                   only_copied=tuple(map(str, data["only_copied"])))


def _node_json(node: EditNode) -> JsonDoc:
    out: JsonDoc = {"name": node.name, "key": node.key, "chain": node.chain, "inputs": node.inputs,
                           "blobs": node.blobs, "run": node.run}
    if node.files is not None:
        out["files"] = [{"dest": f.dest, "mode": f.mode, "given": f.given, "display": f.display, "src": f.src,
                         "digest": f.digest} for f in node.files]
    return out


def _node_from_json(data: JsonDoc) -> EditNode:
    files = None
    if data.get("files") is not None:
        files = tuple(EditFile(str(f["dest"]), int(f["mode"]), bool(f["given"]), str(f["display"]),
                               str(f["src"]) if f["src"] else None, str(f["digest"])) for f in data["files"])
    return EditNode(str(data["name"]), str(data["key"]), str(data["chain"]),
                    {str(k): str(v) for k, v in data["inputs"].items()}, int(data["blobs"]), bool(data["run"]), files)
