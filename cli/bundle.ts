/**
 * `ctl bundle verify` checks a Trust Bundle against the pinned root (PROTOCOL.md §4);
 * `ctl bundle refresh` is the job a device runs (spec §8: "devices must reject expired bundles
 * and should begin refreshing before expiry"): it starts in the last quarter of the bundle's
 * life (or `--refresh-before` ms before expiry), fetches the scope's bundles from the authority,
 * and replaces the stored bundle only with one that verifies against the root and is not older
 * than the persisted floor; on any failure the old bundle stays.
 */
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { canonicalize, parseStrictJson, parseTimestamp, verifyTrustBundle } from '../src/index.js';
import type { TrustBundle } from '../src/index.js';
import { readBundle } from './device/artifact-files.js';
import { clock, guard, one, parseArgs, readText, required, UsageError, writeAtomic } from './device/args.js';
import { readChainFile } from './device/root-rotate.js';
import { followRootChain } from './device/root-follow.js';

const USAGE =
  'usage: ctl bundle verify FILE --root PEM [--chain FILE] [--min-root-version N] [--min-sequence N] [--now ISO]\n' +
  `       ctl bundle refresh --authority URL [--category C] [--region R] [--merchant M] --root PEM --store DIR
                          [--chain FILE] [--refresh-before MS] [--force] [--now ISO]

  verify   FILE is JSON or compact CBOR; exit 0 if the bundle verifies against the root key, 1 if not
           (the reason is printed)
  refresh  keep DIR/bundle.json current: exit 0 when it is (fresh or just replaced), 1 when the
           refresh failed but the old bundle is still valid, 3 when there is no valid bundle.
           One bundle per DIR: a stored bundle of another scope (category/region/merchant) is
           neither fresh nor a rollback floor for this one, and is replaced; the anti-rollback
           floors are kept per scope in DIR/floor.json. Use one DIR per scope to hold several.
  --chain  the root chain (PROTOCOL.md §11, as \`ctl root rotate\` writes it): the bundle must be signed
           by a bundle key of the newest root version it reaches from --root. With refresh, FILE is
           the device's stored chain: the authority's GET /trust-root is walked from --root first and
           replaces FILE only when it verifies and reaches a higher version (never a lower one).`;

export interface RefreshOptions {
  authority: string;
  scope: { category?: string; region?: string; merchant?: string };
  rootPublicKeyPem: string;
  storeDir: string;
  now?: () => number;
  /** Start refreshing this long before expiry (default: the last quarter of the bundle's life). */
  refreshBeforeMs?: number;
  force?: boolean;
  fetch?: typeof fetch;
  /** The device's stored root chain file (PROTOCOL.md §11); absent: the pinned root signs bundles. */
  chainFile?: string;
}

export interface RefreshResult {
  action: 'fresh' | 'updated' | 'failed';
  /** The bundle in force after the run (undefined: none valid). */
  bundle?: TrustBundle;
  reason?: string;
  /** When the next refresh should start. */
  refreshAt?: string;
  /** With a chain file: the root version in force after the run, and whether this run raised it. */
  rootVersion?: number;
  rootUpdated?: boolean;
}

const bundlePath = (dir: string) => join(dir, 'bundle.json');
const floorPath = (dir: string) => join(dir, 'floor.json');

function refreshAt(b: TrustBundle, before?: number): number {
  const issued = parseTimestamp(b.issuedAt, 'issuedAt');
  const expires = parseTimestamp(b.expiresAt, 'expiresAt');
  return before !== undefined ? expires - before : issued + Math.floor(((expires - issued) * 3) / 4);
}

/**
 * One run of the refresh job. Never throws for network or authority failures: they are a
 * `failed` result with the old bundle kept.
 * @example const r = await refreshTrustBundle({ authority, scope: { region: 'eu' }, rootPublicKeyPem, storeDir:
 * '/var/lib/ctl' })
 */
