/**
 * `ctl root rotate`: appends the next `ctl-root/1` statement to a chain file (PROTOCOL.md §11).
 * The statement is signed by every key directory given that holds a private key: the current
 * root set (`--from`, at least its threshold) and the new one (`--to`, at least the new
 * threshold, proving possession). A key may live in a PKCS#11 token (`--from-pkcs11 URI`, or a
 * `ctl root init --pkcs11` directory whose root.json records the URI): it signs there, the
 * private half never leaves it. Nothing is written unless the chain plus the new statement
 * verifies from the pinned version-1 root, exactly as a device will walk it.
 *
 * The chain file is `{ "pinnedRootPem": …, "statements": [ … ] }` (the `statements` are what
 * `POST /trust-root` publishes one by one and `GET /trust-root` serves); a plain array, or the
 * `GET /trust-root` answer, is read too.
 */
import { existsSync } from 'node:fs';
import { createPublicKey } from 'node:crypto';
import { join } from 'node:path';
import {
  createRootStatement,
  formatTimestamp,
  importSigningKey,
  parseStrictJson,
  toPublicJwk,
  verifyRootChain,
  type PublicJwk,
} from '../../src/index.js';
import { clock, one, parseArgs, readText, UsageError, writeAtomic, type Parsed } from './args.js';
import {
  closePkcs11Modules,
  DEFAULT_PKCS11_MODULE,
  openPkcs11Signer,
  parsePkcs11Uri,
  type Signer,
} from '../../service-kit/signers/index.js';
import { HttpError } from '../../service-kit/http-error.js';

export const ROTATE_LINE = `       ctl root rotate --chain FILE --from DIR… --to DIR… [--threshold K]
                       [--bundle-key DIR…] [--root PEM] [--now ISO] [--from-pkcs11 URI…] [--to-pkcs11 URI…]
                       [--bundle-key-pkcs11 URI…] [--pin-source FILE] [--module PATH]`;
export const ROTATE_HELP =
  '  rotate   append root version n+1 to FILE (created at the first rotation). Each DIR is a key\n' +
  `           directory of \`ctl root init\` (root.pub.pem, and root.key.pem where this machine holds
           the private half; or root.json's pkcs11 URI, from \`ctl root init --pkcs11\`, whose key
           signs inside the token). --from: the keys of version n (version 1: the pinned root), of which
           at least threshold(n) must sign; --to: the keys of version n+1, of which at least K sign.
           --threshold K: default a majority of the new keys. --bundle-key: the keys that sign Trust Bundles
           from version n+1 on (required at the first rotation; default: version n's bundle keys).
           --root: the pinned root's public PEM (default: FILE's pinnedRootPem, or at the first
           rotation the single --from key). Nothing is written unless the new chain verifies.
  --from-pkcs11, --to-pkcs11, --bundle-key-pkcs11 URI
           a key in a PKCS#11 token instead of a DIR (RFC 7512 URI; repeatable, mixable with the DIR
           forms): root keys sign inside the token, a bundle key gives its public half.
  --pin-source FILE  the token PIN for a URI (or a root.json) that has no pin-source= or pin-value=
  --module PATH      the PKCS#11 library (default CTL_PKCS11_MODULE, else ${DEFAULT_PKCS11_MODULE})`;

/** A root or bundle key given to the rotation: its public half, and a signer where this machine can sign with it. */
interface RotationKey {
  publicJwk: PublicJwk;
  publicPem: string;
  /** A PEM (a key file) or an open token key. */
  signer?: string | Signer;
}

/** A token key that cannot be opened: exit 1 with the reason, never a rotation without it. */
class TokenError extends Error {}

interface TokenOptions {
  modulePath: string;
  pinSource?: string;
  /** Every signer opened, closed when the command ends. */
  opened: Signer[];
}

/** The URI with `pin-source=<--pin-source>` added when it names no PIN itself. */
function withPinSource(uri: string, pinSource: string | undefined): string {
  if (pinSource === undefined || /[?&]pin-(source|value)=/i.test(uri)) return uri;
  return `${uri}${uri.includes('?') ? '&' : '?'}pin-source=${encodeURIComponent(pinSource)}`;
}

async function openTokenKey(flag: string, uri: string, o: TokenOptions): Promise<Signer> {
  try {
    parsePkcs11Uri(uri);
  } catch (e) {
    throw new UsageError(`${flag}: ${(e as Error).message}`);
  }
  try {
    const signer = await openPkcs11Signer(withPinSource(uri, o.pinSource), { modulePath: o.modulePath });
    o.opened.push(signer);
    return signer;
  } catch (e) {
    throw new TokenError(`${flag} ${parsePkcs11Uri(uri).redacted}: ${(e as Error).message}`);
  }
}

