// A Fulcio and a Rekor for tests: @sigstore/mock's certificate authority (with its CT log) and
// transparency log, served over HTTP on 127.0.0.1 (POST /api/v2/signingCert, POST
// /api/v1/log/entries), and the trusted root that names their keys:
//   node sigstore-server.cjs NODE_MODULES TRUSTED_ROOT.json [LOG_CLOCK_OFFSET_SECONDS]
// Prints "listening PORT" once it serves. With an offset, the log stamps entries that far from
// now (a certificate is valid for ten minutes from its issue: an hour later is outside it).
"use strict";
const fs = require("fs");
const http = require("http");
const path = require("path");
const crypto = require("crypto");

const [modules, rootPath, offset] = process.argv.slice(2);
const mock = require(path.join(modules, "@sigstore/mock"));

function keyPair() {
  return crypto.generateKeyPairSync("ec", { namedCurve: "prime256v1" });
}

function der(publicKey) {
  return publicKey.export({ format: "der", type: "spki" });
}

async function main() {
  const caKeys = keyPair();
  const ctKeys = keyPair();
  const logKeys = keyPair();
  const logClock = new Date(Date.now() + 1000 * Number(offset || 0));
  const ctlog = await mock.initializeCTLog(ctKeys);
  const ca = await mock.initializeCA(caKeys, ctlog);
  const server = http.createServer();
  const handlers = {};
  server.listen(0, "127.0.0.1", async () => {
    const url = `http://127.0.0.1:${server.address().port}`;
    const tlog = await mock.initializeTLog(url, logKeys, Number(offset || 0) ? logClock : undefined);
    for (const handler of [mock.fulcioHandler(ca), mock.rekorHandler(tlog)]) {
      handlers[handler.path] = handler.fn;
    }
    const start = new Date(Date.now() - 3600 * 1000).toISOString();
    const key = (pair) => ({
      rawBytes: der(pair.publicKey).toString("base64"), keyDetails: "PKIX_ECDSA_P256_SHA_256", validFor: { start },
    });
    const logId = (pair) => ({ keyId: crypto.createHash("sha256").update(der(pair.publicKey)).digest("base64") });
    const root = {
      mediaType: "application/vnd.dev.sigstore.trustedroot+json;version=0.1",
      tlogs: [{ baseUrl: url, hashAlgorithm: "SHA2_256", publicKey: key(logKeys), logId: logId(logKeys) }],
      certificateAuthorities: [{
        subject: { organization: "sigstore.mock", commonName: "sigstore" }, uri: url,
        certChain: { certificates: [{ rawBytes: Buffer.from(ca.rootCertificate).toString("base64") }] },
        validFor: { start },
      }],
      ctlogs: [{ baseUrl: url, hashAlgorithm: "SHA2_256", publicKey: key(ctKeys), logId: logId(ctKeys) }],
      timestampAuthorities: [],
    };
    fs.writeFileSync(rootPath, JSON.stringify(root, null, 2));
    console.log(`listening ${server.address().port}`);
  });
  server.on("request", (request, response) => {
    const chunks = [];
    request.on("data", (chunk) => chunks.push(chunk));
    request.on("end", async () => {
      const handler = handlers[request.url];
      if (!handler || request.method !== "POST") {
        response.writeHead(404, { "Content-Type": "text/plain" });
        response.end("not found");
        return;
      }
      const result = await handler(Buffer.concat(chunks).toString("utf8"));
      response.writeHead(result.statusCode, { "Content-Type": result.contentType || "text/plain" });
      response.end(result.response);
    });
  });
}

main();