export async function refreshTrustBundle(o: RefreshOptions): Promise<RefreshResult> {
  const now = o.now ?? Date.now;
  const scopeKey = canonicalize(o.scope);
  mkdirSync(o.storeDir, { recursive: true });
  const floors: Record<string, number> = existsSync(floorPath(o.storeDir))
    ? JSON.parse(readFileSync(floorPath(o.storeDir), 'utf8'))
    : {};
  const floor = floors[scopeKey] ?? 0;
  // The root chain first: bundles are checked against the newest root version this device accepted.
  let root: { rootChain?: unknown[]; minRootVersion?: number } = {};
  let rootInfo: Pick<RefreshResult, 'rootVersion' | 'rootUpdated'> = {};
  let rootProblem: string | undefined;
  if (o.chainFile) {
    const f = await followRootChain({
      authority: o.authority,
      rootPublicKeyPem: o.rootPublicKeyPem,
      chainFile: o.chainFile,
      fetch: o.fetch,
    });
    root = { rootChain: f.statements, minRootVersion: f.rootVersion };
    rootInfo = { rootVersion: f.rootVersion, rootUpdated: f.updated };
    rootProblem = f.problem;
  }
  let current: TrustBundle | undefined;
  let storedSequence = 0;
  if (existsSync(bundlePath(o.storeDir))) {
    // DIR holds one bundle. Only a stored bundle of exactly the requested scope is current, or
    // a floor: another scope's sequence says nothing about this scope's (floors are per scope).
    const text = readFileSync(bundlePath(o.storeDir), 'utf8');
    const sameScope = (b: TrustBundle) => canonicalize(b.scope) === scopeKey;
    const r = await verifyTrustBundle(text, o.rootPublicKeyPem, { now, minSequence: floor, ...root });
    if (r.valid && sameScope(r.bundle)) current = r.bundle;
    // Even expired, a root-signed stored bundle of this scope is a floor: nothing older may replace it.
    const signed = await verifyTrustBundle(text, o.rootPublicKeyPem, {
      now: () => Date.parse((JSON.parse(text) as TrustBundle).issuedAt),
      ...root,
    }).catch(() => undefined);
    if (signed?.valid && sameScope(signed.bundle)) storedSequence = signed.bundle.sequence;
  }
  const iso = (t: number) => new Date(t).toISOString();
  // Never a time already past: a bundle fetched inside its refresh window is due again now.
  const next = (b: TrustBundle) => iso(Math.max(now(), refreshAt(b, o.refreshBeforeMs)));
  if (current && !o.force && now() < refreshAt(current, o.refreshBeforeMs)) {
    return { action: 'fresh', bundle: current, refreshAt: next(current), ...rootInfo };
  }
  const failed = (reason: string): RefreshResult => ({
    action: 'failed',
    bundle: current,
    reason: rootProblem ? `${reason}; root chain: ${rootProblem}` : reason,
    ...(current ? { refreshAt: iso(now()) } : {}),
    ...rootInfo,
  });
  const url = new URL('/trust-bundles', o.authority);
  for (const [k, v] of Object.entries(o.scope)) if (v !== undefined) url.searchParams.set(k, v);
  let body: unknown;
  try {
    const res = await (o.fetch ?? fetch)(url, {
      headers: { accept: 'application/json' },
      signal: AbortSignal.timeout(10_000),
      redirect: 'error',
    });
    if (!res.ok) return failed(`${url} answered ${res.status}`);
    body = parseStrictJson(await res.text());
  } catch (e) {
    return failed(`${url}: ${(e as Error).message}`);
  }
  const list = (body as { bundles?: unknown })?.bundles;
  if (!Array.isArray(list)) return failed(`${url} did not answer { bundles: [...] }`);
  // The newest bundle of exactly this scope that verifies and is not below the floor.
  let best: TrustBundle | undefined;
  const reasons: string[] = [];
  for (const candidate of list) {
    const r = await verifyTrustBundle(candidate, o.rootPublicKeyPem, {
      now,
      minSequence: Math.max(floor, storedSequence),
      ...root,
    });
    if (!r.valid) {
      reasons.push(`${(candidate as { bundleId?: string })?.bundleId ?? '?'}: ${r.error.code}`);
      continue;
    }
    if (canonicalize(r.bundle.scope) !== scopeKey) continue;
    if (!best || r.bundle.sequence > best.sequence) best = r.bundle;
  }
  if (!best)
    return failed(
      list.length
        ? `no acceptable bundle (${reasons.join(', ') || 'none for this scope'})`
        : 'the authority has no bundle for this scope',
    );
  if (current && best.sequence === current.sequence && canonicalize(best) === canonicalize(current)) {
    return { action: 'fresh', bundle: current, refreshAt: next(current), ...rootInfo };
  }
  // Bundle, then floor: a crash in between leaves the new bundle with the old floor, and the
  // effective floor is max(floor, stored bundle's sequence) anyway, so nothing older gets in.
  writeAtomic(bundlePath(o.storeDir), JSON.stringify(best, null, 2) + '\n');
  writeAtomic(floorPath(o.storeDir), JSON.stringify({ ...floors, [scopeKey]: best.sequence }) + '\n');
  return { action: 'updated', bundle: best, refreshAt: next(best), ...rootInfo };
}

