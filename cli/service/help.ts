/**
 * The environment section of a service's `--help`: one line per variable, `NAME (default)` then
 * what it does, so an operator (and test/cli/help-readme.test.ts, against the README tables)
 * finds each variable and its default on its own line.
 */
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** A variable, its default (omitted: none) and what it sets. */
export type VariableHelp = readonly [name: string, defaultValue: string | undefined, meaning: string];

/**
 * The webhook outbox's variables (service-kit's, read alike by both services); `what` names the
 * webhooks in the first line.
 * @example [...webhookVariables('session webhooks')]
 */
export function webhookVariables(what: string): VariableHelp[] {
  return [
    ['CTL_WEBHOOK_MAX_ATTEMPTS', '12', `${what}: attempts before the dead letter`],
    ['CTL_WEBHOOK_BASE_DELAY_MS', '5000', 'first retry delay, doubled each attempt'],
    ['CTL_WEBHOOK_MAX_DELAY_MS', '3600000', 'longest retry delay'],
    ['CTL_WEBHOOK_TIMEOUT_MS', '5000', 'per-attempt timeout'],
    ['CTL_WEBHOOK_POLL_MS', '1000', 'how often each instance looks for due deliveries'],
  ];
}

/**
 * The anchoring variables (service-kit/anchor/config.ts), the same in both services; `revocations`
 * adds the revocation-token contract (the authority).
 * @example [...anchorVariables('the audit chain head', true)]
 */
export function anchorVariables(what: string, revocations = false): VariableHelp[] {
  return [
    ['CTL_ANCHOR_EVM_RPC_URL', undefined, `an EVM node's JSON-RPC: ${what} is anchored there`],
    ['CTL_ANCHOR_EVM_CHAIN_ID', undefined, 'its chain id (pinned: a node of another chain is refused)'],
    ['CTL_ANCHOR_EVM_CONTRACT', undefined, 'the CtlAnchor contract (ctl anchor deploy)'],
    ...(revocations
      ? ([
          ['CTL_ANCHOR_EVM_REVOCATION_CONTRACT', undefined, 'the CtlRevocationTokens contract: a token per revocation'],
        ] as VariableHelp[])
      : []),
    ['CTL_ANCHOR_EVM_KEY_FILE', undefined, 'the signing key: a secp256k1 private key as 64 hex, mode 0600'],
    ['CTL_ANCHOR_EVM_PKCS11_URI', undefined, 'or the key in a PKCS#11 token (secp256k1, CKM_ECDSA)'],
    ['CTL_ANCHOR_EVM_ADDRESS', undefined, 'the pinned anchoring address: the signer must be it'],
    ['CTL_ANCHOR_EVM_CONFIRMATIONS', '12', 'depth at which a transaction counts'],
    ['CTL_ANCHOR_BTC_RPC_URL', undefined, `a bitcoind-RPC node (Bitcoin, Litecoin): ${what} as an OP_RETURN`],
    ['CTL_ANCHOR_BTC_RPC_USER', undefined, 'its RPC user (with _PASSWORD), or'],
    ['CTL_ANCHOR_BTC_RPC_PASSWORD', undefined, 'its RPC password'],
    ['CTL_ANCHOR_BTC_RPC_COOKIE_FILE', undefined, "the node's .cookie file instead"],
    ['CTL_ANCHOR_BTC_WALLET', undefined, "the node's wallet holding the address's key"],
    ['CTL_ANCHOR_BTC_ADDRESS', undefined, 'the pinned anchoring address: coins from it, change to it'],
    ['CTL_ANCHOR_BTC_CONFIRMATIONS', '6', 'depth at which an anchor counts'],
    ['CTL_ANCHOR_BTC_FEE_RATE', undefined, "sat/vB (unset: the node's estimate)"],
    ['CTL_ANCHOR_LOCAL_PATH', undefined, `a local append-only file of ${what} (development)`],
    ['CTL_ANCHOR_INTERVAL_MS', '60000', 'how often the head is read and anchored when it grew'],
    ['CTL_ANCHOR_POLL_MS', '5000', 'how often a sent transaction is looked at until deep enough'],
    ['CTL_ANCHOR_MAX_DELAY_MS', '300000', 'longest delay between retries (a node that is down)'],
    ['CTL_ANCHOR_ALERT_AFTER_MS', '1800000', 'unconfirmed this long: reported once (log, metric)'],
  ];
}

/** @example variableLines([['PORT', '8402', 'where it listens']]) // '  PORT (8402)  where it listens' */
export function variableLines(rows: readonly VariableHelp[]): string {
  const heads = rows.map(([name, def]) => (def === undefined ? name : `${name} (${def})`));
  const width = Math.min(40, Math.max(...heads.map((h) => h.length)));
  return rows.map(([, , meaning], i) => `  ${heads[i]!.padEnd(width)}  ${meaning}`).join('\n');
}

/**
 * The version of the package this code runs from: the nearest package.json above the module
 * (the repository's in a clone, ctl-gateway's or ctl-authority's inside their bundles).
 */
export function packageVersion(moduleUrl: string): string {
  let dir = dirname(fileURLToPath(moduleUrl));
  for (;;) {
    const file = join(dir, 'package.json');
    if (existsSync(file)) return (JSON.parse(readFileSync(file, 'utf8')) as { version: string }).version;
    const up = dirname(dir);
    if (up === dir) return 'unknown';
    dir = up;
  }
}
