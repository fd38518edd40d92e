/**
 * `ctl root init`: the fleet's Trust Bundle root key (spec §5: "installed at manufacture … or
 * provisioned by the fleet operator"). The public half is exported as PEM for the production
 * line; the private half signs bundles (the authority reads it as
 * CTL_TRUST_BUNDLE_ROOT_PRIVATE_KEY_PEM) and is never overwritten by accident: a device pinned to
 * a lost root can only be re-provisioned by hand.
 *
 * With `--pkcs11 <uri>` (manufacturing) the key is generated inside the token (RFC 7512 URI,
 * module from --module or CTL_PKCS11_MODULE): sensitive and non-extractable, so the private half
 * never leaves it; only the public half is written, and root.json records the URI without its PIN.
 */
import { existsSync, mkdirSync } from 'node:fs';
import { createPublicKey } from 'node:crypto';
import { join } from 'node:path';
import { generateKeyPair, jwkThumbprint, formatTimestamp } from '../src/index.js';
import { guard, one, parseArgs, UsageError, writeAtomic } from './device/args.js';
import { rotateCommand, ROTATE_HELP, ROTATE_LINE } from './device/root-rotate.js';
import {
  DEFAULT_PKCS11_MODULE,
  closePkcs11Modules,
  generatePkcs11Key,
  parsePkcs11Uri,
} from '../service-kit/signers/index.js';

const USAGE = `usage: ctl root init --out DIR [--alg EdDSA|ES256] [--force]
       ctl root init --pkcs11 URI [--module PATH] [--out DIR]
       ctl root show --out DIR
${ROTATE_LINE}

  init   create DIR/root.key.pem (mode 0600), DIR/root.pub.pem (for manufacture) and DIR/root.json
  show   print the public PEM and the key id of an existing root
  --force  replace an existing root key (every device pinned to the old one must be re-provisioned)
  --pkcs11 generate the root inside a PKCS#11 token (RFC 7512 URI: token=, object=<new label>, pin-source= or
           pin-value=); Ed25519 (or --alg ES256), never extractable. The public PEM goes to DIR/root.pub.pem
           (stdout without --out); the authority then signs with CTL_TRUST_BUNDLE_ROOT_KEY_PKCS11_URI=<the same URI>
  --module the PKCS#11 library (default CTL_PKCS11_MODULE, else ${DEFAULT_PKCS11_MODULE})
${ROTATE_HELP}`;

/** The URI as root.json keeps it: no pin-value (a PIN is never written to disk by us). */
function withoutPin(uri: string): string {
  return uri.replace(/([?&])pin-value=[^&]*&?/i, '$1').replace(/[?&]$/, '');
}

async function initInToken(
  uri: string,
  modulePath: string,
  dir: string | undefined,
  alg: 'EdDSA' | 'ES256',
): Promise<number> {
  try {
    parsePkcs11Uri(uri);
  } catch (e) {
    throw new UsageError(`--pkcs11: ${(e as Error).message}`);
  }
  const files = dir ? { pub: join(dir, 'root.pub.pem'), meta: join(dir, 'root.json') } : undefined;
  if (files && existsSync(files.meta)) {
    console.error(
      `ctl root: ${files.meta} exists; a fleet root is never replaced in place (devices ` +
        'pinned to it must be re-provisioned)',
    );
    return 1;
  }
  let signer;
  try {
    signer = await generatePkcs11Key(uri, { modulePath, alg });
  } catch (e) {
    console.error(`ctl root: ${(e as Error).message}`);
    return 1;
  }
  try {
    const kid = await jwkThumbprint(signer.publicJwk);
    const pem = createPublicKey({ key: { ...signer.publicJwk }, format: 'jwk' })
      .export({ type: 'spki', format: 'pem' })
      .toString();
    if (!files) {
      process.stdout.write(pem);
      console.error(
        `root key ${kid} (${signer.alg}) generated in ${signer.description}; its private half never leaves the token`,
      );
      return 0;
    }
    mkdirSync(dir!, { recursive: true });
    writeAtomic(files.pub, pem);
    writeAtomic(
      files.meta,
      JSON.stringify(
        {
          kid,
          alg: signer.alg,
          publicJwk: signer.publicJwk,
          pkcs11: withoutPin(uri),
          createdAt: formatTimestamp(Date.now()),
        },
        null,
        2,
      ) + '\n',
    );
    console.log(`root key ${kid} (${signer.alg})`);
    console.log(
      `  private: in the token, ${signer.description} (never leaves it; the authority's ` +
        'CTL_TRUST_BUNDLE_ROOT_KEY_PKCS11_URI)',
    );
    console.log(`  public:  ${files.pub} (install on devices at manufacture)`);
    return 0;
  } finally {
    await signer.close();
    closePkcs11Modules();
  }
}