const spkiPem = (jwk: PublicJwk) =>
  createPublicKey({ key: { ...jwk }, format: 'jwk' })
    .export({ type: 'spki', format: 'pem' })
    .toString();

/**
 * A key directory of `ctl root init`: the public half always, the private half where this machine holds it (a file, or
 * the token root.json names).
 */
async function loadKeyDirs(flag: string, dirs: string[], o: TokenOptions, sign: boolean): Promise<RotationKey[]> {
  const out: RotationKey[] = [];
  for (const dir of dirs) {
    const pubFile = join(dir, 'root.pub.pem');
    if (!existsSync(pubFile)) throw new UsageError(`${dir}: no root.pub.pem (a key directory of ctl root init)`);
    const publicPem = readText(pubFile, 'public key');
    const publicJwk = await toPublicJwk(publicPem).catch(() => {
      throw new UsageError(`${pubFile} is not a public key`);
    });
    const keyFile = join(dir, 'root.key.pem');
    const metaFile = join(dir, 'root.json');
    let signer: RotationKey['signer'];
    if (existsSync(keyFile)) {
      const privatePem = readText(keyFile, 'private key');
      // A directory whose halves disagree would sign with one key and list another.
      const key = await importSigningKey(privatePem).catch(() => {
        throw new UsageError(`${keyFile} is not a private key`);
      });
      if (JSON.stringify(key.publicJwk) !== JSON.stringify(publicJwk))
        throw new UsageError(`${dir}: root.key.pem and root.pub.pem are not one key pair`);
      signer = privatePem;
    } else if (sign && existsSync(metaFile)) {
      let uri: unknown;
      try {
        uri = (parseStrictJson(readText(metaFile, 'root.json')) as { pkcs11?: unknown }).pkcs11;
      } catch (e) {
        throw new UsageError(`${metaFile}: ${(e as Error).message}`);
      }
      if (typeof uri === 'string') {
        const token = await openTokenKey(`${flag} ${dir}`, uri, o);
        if (JSON.stringify(token.publicJwk) !== JSON.stringify(publicJwk))
          throw new TokenError(`${dir}: the key in the token is not the one in root.pub.pem`);
        signer = token;
      }
    }
    out.push({ publicJwk, publicPem, signer });
  }
  return out;
}

async function loadTokenKeys(flag: string, uris: string[], o: TokenOptions): Promise<RotationKey[]> {
  const out: RotationKey[] = [];
  for (const uri of uris) {
    const signer = await openTokenKey(flag, uri, o);
    out.push({ publicJwk: signer.publicJwk, publicPem: spkiPem(signer.publicJwk), signer });
  }
  return out;
}

/** Reads a chain file in any of the forms the module comment names. @example readChainFile('chain.json').statements */
export function readChainFile(path: string): { pinnedRootPem?: string; statements: unknown[] } {
  if (!existsSync(path)) return { statements: [] };
  let v: unknown;
  try {
    v = parseStrictJson(readText(path, 'root chain'));
  } catch (e) {
    throw new UsageError(`${path}: not a root chain (${(e as Error).message})`);
  }
  if (Array.isArray(v)) return { statements: v };
  const o = v as { statements?: unknown; pinnedRootPem?: unknown };
  if (!Array.isArray(o?.statements)) throw new UsageError(`${path}: expected { "statements": [...] }`);
  return {
    statements: o.statements,
    ...(typeof o.pinnedRootPem === 'string' ? { pinnedRootPem: o.pinnedRootPem } : {}),
  };
}

/**
 * @example await rotateCommand(['--chain', 'chain.json', '--from', 'root-v1', '--to', 'root-a', '--bundle-key',
 * 'bundle-2'])
 */
