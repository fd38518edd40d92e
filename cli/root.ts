/**
 * `ctl root init`: the fleet's Trust Bundle root key (spec §5: "installed at manufacture … or
 * provisioned by the fleet operator"). The public half is exported as PEM for the production
 * line; the private half signs bundles (the authority reads it as
 * CTL_TRUST_BUNDLE_ROOT_PRIVATE_KEY_PEM) and is never overwritten by accident: a device pinned to
 * a lost root can only be re-provisioned by hand.
 */
import { existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { generateKeyPair, jwkThumbprint, formatTimestamp } from '../src/index.js';
import { guard, one, parseArgs, writeAtomic } from './device/args.js';

const USAGE = `usage: ctl root init --out DIR [--alg EdDSA|ES256] [--force]
       ctl root show --out DIR

  init   create DIR/root.key.pem (mode 0600), DIR/root.pub.pem (for manufacture) and DIR/root.json
  show   print the public PEM and the key id of an existing root
  --force  replace an existing root key (every device pinned to the old one must be re-provisioned)`;

export async function main(args: string[]): Promise<number> {
  return guard(USAGE, async () => {
    const [sub, ...rest] = args;
    if (!sub || sub === '--help' || sub === '-h') return console.log(USAGE), sub ? 0 : 2;
    const p = parseArgs(rest, { values: ['out', 'alg'], flags: ['force'] });
    const dir = one(p, 'out');
    if (!dir || p.positionals.length) return console.error(USAGE), 2;
    const files = { key: join(dir, 'root.key.pem'), pub: join(dir, 'root.pub.pem'), meta: join(dir, 'root.json') };
    if (sub === 'show') {
      if (!existsSync(files.meta)) return console.error(`ctl root: no root in ${dir} (run ctl root init --out ${dir})`), 1;
      const { readFileSync } = await import('node:fs');
      console.log(readFileSync(files.pub, 'utf8').trim());
      console.log(readFileSync(files.meta, 'utf8').trim());
      return 0;
    }
    if (sub !== 'init') return console.error(USAGE), 2;
    const alg = one(p, 'alg') ?? 'EdDSA';
    if (alg !== 'EdDSA' && alg !== 'ES256') return console.error(`--alg must be EdDSA or ES256`), 2;
    if (existsSync(files.key) && !p.flags.has('force')) {
      console.error(`ctl root: ${files.key} exists; a fleet root is replaced only with --force (devices pinned to it must be re-provisioned)`);
      return 1;
    }
    mkdirSync(dir, { recursive: true });
    const pair = await generateKeyPair({ alg });
    const kid = await jwkThumbprint(pair.publicJwk);
    writeAtomic(files.key, pair.privateKeyPem, 0o600);
    writeAtomic(files.pub, pair.publicKeyPem);
    writeAtomic(files.meta, JSON.stringify({ kid, alg, publicJwk: pair.publicJwk, createdAt: formatTimestamp(Date.now()) }, null, 2) + '\n');
    console.log(`root key ${kid} (${alg})`);
    console.log(`  private: ${files.key} (0600; the authority's CTL_TRUST_BUNDLE_ROOT_PRIVATE_KEY_PEM)`);
    console.log(`  public:  ${files.pub} (install on devices at manufacture)`);
    return 0;
  });
}
