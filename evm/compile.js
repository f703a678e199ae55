// Compiles the contracts in evm/contracts with the pinned solc (solc-js,
// from the npm registry) and writes one JSON file: for each contract, its
// ABI and creation bytecode.
//
//   node evm/compile.js <node_modules> <contracts-dir> <out.json>
//
// The output depends on the sources and the pinned compiler only (sorted
// keys, no paths outside the folder, no time), so the same sources give
// the same bytes. A compiler error fails the run with solc's messages.
"use strict";
const fs = require("fs");
const path = require("path");

const [modules, dir, out] = process.argv.slice(2);
if (!modules || !dir || !out) {
  console.error("usage: node evm/compile.js <node_modules> <contracts-dir> <out.json>");
  process.exit(2);
}
const solc = require(path.join(path.resolve(modules), "solc"));

const sources = {};
for (const name of fs.readdirSync(dir).filter((n) => n.endsWith(".sol")).sort()) {
  sources[name] = { content: fs.readFileSync(path.join(dir, name), "utf8") };
}
const input = {
  language: "Solidity",
  sources,
  settings: {
    optimizer: { enabled: true, runs: 200 },
    evmVersion: "cancun",
    outputSelection: { "*": { "*": ["abi", "evm.bytecode.object"] } },
  },
};
const output = JSON.parse(solc.compile(JSON.stringify(input)));
const errors = (output.errors || []).filter((e) => e.severity === "error");
for (const e of output.errors || []) console.error(e.formattedMessage);
if (errors.length > 0) process.exit(1);

const contracts = {};
for (const file of Object.keys(output.contracts).sort()) {
  for (const name of Object.keys(output.contracts[file]).sort()) {
    const compiled = output.contracts[file][name];
    if (!compiled.evm.bytecode.object) continue; // interfaces and abstract contracts
    contracts[name] = { abi: compiled.abi, bytecode: "0x" + compiled.evm.bytecode.object };
  }
}
const text = JSON.stringify({ compiler: solc.version(), contracts }, null, 1) + "\n";
fs.mkdirSync(path.dirname(path.resolve(out)), { recursive: true });
fs.writeFileSync(out + ".tmp", text);
fs.renameSync(out + ".tmp", out);
