/**
 * The service bins (`ctl-authority`, `ctl-gateway`, `ctl-mcp`) run their packages' bundles
 * (scripts/bundle-packages.mjs). Tests that start a bin rebuild them only when a source is newer
 * than the bundle: after `npm run build` (CI) nothing is rewritten while other tests run a bin.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { root } from '../../firmware-bridge/node/device-script.js';

const BUNDLES: Record<string, string> = {
  authority: 'authority/dist/ctl-authority.mjs',
  gateway: 'gateway/dist/ctl-gateway.mjs',
  mcp: 'mcp/dist/ctl-mcp.mjs',
};
const SOURCES = ['src', 'service-kit', 'authority', 'gateway', 'mcp', 'cli'];

function newest(dir: string): number {
  let t = 0;
  if (!existsSync(dir)) return t;
  for (const name of readdirSync(dir)) {
    if (name === 'node_modules' || name === 'dist') continue;
    const path = join(dir, name);
    const st = statSync(path);
    t = Math.max(t, st.isDirectory() ? newest(path) : name.endsWith('.ts') ? st.mtimeMs : 0);
  }
  return t;
}

/** Rebuilds the named services' bundles that are missing or older than the sources; throws when the build fails. */
export function freshServiceBundles(services: string[]): void {
  const sources = Math.max(...SOURCES.map((d) => newest(join(root, d))));
  const stale = services.filter(
    (s) => !existsSync(join(root, BUNDLES[s]!)) || statSync(join(root, BUNDLES[s]!)).mtimeMs < sources,
  );
  if (!stale.length) return;
  const r = spawnSync(process.execPath, [join(root, 'scripts', 'bundle-packages.mjs'), ...stale], {
    cwd: root,
    encoding: 'utf8',
  });
  if (r.status !== 0) throw new Error(`bundle-packages ${stale.join(' ')}: ${r.stderr}`);
}
