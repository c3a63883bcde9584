"""One store of the checks' verdicts: what a check of a built image found, kept under a key of
what it read and what it was asked, so the same check of the same image is answered from here
rather than run again. Every check that keeps a verdict goes through `Verdicts`: the byte-reading
checks (kernels, runtime closure: keyed by the layers they read, checks/afterbuild.py), the import
check and the patches' behaviour checks (keyed by the image ID and the checks' definitions). Only
a passing verdict is kept: a failure is always found again. One record kind for all of them; a
record names the check it belongs to, and a record of another check under the same key is not
taken."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from enginebuild.io.store import Store
from enginebuild.wire import JsonDoc

RECORD = "check-verdict"  # the store's record kind of every check's verdict
CheckKind = Literal["bytes", "imports", "behaviour"]


@dataclass(frozen=True)
class Kept:
    """A verdict kept: what the check found (as it records it), how long it took when it ran,
    and the image it ran in (None for the byte checks: they read layers, not an image)."""

    found: JsonDoc
    seconds: float
    image: str | None


class Verdicts:
    """The verdicts kept in a store."""

    def __init__(self, store: Store):
        self.store = store

    def kept(self, of: CheckKind, key: str) -> Kept | None:
        record = self.store.record(RECORD, key)
        if record is None or record.get("of") != of or not isinstance(record.get("found"), dict):
            return None
        image = record.get("image")
        return Kept(dict(record["found"]), float(record.get("seconds") or 0.0), str(image) if image else None)

    def keep(self, of: CheckKind, key: str, found: JsonDoc, seconds: float = 0.0, image: str | None = None) -> None:
        self.store.put_record(RECORD, key, {"of": of, "found": found, "seconds": round(seconds, 2),
                                            **({"image": image} if image else {})})
