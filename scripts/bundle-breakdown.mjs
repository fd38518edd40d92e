// Which modules weigh what in a minified bundle: node scripts/bundle-breakdown.mjs src/edge.ts
import { build } from 'esbuild';
const entry = process.argv[2];
const r = await build({
  entryPoints: [entry],
  bundle: true,
  minify: true,
  format: 'esm',
  write: false,
  metafile: true,
  platform: 'neutral',
  mainFields: ['module', 'main'],
});
const outs = Object.values(r.metafile.outputs)[0];
const rows = Object.entries(outs.inputs)
  .map(([k, v]) => [v.bytesInOutput, k])
  .sort((a, b) => b[0] - a[0]);
for (const [b, k] of rows.slice(0, 25)) console.log(String(b).padStart(7), k);
console.log('total', r.outputFiles[0].contents.length);