export async function rotateCommand(args: string[]): Promise<number> {
  if (args.includes('--help') || args.includes('-h'))
    return (console.log(`usage:${ROTATE_LINE.slice('      '.length)}\n\n${ROTATE_HELP}`), 0);
  const p = parseArgs(args, {
    values: [
      'chain',
      'from',
      'to',
      'threshold',
      'bundle-key',
      'root',
      'now',
      'from-pkcs11',
      'to-pkcs11',
      'bundle-key-pkcs11',
      'pin-source',
      'module',
    ],
  });
  if (p.positionals.length) throw new UsageError('root rotate takes no positional argument');
  const chainFile = one(p, 'chain');
  if (!chainFile) throw new UsageError('--chain is required');
  const list = (name: string) => p.options.get(name) ?? [];
  if (list('from').length + list('from-pkcs11').length === 0 || list('to').length + list('to-pkcs11').length === 0) {
    throw new UsageError('--from and --to (or --from-pkcs11 and --to-pkcs11) name at least one key each');
  }
  const thresholdText = one(p, 'threshold');
  if (thresholdText !== undefined && !/^[1-9][0-9]{0,2}$/.test(thresholdText))
    throw new UsageError('--threshold must be a positive integer');
  const tokens: TokenOptions = {
    modulePath: one(p, 'module') ?? process.env.CTL_PKCS11_MODULE ?? DEFAULT_PKCS11_MODULE,
    pinSource: one(p, 'pin-source'),
    opened: [],
  };
  try {
    const from = [
      ...(await loadKeyDirs('--from', list('from'), tokens, true)),
      ...(await loadTokenKeys('--from-pkcs11', list('from-pkcs11'), tokens)),
    ];
    const to = [
      ...(await loadKeyDirs('--to', list('to'), tokens, true)),
      ...(await loadTokenKeys('--to-pkcs11', list('to-pkcs11'), tokens)),
    ];
    const bundleKeys = [
      ...(await loadKeyDirs('--bundle-key', list('bundle-key'), tokens, false)),
      ...(await loadTokenKeys('--bundle-key-pkcs11', list('bundle-key-pkcs11'), tokens)),
    ];
    return await rotate(p, chainFile, from, to, bundleKeys, thresholdText);
  } catch (e) {
    if (!(e instanceof TokenError)) throw e;
    console.error(`✗ ${e.message}`);
    return 1;
  } finally {
    for (const s of tokens.opened) await s.close();
    if (tokens.opened.length) closePkcs11Modules();
  }
}

async function rotate(
  p: Parsed,
  chainFile: string,
  from: RotationKey[],
  to: RotationKey[],
  bundleKeys: RotationKey[],
  thresholdText: string | undefined,
): Promise<number> {
  const threshold = thresholdText === undefined ? Math.floor(to.length / 2) + 1 : Number(thresholdText);
  if (threshold > to.length)
    throw new UsageError(`--threshold ${threshold} is more than the ${to.length} new root keys`);

  const chain = readChainFile(chainFile);
  const rootPath = one(p, 'root');
  const pinned = rootPath
    ? readText(rootPath, 'root key')
    : (chain.pinnedRootPem ?? (chain.statements.length === 0 && from.length === 1 ? from[0]!.publicPem : undefined));
  if (!pinned) throw new UsageError('--root PEM is required: the chain file does not name its pinned root');
  const current = await verifyRootChain(pinned, chain.statements);
  if (!current.valid) {
    console.error(
      `✗ ${chainFile} does not verify from the pinned root: ${current.error.code}: ${current.error.message}`,
    );
    return 1;
  }
  if (current.rootVersion === 1 && bundleKeys.length === 0) {
    throw new UsageError(
      '--bundle-key is required at the first rotation (the version-1 root must not keep signing bundles)',
    );
  }
  const statement = await createRootStatement(
    {
      rootVersion: current.rootVersion + 1,
      keys: to.map((k) => k.publicJwk),
      threshold,
      bundleKeys: bundleKeys.length ? bundleKeys.map((k) => k.publicJwk) : current.bundleKeys,
      issuedAt: formatTimestamp(clock(p)()),
    },
    // A key in both sets signs once and counts for both.
    { signers: dedupe([...from, ...to].filter((k) => k.signer)).map((k) => ({ key: k.signer! })) },
  ).catch((e) => {
    if (e instanceof HttpError) throw new TokenError(`a token did not sign: ${e.message}`);
    throw new UsageError(`cannot sign: ${(e as Error).message}`);
  });
  const statements = [...chain.statements, statement];
  const next = await verifyRootChain(pinned, statements, { minVersion: current.rootVersion + 1 });
  if (!next.valid) {
    console.error(`✗ root version ${current.rootVersion + 1} not written: ${next.error.code}: ${next.error.message}`);
    return 1;
  }
  writeAtomic(chainFile, JSON.stringify({ pinnedRootPem: pinned, statements }, null, 2) + '\n');
  console.log(`✓ root version ${next.rootVersion} appended to ${chainFile}`);
  console.log(
    `  root keys (${next.threshold} of ${next.rootKeys.length}): ${next.rootKeys.map((k) => k.kid).join(', ')}`,
  );
  console.log(`  bundle keys: ${next.bundleKeys.map((k) => k.kid).join(', ')}`);
  console.log(
    '  publish: POST /trust-root { "statement": <the last statement> } (admin), then start ' +
      'the authority with one bundle key',
  );
  return 0;
}

function dedupe(keys: RotationKey[]): RotationKey[] {
  const seen = new Set<string>();
  return keys.filter((k) => {
    const id = JSON.stringify(k.publicJwk);
    if (seen.has(id)) return false;
    seen.add(id);
    return true;
  });
}
