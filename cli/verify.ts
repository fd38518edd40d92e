/**
 * `ctl verify SBA.json`: the merchant verification of spec §4.4 (PROTOCOL.md §5) on the command
 * line, offline by default (a device tool: revocation from the bundles' `revokedGrants`).
 * `--explain` prints each step with ✓/✗ and the reason. The verdict is `verifyCtl`'s own; the
 * explanation places its first failing code on the step that raises it (PROTOCOL.md §5 names the
 * codes per step), so the two can never disagree.
 */
import { decodeSbaHeader, parseStrictJson, verifyCtl, type VerifyCtlOptions } from '../src/index.js';
import type { SignedBudgetAuthorization } from '../src/index.js';
import { decodeCompact } from '../src/entries/compact.js';
import { isCompact, readBundle, readBytes } from './device/artifact-files.js';
import { clock, guard, one, parseArgs, readText, UsageError } from './device/args.js';
import { readChainFile } from './device/root-rotate.js';
import { formatMinor } from '../service-kit/money.js';

const USAGE = `usage: ctl verify SBA.json [--bundle FILE]... [--root PEM] [--chain FILE] [--signing-key PEM]
                  [--trusted-human DID]... [--amount N] [--currency C] [--merchant M] [--rail R]
                  [--purpose P] [--online] [--now ISO] [--explain]

  SBA.json        the SBA as JSON, an "Authorization: CTL <base64>" value, or compact CBOR (ctl/compact)
  --bundle/--root resolve the authority's key from Trust Bundles (JSON or compact CBOR) checked
                  against the root key (PEM)
  --chain         the root chain (PROTOCOL.md §11, ctl root rotate): bundles must be signed by its newest bundle keys
  --signing-key   or take the authority's grant key directly (spec §4.4 key fallback)
  --trusted-human a person's did:key whose human-agent grants are accepted (PROTOCOL.md §10)
  --amount        the payment (default: the SBA's maxAmountMinor); --currency (default: the SBA's)
  --online        also call the grant's revocation URL (default: offline, bundles only)
  --explain       print every step of spec §4.4 with ✓/✗ and the reason
exit 0 valid, 1 refused, 2 usage`;

const STEPS = [
  'parse: closed objects, value rules, SBA consistent with its grant',
  '1. PolicyGrant signature (key resolved from Trust Bundles / signing key), grant validity',
  '2. SBA signature against grant.actorKey, SBA validity',
  '3. revocation',
  '4. budget bounds: amount ≤ maxAmountMinor, currency',
  '5. destination, rail, asset and purpose',
] as const;

function parseSbaText(text: string): SignedBudgetAuthorization {
  return (
    text.startsWith('{') ? parseStrictJson(text) : decodeSbaHeader(text.replace(/^Authorization:\s*/i, ''))
  ) as SignedBudgetAuthorization;
}

/** The step (index into STEPS) that raises `code` (PROTOCOL.md §5). */
function stepOf(code: string, message: string): number {
  switch (code) {
    case 'malformed':
      return /intentHash/.test(message) ? 4 : 0;
    case 'unsupported_version':
    case 'policy_hash_mismatch':
      return 0;
    case 'currency_mismatch':
      return /payment/.test(message) ? 4 : 0;
    case 'budget_exceeded':
      return /authorization is for more than the grant/.test(message) ? 0 : 4;
    case 'grant_signature_invalid':
    case 'grant_expired':
    case 'unknown_key':
    case 'key_purpose_mismatch':
    case 'issuer_not_trusted':
    case 'trust_bundle_invalid':
    case 'trust_bundle_expired':
    case 'unsupported_algorithm':
      return 1;
    case 'not_yet_valid':
      return /grant/.test(message) ? 1 : 2;
    case 'sba_signature_invalid':
    case 'sba_expired':
      return 2;
    case 'grant_revoked':
    case 'revocation_unavailable':
      return 3;
    case 'amount_exceeds_authorization':
    case 'replay':
    case 'offline_limit_exceeded':
    case 'velocity_exceeded':
      return 4;
    default:
      return 5;
  }
}

