/**
 * `ctl human`: the person's side of the Human-Agent profile (PROTOCOL.md §10).
 *   keygen   a did:key for the person (Ed25519 or P-256), the private key written 0600
 *   grant    sign a bounded budget for an agent's key: prepared by the authority, signed here
 *   revoke   revoke a grant with a ctl-revocation/1 signed by the same key (no API key)
 */
import { existsSync } from 'node:fs';
import {
  canonicalize,
  createSignedPolicyGrant,
  createSignedRevocation,
  didKeyFromJwk,
  didKeyToJwk,
  formatTimestamp,
  generateKeyPair,
  importSigningKey,
  parseGrant,
  policyHash,
  signPreparedGrant,
  toPublicJwk,
  type PolicyGrant,
  type PublicJwk,
} from '../src/index.js';
import {
  UsageError,
  clock,
  guard,
  one,
  parseArgs,
  readText,
  required,
  writeAtomic,
  type Parsed,
} from './device/args.js';
import { formatMinor } from '../service-kit/money.js';

const USAGE = `usage: ctl human keygen --out FILE [--alg EdDSA|ES256] [--force]
       ctl human grant --key FILE --agent KEY --amount MINOR --currency CODE --purpose P [--purpose P ...]
                       --expires 24h|ISO (--authority URL | --revocation-base URL) [--merchant ID ...] [--out FILE]
       ctl human revoke --key FILE (--grant FILE | --grant-id ID --authority URL) [--print]

  keygen   write the private key to FILE (PKCS#8 PEM, mode 0600) and print the person's DID
  grant    delegate a budget to an agent's public key (KEY: a PEM or JWK file, or the agent's did:key):
           with --authority, the authority prepares the grant (id, revocation URL), this key signs
           exactly that and the authority records it; with --revocation-base, the grant is signed
           here alone (someone must then serve its revocation URL). Prints the grant, or writes --out.
  revoke   sign a ctl-revocation/1 and POST it to the grant's authority (--print: only print it)
  --amount is in minor units of the currency (2000 EUR = 20.00 EUR); --merchant restricts the payees;
  --now ISO signs as of that time (reproducible runs)`;

async function readAgentKey(value: string): Promise<PublicJwk> {
  if (value.startsWith('did:key:')) return didKeyToJwk(value);
  const text = readText(value, 'agent key');
  try {
    if (text.trimStart().startsWith('-----BEGIN')) return await toPublicJwk(text);
    const json = JSON.parse(text) as Record<string, unknown>;
    return await toPublicJwk((json['publicJwk'] ?? json) as JsonWebKey);
  } catch (e) {
    throw new UsageError(`--agent ${value}: not an Ed25519 or P-256 public key (${(e as Error).message})`);
  }
}

function expiry(value: string, now: number): string {
  const m = /^([1-9][0-9]{0,5})(m|h|d)$/.exec(value);
  if (m)
    return formatTimestamp(now + Number(m[1]) * { m: 60_000, h: 3_600_000, d: 86_400_000 }[m[2] as 'm' | 'h' | 'd']);
  if (!/Z$/.test(value) || !Number.isFinite(Date.parse(value)))
    throw new UsageError(`--expires: a duration (30m, 24h, 7d) or an RFC 3339 UTC time, not ${value}`);
  return value;
}

/** POST JSON; the authority's `{ error }` becomes one line naming its code. */
async function post(url: string, body: unknown): Promise<any> {
  let res: Response;
  try {
    res = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
  } catch (e) {
    throw new Error(`POST ${url}: ${(e as Error).message}`);
  }
  const text = await res.text();
  let json: any;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  if (!res.ok)
    throw new Error(
      `POST ${url}: ${res.status} ${json?.error ? `${json.error.code}: ${json.error.message}` : text.slice(0, 200)}`,
    );
  return json;
}

async function keygen(p: Parsed): Promise<number> {
  const out = required(p, 'out');
  const alg = one(p, 'alg') ?? 'EdDSA';
  if (alg !== 'EdDSA' && alg !== 'ES256') throw new UsageError('--alg must be EdDSA or ES256');
  if (existsSync(out) && !p.flags.has('force'))
    return (
      console.error(
        `ctl human keygen: ${out} exists; pass --force to overwrite (grants signed by it then lose their issuer)`,
      ),
      1
    );
  const pair = await generateKeyPair({ alg });
  writeAtomic(out, pair.privateKeyPem, 0o600);
  const did = didKeyFromJwk(pair.publicJwk);
  console.error(`private key: ${out} (0600). Give the DID below to the authority to be enrolled.`);
  console.log(did);
  return 0;
}

