#!/usr/bin/env bash
# A fresh project with the JS package installed from its tarball, as a user would have it:
# `npm pack` in js/ (which builds js/dist first), then `npm install` of the tarball into
# DIR/project, a new npm project outside the repository (the package's tests and page then
# run from DIR/project/node_modules/tern-wasm, with nothing of the repository in reach).
# Also writes DIR/project/model.gguf (the tests' GGUF writer) and DIR/project/example.mjs
# (the node example of js/README.md, as it stands there). Extra arguments are npm packages
# to install beside it (test-browser.sh: playwright-core).
#
# Usage: scripts/wasm/js-project.sh DIR [PACKAGE...]   (prints nothing on success)
set -euo pipefail
cd "$(dirname "$0")/../.."
dir="$1"
shift
mkdir -p "$dir/project"
tarball="$(cd js && npm pack --silent --pack-destination "$dir" | tail -n 1)"
cd "$dir/project"
printf '{ "name": "tern-wasm-consumer", "private": true, "type": "module" }\n' >package.json
# The tarball has no dependencies: only the extra packages come from the registry (or npm's cache).
npm install --silent --no-audit --no-fund --prefer-offline "$dir/$tarball" "$@"
node --input-type=module -e "
import { writeFileSync, readFileSync } from 'node:fs';
import { load } from 'tern-wasm';
import { model } from './node_modules/tern-wasm/test/gguf.js';
writeFileSync('model.gguf', model(await load()));
const readme = readFileSync('node_modules/tern-wasm/README.md', 'utf8');
const example = readme.match(/\`\`\`js\n(\/\/ example\.mjs[^]*?)\`\`\`/);
if (!example) throw new Error('js/README.md has no \`\`\`js block starting with // example.mjs');
writeFileSync('example.mjs', example[1]);
"
