/**
 * Anchoring's configuration, the same variables in both services and in `ctl anchor verify`
 * (spec §4.3 "configured through prefixed variables"): `CTL_ANCHOR_EVM_*` for an EVM chain,
 * `CTL_ANCHOR_BTC_*` for a Bitcoin-family chain, `CTL_ANCHOR_LOCAL_PATH` for the development
 * file, `CTL_ANCHOR_*` for the outbox's timing. Nothing set: no anchoring. A variable set wrongly
 * is a ConfigError naming it, before anything is opened.
 */
import { readFileSync } from 'node:fs';
import { ConfigError } from '../config.js';
import { evmKeyFileSigner, openPkcs11EvmSigner, type EvmSigner } from '../chain/evm-signer.js';
import { createBtcLedger } from './btc.js';
import { createEvmLedger } from './evm.js';
import { createFileLedger } from './file.js';
import type { Ledger } from './ledger.js';
import type { ChainOutboxOptions } from './outbox.js';

type Env = Record<string, string | undefined>;
type Hex = `0x${string}`;

export interface EvmAnchorSettings {
  rpcUrl: string;
  chainId: number;
  /** CtlAnchor's address (CTL_ANCHOR_EVM_CONTRACT). */
  contract?: Hex;
  /** CtlRevocationTokens' address (CTL_ANCHOR_EVM_REVOCATION_CONTRACT; the authority). */
  revocationContract?: Hex;
  /** The pinned anchoring address (CTL_ANCHOR_EVM_ADDRESS): the signer must be it; the verifier requires it. */
  address?: Hex;
  keyFile?: string;
  pkcs11Uri?: string;
  confirmations: number;
  /** Where a verifier starts searching the contract's events (CTL_ANCHOR_EVM_FROM_BLOCK, default 0). */
  fromBlock: number;
}

export interface BtcAnchorSettings {
  rpcUrl: string;
  credentials?: string;
  wallet?: string;
  /** The pinned anchoring address (CTL_ANCHOR_BTC_ADDRESS). */
  address: string;
  confirmations: number;
  feeRate?: number;
}

export interface AnchorSettings {
  evm?: EvmAnchorSettings;
  btc?: BtcAnchorSettings;
  localPath?: string;
  timing: Pick<ChainOutboxOptions, 'anchorIntervalMs' | 'alertAfterMs' | 'maxDelayMs' | 'pollMs'>;
}

const value = (env: Env, name: string) => {
  const v = env[name]?.trim();
  return v ? v : undefined;
};

function integer(env: Env, name: string, min: number, max = 2 ** 53 - 1): number | undefined {
  const v = value(env, name);
  if (v === undefined) return undefined;
  if (!/^[0-9]{1,16}$/.test(v) || Number(v) < min || Number(v) > max)
    throw new ConfigError(name, `expected an integer from ${min} to ${max}, got '${v.slice(0, 20)}'`);
  return Number(v);
}

function address(env: Env, name: string): Hex | undefined {
  const v = value(env, name);
  if (v === undefined) return undefined;
  if (!/^0x[0-9a-fA-F]{40}$/.test(v)) throw new ConfigError(name, `expected a 0x-prefixed 20-byte address, got '${v}'`);
  return v as Hex;
}