export async function main(args: string[]): Promise<number> {
  return guard(USAGE, async () => {
    const [sub, ...rest] = args;
    if (!sub) return (console.error(USAGE), 2);
    if (sub === '--help' || sub === '-h') return (console.log(USAGE), 0);
    if (sub === 'rotate') return rotateCommand(rest);
    if (rest.includes('--help') || rest.includes('-h')) return (console.log(USAGE), 0);
    if (sub !== 'init' && sub !== 'show') throw new UsageError(`unknown subcommand ${sub}`);
    const p = parseArgs(rest, { values: ['out', 'alg', 'pkcs11', 'module'], flags: ['force'] });
    const dir = one(p, 'out');
    const pkcs11 = one(p, 'pkcs11');
    if (pkcs11 !== undefined) {
      if (sub !== 'init' || p.positionals.length) return (console.error(USAGE), 2);
      const alg = one(p, 'alg') ?? 'EdDSA';
      if (alg !== 'EdDSA' && alg !== 'ES256') throw new UsageError('--alg must be EdDSA or ES256');
      if (p.flags.has('force'))
        throw new UsageError(
          '--force does not apply to --pkcs11: a key in a token is never overwritten (pick a new object= label)',
        );
      return initInToken(pkcs11, one(p, 'module') ?? process.env.CTL_PKCS11_MODULE ?? DEFAULT_PKCS11_MODULE, dir, alg);
    }
    if (one(p, 'module') !== undefined) throw new UsageError('--module goes with --pkcs11');
    if (!dir || p.positionals.length) return (console.error(USAGE), 2);
    const files = { key: join(dir, 'root.key.pem'), pub: join(dir, 'root.pub.pem'), meta: join(dir, 'root.json') };
    if (sub === 'show') {
      if (!existsSync(files.meta))
        return (console.error(`ctl root: no root in ${dir} (run ctl root init --out ${dir})`), 1);
      const { readFileSync } = await import('node:fs');
      console.log(readFileSync(files.pub, 'utf8').trim());
      console.log(readFileSync(files.meta, 'utf8').trim());
      return 0;
    }
    if (sub !== 'init') return (console.error(USAGE), 2);
    const alg = one(p, 'alg') ?? 'EdDSA';
    if (alg !== 'EdDSA' && alg !== 'ES256') return (console.error(`--alg must be EdDSA or ES256`), 2);
    if (existsSync(files.key) && !p.flags.has('force')) {
      console.error(
        `ctl root: ${files.key} exists; a fleet root is replaced only with --force (devices ` +
          'pinned to it must be re-provisioned)',
      );
      return 1;
    }
    mkdirSync(dir, { recursive: true });
    const pair = await generateKeyPair({ alg });
    const kid = await jwkThumbprint(pair.publicJwk);
    writeAtomic(files.key, pair.privateKeyPem, 0o600);
    writeAtomic(files.pub, pair.publicKeyPem);
    writeAtomic(
      files.meta,
      JSON.stringify({ kid, alg, publicJwk: pair.publicJwk, createdAt: formatTimestamp(Date.now()) }, null, 2) + '\n',
    );
    console.log(`root key ${kid} (${alg})`);
    console.log(`  private: ${files.key} (0600; the authority's CTL_TRUST_BUNDLE_ROOT_PRIVATE_KEY_PEM)`);
    console.log(`  public:  ${files.pub} (install on devices at manufacture)`);
    return 0;
  });
}