async function grant(p: Parsed): Promise<number> {
  const now = clock(p)();
  const key = readText(required(p, 'key'), 'key');
  const signer = await importSigningKey(key);
  const did = didKeyFromJwk(signer.publicJwk);
  const actorKey = await readAgentKey(required(p, 'agent'));
  const amount = required(p, 'amount');
  const currency = required(p, 'currency');
  const purposes = p.options.get('purpose') ?? [];
  if (!purposes.length) throw new UsageError('--purpose is required (at least one <domain>:<kind>)');
  const merchants = p.options.get('merchant');
  const expiresAt = expiry(required(p, 'expires'), now);
  const authority = one(p, 'authority');
  const base = one(p, 'revocation-base');
  if (!authority === !base) throw new UsageError('give exactly one of --authority URL and --revocation-base URL');
  let signed: PolicyGrant;
  if (authority) {
    const request = {
      issuer: did,
      actorKey,
      maxAmountMinor: amount,
      currency,
      allowedPurposes: purposes,
      expiresAt,
      ...(merchants ? { destinationAllowlist: merchants } : {}),
    };
    const prepared = await post(`${authority.replace(/\/+$/, '')}/grants/human/prepare`, request);
    // The authority chose the id, the revocation URL and the time; what is signed is checked here
    // against what was asked, so an authority cannot slip a larger budget under the person's key.
    const g = prepared.grant as Record<string, unknown>;
    const asked = { issuer: did, maxAmountMinor: amount, currency, expiresAt, profile: 'human-agent' } as Record<
      string,
      unknown
    >;
    for (const [k, v] of Object.entries(asked))
      if (g[k] !== v)
        throw new Error(`the authority prepared ${k} = ${JSON.stringify(g[k])}, not ${JSON.stringify(v)}`);
    const same = (a: unknown, b: unknown) =>
      a === undefined ? b === undefined : b !== undefined && canonicalize(a) === canonicalize(b);
    if (
      !same(g['actorKey'], actorKey) ||
      !same(g['allowedPurposes'], purposes) ||
      !same(g['destinationAllowlist'], merchants)
    ) {
      throw new Error('the authority prepared another agent key, purposes or merchants than asked');
    }
    signed = await post(`${authority.replace(/\/+$/, '')}/grants`, await signPreparedGrant(g, signer));
  } else {
    // The policy is the delegation itself, as the authority's prepare step hashes it (PROTOCOL.md §2).
    const policy = {
      profile: 'human-agent',
      issuer: did,
      actorKey,
      maxAmountMinor: amount,
      currency,
      allowedPurposes: purposes,
      expiresAt,
      allowedRails: ['x402'],
      allowedAssets: [{ standard: 'iso4217', code: currency }],
      ...(merchants ? { destinationAllowlist: merchants } : {}),
    };
    const { profile: _p, issuer: _i, ...fields } = policy;
    signed = await createSignedPolicyGrant(
      { ...fields, profile: 'human-agent', policyHash: policyHash(policy) },
      { signingKey: signer, revocationBaseUrl: base, now: () => now },
    );
  }
  parseGrant(signed);
  const text = JSON.stringify(signed, null, 2) + '\n';
  const out = one(p, 'out');
  if (out) writeAtomic(out, text);
  else process.stdout.write(text);
  console.error(
    `grant ${signed.grantId}: ${formatMinor(amount, currency)} for ${purposes.join(', ')} ` +
      `until ${expiresAt}, signed by ${did}${out ? ` → ${out}` : ''}`,
  );
  return 0;
}

async function revoke(p: Parsed): Promise<number> {
  const now = clock(p);
  const signer = await importSigningKey(readText(required(p, 'key'), 'key'));
  const grantFile = one(p, 'grant');
  let grantId: string;
  let endpoint: string;
  if (grantFile) {
    const g = parseGrant(readText(grantFile, 'grant'));
    grantId = g.grantId;
    // The grant's own revocation URL, `<base>/revoke?grantId=…`: POST to it without the query.
    endpoint = g.revocationUrl.split('?')[0]!;
  } else {
    grantId = required(p, 'grant-id');
    endpoint = `${required(p, 'authority').replace(/\/+$/, '')}/revoke`;
  }
  const revocation = await createSignedRevocation({ grantId }, { signingKey: signer, now });
  if (p.flags.has('print')) return (console.log(JSON.stringify(revocation, null, 2)), 0);
  const answer = await post(endpoint, revocation);
  console.log(JSON.stringify(answer));
  return 0;
}

export async function main(args: string[]): Promise<number> {
  return guard(USAGE, async () => {
    const [sub, ...rest] = args;
    if (!sub) return (console.error(USAGE), 2);
    if (sub === '--help' || sub === '-h' || rest.includes('--help') || rest.includes('-h'))
      return (console.log(USAGE), 0);
    const run = { keygen, grant, revoke }[sub as 'keygen'];
    if (!run) throw new UsageError(`unknown subcommand ${sub}`);
    const p = parseArgs(rest, {
      values: [
        'out',
        'alg',
        'key',
        'agent',
        'amount',
        'currency',
        'purpose',
        'merchant',
        'expires',
        'authority',
        'revocation-base',
        'grant',
        'grant-id',
        'now',
      ],
      flags: ['force', 'print'],
    });
    if (p.positionals.length) throw new UsageError(`unexpected argument '${p.positionals[0]}'`);
    try {
      return await run(p);
    } catch (e) {
      if (e instanceof UsageError) throw e;
      console.error(`ctl human ${sub}: ${(e as Error).message}`);
      return 1;
    }
  });
}
