// Writes authority/openapi.json and gateway/openapi.json from their sources (authority/openapi.ts,
// gateway/openapi.ts, compiled to build/). Run after changing a route; a test fails while the
// committed files differ from what this writes. Usage: node scripts/gen-openapi.mjs [--check]
import { fileURLToPath } from 'node:url';
import { checkOnly, writeGenerated } from './lib/generated-file.mjs';

const root = fileURLToPath(new URL('..', import.meta.url));
const docs = {
  'authority/openapi.json': (await import(`${root}build/authority/openapi.js`)).AUTHORITY_OPENAPI,
  'gateway/openapi.json': (await import(`${root}build/gateway/openapi.js`)).GATEWAY_OPENAPI,
};
let stale = 0;
for (const [file, doc] of Object.entries(docs)) {
  if (!writeGenerated(root + file, `${JSON.stringify(doc, null, 2)}\n`)) continue;
  if (checkOnly) stale++;
  else console.log(`wrote ${file}`);
}
process.exit(stale ? 1 : 0);