async function verifyCommand(args: string[]): Promise<number> {
  const p = parseArgs(args, { values: ['root', 'chain', 'min-root-version', 'min-sequence', 'now'] });
  if (p.positionals.length !== 1) throw new UsageError('bundle verify takes one FILE');
  const file = p.positionals[0]!;
  const root = readText(required(p, 'root'), 'root key');
  const min = one(p, 'min-sequence');
  if (min !== undefined && !/^\d+$/.test(min)) throw new UsageError('--min-sequence must be an integer');
  const chainFile = one(p, 'chain');
  const minRoot = one(p, 'min-root-version');
  if (minRoot !== undefined && !/^[1-9][0-9]{0,9}$/.test(minRoot))
    throw new UsageError('--min-root-version must be a positive integer');
  const r = await verifyTrustBundle(readBundle(file), root, {
    now: clock(p),
    minSequence: min === undefined ? undefined : Number(min),
    ...(chainFile !== undefined ? { rootChain: readChainFile(chainFile).statements } : {}),
    ...(minRoot !== undefined ? { minRootVersion: Number(minRoot) } : {}),
  });
  if (!r.valid) {
    console.log(`✗ ${file}: ${r.error.code}: ${r.error.message}`);
    return 1;
  }
  const b = r.bundle;
  console.log(
    r.rootVersion > 1
      ? `✓ ${file}: bundle ${b.bundleId} sequence ${b.sequence}, signed by bundle key ${b.keyId} ` +
          `of root version ${r.rootVersion} (${b.issuer})`
      : `✓ ${file}: bundle ${b.bundleId} sequence ${b.sequence}, signed by root ${b.keyId} (${b.issuer})`,
  );
  console.log(`  scope ${canonicalize(b.scope)}; valid ${b.issuedAt} → ${b.expiresAt}`);
  for (const i of b.issuers)
    console.log(`  trusts ${i.issuer}: ${i.keys.map((k) => `${k.kid} [${k.purposes.join(',')}]`).join(', ')}`);
  console.log(`  revoked grants: ${b.revokedGrants.length}`);
  return 0;
}

async function refreshCommand(args: string[]): Promise<number> {
  const p = parseArgs(args, {
    values: ['authority', 'category', 'region', 'merchant', 'root', 'store', 'chain', 'refresh-before', 'now'],
    flags: ['force'],
  });
  if (p.positionals.length) throw new UsageError('bundle refresh takes no positional argument');
  const before = one(p, 'refresh-before');
  if (before !== undefined && !/^\d+$/.test(before)) throw new UsageError('--refresh-before must be milliseconds');
  const scope: RefreshOptions['scope'] = {};
  for (const k of ['category', 'region', 'merchant'] as const) if (one(p, k) !== undefined) scope[k] = one(p, k);
  const r = await refreshTrustBundle({
    authority: required(p, 'authority'),
    scope,
    rootPublicKeyPem: readText(required(p, 'root'), 'root key'),
    storeDir: required(p, 'store'),
    chainFile: one(p, 'chain'),
    now: clock(p),
    refreshBeforeMs: before === undefined ? undefined : Number(before),
    force: p.flags.has('force'),
  });
  const b = r.bundle;
  const held =
    (b ? `bundle ${b.bundleId} sequence ${b.sequence}, expires ${b.expiresAt}` : 'no valid bundle') +
    (r.rootVersion !== undefined ? `; root version ${r.rootVersion}${r.rootUpdated ? ' (just accepted)' : ''}` : '');
  if (r.action === 'fresh') console.log(`✓ fresh: ${held}; next refresh from ${r.refreshAt}`);
  else if (r.action === 'updated') console.log(`✓ updated: ${held}; next refresh from ${r.refreshAt}`);
  else console.log(`✗ refresh failed: ${r.reason}; kept ${held}`);
  return r.action === 'failed' ? (b ? 1 : 3) : 0;
}

export async function main(args: string[]): Promise<number> {
  return guard(USAGE, async () => {
    const [sub, ...rest] = args;
    if (!sub) return (console.error(USAGE), 2);
    if (sub === '--help' || sub === '-h' || rest.includes('--help') || rest.includes('-h'))
      return (console.log(USAGE), 0);
    if (sub === 'verify') return verifyCommand(rest);
    if (sub === 'refresh') return refreshCommand(rest);
    throw new UsageError(`unknown subcommand ${sub}`);
  });
}
