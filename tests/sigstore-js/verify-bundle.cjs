// Checks a Sigstore bundle with the JavaScript Sigstore libraries (@sigstore/bundle,
// @sigstore/verify):
//   node verify-bundle.cjs NODE_MODULES BUNDLE.json --key PUBLIC.pem
//       trusting one public key, no transparency log;
//   node verify-bundle.cjs NODE_MODULES BUNDLE.json --trusted-root ROOT.json --identity ID --issuer URL
//       a keyless signature: its certificate chained to the root's CA, its SCT and its log entry
//       checked with the root's keys, its identity and issuer held to ID and URL;
// with --artifact FILE for a bundle that signs a message rather than a DSSE envelope.
// Prints one JSON line: {"ok": true, ...} or {"ok": false, "error": "..."}.
"use strict";
const fs = require("fs");
const path = require("path");
const crypto = require("crypto");

const [modules, bundlePath, ...rest] = process.argv.slice(2);
const options = {};
for (let i = 0; i < rest.length; i += 2) options[rest[i].replace(/^--/, "")] = rest[i + 1];
const { bundleFromJSON } = require(path.join(modules, "@sigstore/bundle"));
const { toSignedEntity, toTrustMaterial, Verifier } = require(path.join(modules, "@sigstore/verify"));
const { TrustedRoot } = require(path.join(modules, "@sigstore/protobuf-specs"));

try {
  const bundle = bundleFromJSON(JSON.parse(fs.readFileSync(bundlePath, "utf8")));
  const artifact = options.artifact ? fs.readFileSync(options.artifact) : undefined;
  let verifier;
  let policy;
  if (options.key) {
    const der = crypto.createPublicKey(fs.readFileSync(options.key)).export({ type: "spki", format: "der" });
    const keyid = crypto.createHash("sha256").update(der).digest("hex");
    const root = { certificateAuthorities: [], timestampAuthorities: [], tlogs: [], ctlogs: [] };
    verifier = new Verifier(toTrustMaterial(root, { [keyid]: { rawBytes: der } }),
      { tlogThreshold: 0, ctlogThreshold: 0, timestampThreshold: 0 });
  } else {
    const root = TrustedRoot.fromJSON(JSON.parse(fs.readFileSync(options["trusted-root"], "utf8")));
    verifier = new Verifier(toTrustMaterial(root), { tlogThreshold: 1, ctlogThreshold: 1, timestampThreshold: 1 });
    policy = { subjectAlternativeName: options.identity, extensions: { issuer: options.issuer } };
  }
  const signer = verifier.verify(toSignedEntity(bundle, artifact), policy);
  const out = { ok: true, identity: signer.identity ? signer.identity.subjectAlternativeName : null };
  if (bundle.content.$case === "dsseEnvelope") {
    const envelope = bundle.content.dsseEnvelope;
    out.payloadType = envelope.payloadType;
    out.statement = JSON.parse(Buffer.from(envelope.payload).toString("utf8"));
  }
  console.log(JSON.stringify(out));
} catch (error) {
  console.log(JSON.stringify({ ok: false, error: `${error.code || error.name}: ${error.message}` }));
}
