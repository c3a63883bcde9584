// Checks a Sigstore bundle with the JavaScript Sigstore libraries (@sigstore/bundle,
// @sigstore/verify), trusting one public key and no transparency log:
//   node verify-bundle.cjs NODE_MODULES BUNDLE.json PUBLIC.pem
// Prints one JSON line: {"ok": true, "statement": {...}} or {"ok": false, "error": "..."}.
"use strict";
const fs = require("fs");
const path = require("path");
const crypto = require("crypto");

const [modules, bundlePath, keyPath] = process.argv.slice(2);
const { bundleFromJSON } = require(path.join(modules, "@sigstore/bundle"));
const { toSignedEntity, toTrustMaterial, Verifier } = require(path.join(modules, "@sigstore/verify"));

try {
  const bundle = bundleFromJSON(JSON.parse(fs.readFileSync(bundlePath, "utf8")));
  const der = crypto.createPublicKey(fs.readFileSync(keyPath)).export({ type: "spki", format: "der" });
  const keyid = crypto.createHash("sha256").update(der).digest("hex");
  const root = { certificateAuthorities: [], timestampAuthorities: [], tlogs: [], ctlogs: [] };
  const trust = toTrustMaterial(root, { [keyid]: { rawBytes: der } });
  const verifier = new Verifier(trust, { tlogThreshold: 0, ctlogThreshold: 0, timestampThreshold: 0 });
  verifier.verify(toSignedEntity(bundle));
  const envelope = bundle.content.dsseEnvelope;
  const statement = JSON.parse(Buffer.from(envelope.payload).toString("utf8"));
  console.log(JSON.stringify({ ok: true, payloadType: envelope.payloadType, statement }));
} catch (error) {
  console.log(JSON.stringify({ ok: false, error: `${error.code || error.name}: ${error.message}` }));
}
