"""A registry with the OCI 1.1 referrers API: the real distribution registry (2.8, which has none)
behind a real HTTP server that answers `GET /v2/NAME/referrers/DIGEST` from the manifests with a
`subject` that were pushed through it, as a 1.1 registry does. Everything else is forwarded."""
from __future__ import annotations

import io
import json
import re

from helpers.faultproxy import FaultProxy

INDEX = "application/vnd.oci.image.index.v1+json"
REFERRERS = re.compile(r"/v2/(.+)/referrers/(sha256:[0-9a-f]{64})(\?.*)?")
MANIFEST_PUT = re.compile(r"/v2/(.+)/manifests/([^/?]+)")


class ReferrersRegistry(FaultProxy):
    def __init__(self, upstream: str):
        super().__init__(upstream)
        self.referrers: dict[tuple[str, str], list[dict]] = {}

    def handle(self, h):
        asked = REFERRERS.fullmatch(h.path)
        if asked and h.command == "GET":
            manifests = self.referrers.get((asked.group(1), asked.group(2)), [])
            body = json.dumps({"schemaVersion": 2, "mediaType": INDEX, "manifests": manifests}).encode()
            self.log.append(("GET", h.path, 200))
            return self._send(h, 200, {"Content-Type": INDEX}, body)
        put = MANIFEST_PUT.fullmatch(h.path) if h.command == "PUT" else None
        if put is None:
            return super().handle(h)
        body = self._body(h)
        h.rfile = io.BytesIO(body)
        if "Transfer-Encoding" in h.headers:
            del h.headers["Transfer-Encoding"]
        del h.headers["Content-Length"]
        h.headers["Content-Length"] = str(len(body))
        super().handle(h)
        if self.log[-1][2] != 201:
            return
        try:
            doc = json.loads(body)
        except ValueError:
            return
        subject = doc.get("subject") if isinstance(doc, dict) else None
        if isinstance(subject, dict) and isinstance(subject.get("digest"), str):
            import hashlib

            entry = {"mediaType": doc.get("mediaType"), "digest": "sha256:" + hashlib.sha256(body).hexdigest(),
                     "size": len(body), "artifactType": doc.get("artifactType") or doc["config"]["mediaType"]}
            if doc.get("annotations"):
                entry["annotations"] = doc["annotations"]
            listed = self.referrers.setdefault((put.group(1), subject["digest"]), [])
            if entry not in listed:
                listed.append(entry)