/** What each passed step established, from the SBA itself (shown with ✓). */
function passedDetail(step: number, sba: SignedBudgetAuthorization, o: VerifyCtlOptions, bundles: number): string {
  const a = sba.authorization;
  const g = sba.grant;
  switch (step) {
    case 0:
      return `SBA ${a.budgetId} drawn from grant ${g.grantId} (${g.issuer})`;
    case 1: {
      const trusted = bundles
        ? `trusted through ${bundles} bundle(s) under the root`
        : g.profile === 'human-agent'
          ? 'a person trusted by --trusted-human'
          : 'the given signing key';
      return `grant signed by key ${g.keyId} of ${g.issuer}, ${trusted}; valid ${g.issuedAt} → ${g.expiresAt}`;
    }
    case 2:
      return `signed by the grant's actorKey (${g.actorKey.crv}); valid ${a.issuedAt} → ${a.expiresAt}`;
    case 3:
      return o.offline
        ? `not in the bundles' revokedGrants (offline${bundles ? '' : '; no bundle: not checked'})`
        : `not revoked at ${g.revocationUrl}`;
    case 4:
      return (
        `${formatMinor(o.amount, o.currency)} ≤ ${formatMinor(a.maxAmountMinor, a.currency)} ` +
        `authorized (grant ceiling ${formatMinor(g.maxAmountMinor, g.currency)})`
      );
    default: {
      const m = o.merchantId ?? a.merchantId;
      const parts = [
        m === undefined
          ? 'no merchant named'
          : g.destinationAllowlist
            ? `merchant ${m} in the allowlist`
            : `merchant ${m} (grant unrestricted)`,
      ];
      if (o.rail ?? a.rail) parts.push(`rail ${o.rail ?? a.rail} allowed`);
      if (o.purpose ?? a.purpose) parts.push(`purpose ${o.purpose ?? a.purpose} allowed`);
      return parts.join('; ');
    }
  }
}

export async function main(args: string[]): Promise<number> {
  return guard(USAGE, async () => {
    if (args.includes('--help') || args.includes('-h')) return void console.log(USAGE);
    const p = parseArgs(args, {
      values: [
        'bundle',
        'root',
        'chain',
        'signing-key',
        'trusted-human',
        'amount',
        'currency',
        'merchant',
        'rail',
        'purpose',
        'now',
      ],
      flags: ['explain', 'online'],
    });
    if (p.positionals.length !== 1) throw new UsageError('verify takes one SBA file');
    const bytes = readBytes(p.positionals[0]!, 'SBA');
    let sba: SignedBudgetAuthorization;
    try {
      sba = isCompact(bytes)
        ? (decodeCompact(bytes, 'sba') as SignedBudgetAuthorization)
        : parseSbaText(new TextDecoder().decode(bytes).trim());
    } catch (e) {
      console.log(`✗ ${STEPS[0]}\n    malformed: ${(e as Error).message}`);
      return 1;
    }
    const bundles = (p.options.get('bundle') ?? []).map((f) => readBundle(f));
    const rootFile = one(p, 'root');
    const keyFile = one(p, 'signing-key');
    if (bundles.length && !rootFile)
      throw new UsageError('--bundle needs --root (the root never comes from a bundle, spec §5)');
    const humans = p.options.get('trusted-human') ?? [];
    if (!bundles.length && !keyFile && !humans.length)
      throw new UsageError('give --bundle FILE --root PEM, --signing-key PEM or --trusted-human DID');
    const a = (sba as Partial<SignedBudgetAuthorization>)?.authorization;
    const options: VerifyCtlOptions = {
      amount: one(p, 'amount') ?? (typeof a?.maxAmountMinor === 'string' ? a.maxAmountMinor : ''),
      currency: one(p, 'currency') ?? (typeof a?.currency === 'string' ? a.currency : ''),
      merchantId: one(p, 'merchant'),
      rail: one(p, 'rail'),
      purpose: one(p, 'purpose'),
      offline: !p.flags.has('online'),
      now: clock(p),
      ...(bundles.length ? { trustBundles: bundles, rootPublicKeyPem: readText(rootFile!, 'root key') } : {}),
      ...(one(p, 'chain') !== undefined ? { rootChain: readChainFile(one(p, 'chain')!).statements } : {}),
      ...(keyFile ? { signingKeyPem: readText(keyFile, 'signing key') } : {}),
      ...(humans.length ? { trustedHumans: humans } : {}),
    };
    const r = await verifyCtl(sba, options);
    if (p.flags.has('explain')) {
      const failedAt = r.valid ? STEPS.length : stepOf(r.error.code, r.error.message);
      STEPS.forEach((title, i) => {
        if (i < failedAt) console.log(`✓ ${title}\n    ${passedDetail(i, sba, options, bundles.length)}`);
        else if (i === failedAt && !r.valid) console.log(`✗ ${title}\n    ${r.error.code}: ${r.error.message}`);
        else console.log(`– ${title}\n    not reached (verification stops at the first failure)`);
      });
    }
    if (r.valid) {
      console.log(
        `VALID: ${formatMinor(options.amount, options.currency)} under grant ${r.grant.grantId} ` +
          `(budget ${r.sba.authorization.budgetId})`,
      );
      return 0;
    }
    console.log(`REFUSED: ${r.error.code}: ${r.error.message}`);
    return 1;
  });
}