function rpcUrl(env: Env, name: string): string {
  const v = value(env, name)!;
  let u: URL;
  try {
    u = new URL(v);
  } catch {
    throw new ConfigError(
      name,
      `expected an http(s) URL of the node's JSON-RPC, got '${v.replace(/\/\/[^@/]*@/, '//***@')}'`,
    );
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:') throw new ConfigError(name, 'expected an http(s) URL');
  return v;
}

function evmSettings(env: Env): EvmAnchorSettings | undefined {
  const names = Object.keys(env).filter((k) => k.startsWith('CTL_ANCHOR_EVM_') && value(env, k));
  if (names.length === 0) return undefined;
  for (const required of ['CTL_ANCHOR_EVM_RPC_URL', 'CTL_ANCHOR_EVM_CHAIN_ID'])
    if (!value(env, required)) throw new ConfigError(required, `required with ${names[0]}`);
  const keyFile = value(env, 'CTL_ANCHOR_EVM_KEY_FILE');
  const pkcs11Uri = value(env, 'CTL_ANCHOR_EVM_PKCS11_URI');
  if (keyFile && pkcs11Uri)
    throw new ConfigError('CTL_ANCHOR_EVM_PKCS11_URI', 'set it or CTL_ANCHOR_EVM_KEY_FILE, not both');
  return {
    rpcUrl: rpcUrl(env, 'CTL_ANCHOR_EVM_RPC_URL'),
    chainId: integer(env, 'CTL_ANCHOR_EVM_CHAIN_ID', 1)!,
    contract: address(env, 'CTL_ANCHOR_EVM_CONTRACT'),
    revocationContract: address(env, 'CTL_ANCHOR_EVM_REVOCATION_CONTRACT'),
    address: address(env, 'CTL_ANCHOR_EVM_ADDRESS'),
    keyFile,
    pkcs11Uri,
    confirmations: integer(env, 'CTL_ANCHOR_EVM_CONFIRMATIONS', 1, 10_000) ?? 12,
    fromBlock: integer(env, 'CTL_ANCHOR_EVM_FROM_BLOCK', 0) ?? 0,
  };
}

function btcSettings(env: Env): BtcAnchorSettings | undefined {
  const names = Object.keys(env).filter((k) => k.startsWith('CTL_ANCHOR_BTC_') && value(env, k));
  if (names.length === 0) return undefined;
  for (const required of ['CTL_ANCHOR_BTC_RPC_URL', 'CTL_ANCHOR_BTC_ADDRESS'])
    if (!value(env, required)) throw new ConfigError(required, `required with ${names[0]}`);
  const user = value(env, 'CTL_ANCHOR_BTC_RPC_USER');
  const password = value(env, 'CTL_ANCHOR_BTC_RPC_PASSWORD');
  const cookie = value(env, 'CTL_ANCHOR_BTC_RPC_COOKIE_FILE');
  let credentials: string | undefined;
  if (cookie) {
    try {
      credentials = readFileSync(cookie, 'utf8').trim(); // bitcoind's .cookie: `__cookie__:<secret>`
    } catch (e) {
      throw new ConfigError('CTL_ANCHOR_BTC_RPC_COOKIE_FILE', `cannot be read (${(e as NodeJS.ErrnoException).code})`);
    }
  } else if (user || password) {
    if (!user || !password)
      throw new ConfigError(user ? 'CTL_ANCHOR_BTC_RPC_PASSWORD' : 'CTL_ANCHOR_BTC_RPC_USER', 'set both or neither');
    credentials = `${user}:${password}`;
  }
  const address = value(env, 'CTL_ANCHOR_BTC_ADDRESS')!;
  if (!/^[a-zA-Z0-9]{14,90}$/.test(address))
    throw new ConfigError('CTL_ANCHOR_BTC_ADDRESS', `not an address: '${address}'`);
  return {
    rpcUrl: rpcUrl(env, 'CTL_ANCHOR_BTC_RPC_URL'),
    credentials,
    wallet: value(env, 'CTL_ANCHOR_BTC_WALLET'),
    address,
    confirmations: integer(env, 'CTL_ANCHOR_BTC_CONFIRMATIONS', 1, 10_000) ?? 6,
    feeRate: integer(env, 'CTL_ANCHOR_BTC_FEE_RATE', 1, 100_000),
  };
}

const KNOWN = /^CTL_ANCHOR_(EVM_|BTC_|LOCAL_PATH$|INTERVAL_MS$|ALERT_AFTER_MS$|MAX_DELAY_MS$|POLL_MS$)/;

/**
 * Reads and checks the variables. `unknown` lists `CTL_ANCHOR_*` names that mean nothing (a typo, a
 * ledger kind there is no adapter for), for the caller to warn about.
 * @example const s = anchorSettingsFromEnv(process.env); if (s.evm) …
 */
export function anchorSettingsFromEnv(env: Env): AnchorSettings & { unknown: string[] } {
  return {
    evm: evmSettings(env),
    btc: btcSettings(env),
    localPath: value(env, 'CTL_ANCHOR_LOCAL_PATH'),
    timing: {
      anchorIntervalMs: integer(env, 'CTL_ANCHOR_INTERVAL_MS', 1000),
      alertAfterMs: integer(env, 'CTL_ANCHOR_ALERT_AFTER_MS', 1000),
      maxDelayMs: integer(env, 'CTL_ANCHOR_MAX_DELAY_MS', 1000),
      pollMs: integer(env, 'CTL_ANCHOR_POLL_MS', 100),
    },
    unknown: Object.keys(env).filter((k) => k.startsWith('CTL_ANCHOR_') && !KNOWN.test(k) && value(env, k)),
  };
}

/** Whether any ledger is configured. */
export const anchoringConfigured = (s: AnchorSettings) => !!(s.evm || s.btc || s.localPath);

/** The EVM signer the settings name (a service; the verifier needs none). */
export async function openEvmAnchorSigner(s: EvmAnchorSettings, env: Env = {}): Promise<EvmSigner> {
  if (!s.keyFile && !s.pkcs11Uri)
    throw new ConfigError(
      'CTL_ANCHOR_EVM_KEY_FILE',
      'anchoring on an EVM chain needs a signer (or CTL_ANCHOR_EVM_PKCS11_URI)',
    );
  const signer = s.keyFile
    ? await evmKeyFileSigner(s.keyFile).catch((e) => {
        throw new ConfigError('CTL_ANCHOR_EVM_KEY_FILE', (e as Error).message);
      })
    : await openPkcs11EvmSigner(s.pkcs11Uri!, { modulePath: value(env, 'CTL_PKCS11_MODULE') }).catch((e) => {
        throw new ConfigError('CTL_ANCHOR_EVM_PKCS11_URI', (e as Error).message);
      });
  if (s.address && s.address.toLowerCase() !== signer.address.toLowerCase()) {
    await signer.close();
    throw new ConfigError('CTL_ANCHOR_EVM_ADDRESS', `the signer's address is ${signer.address}, not ${s.address}`);
  }
  return signer;
}

/**
 * The ledgers the settings configure, for a service; `revocations` keeps the revocation-token
 * contract (the authority; the gateway mints none).
 * @example const ledgers = await openLedgers(anchorSettingsFromEnv(process.env), { revocations: true })
 */
export async function openLedgers(
  s: AnchorSettings,
  options: { revocations?: boolean; env?: Env; fetch?: typeof fetch } = {},
): Promise<Ledger[]> {
  const out: Ledger[] = [];
  if (s.localPath) out.push(createFileLedger(s.localPath));
  if (s.evm && (s.evm.contract || (options.revocations && s.evm.revocationContract))) {
    const signer = await openEvmAnchorSigner(s.evm, options.env);
    out.push(
      await createEvmLedger({
        rpcUrl: s.evm.rpcUrl,
        chainId: s.evm.chainId,
        signer,
        anchorContract: s.evm.contract,
        revocationContract: options.revocations ? s.evm.revocationContract : undefined,
        confirmations: s.evm.confirmations,
        fetch: options.fetch,
      }),
    );
  }
  if (s.btc) {
    if (!s.btc.wallet)
      throw new ConfigError('CTL_ANCHOR_BTC_WALLET', 'anchoring needs the wallet that holds the address');
    out.push(
      createBtcLedger({
        rpcUrl: s.btc.rpcUrl,
        credentials: s.btc.credentials,
        wallet: s.btc.wallet,
        address: s.btc.address,
        confirmations: s.btc.confirmations,
        feeRate: s.btc.feeRate,
        fetch: options.fetch,
      }),
    );
  }
  return out;
}
