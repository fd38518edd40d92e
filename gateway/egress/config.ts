/**
 * The egress proxy's configuration (gateway/README.md "Egress proxy"): off unless
 * CTL_GATEWAY_EGRESS_PORT is set; CTL_GATEWAY_EGRESS_PASS_THROUGH lists the host globs tunnelled
 * untouched (net/host-glob.ts syntax, as merchantAllowlist).
 */
import { ConfigError, checkHost } from '../../service-kit/config.js';
import { parseRateLimit, type RateLimit } from '../../service-kit/rate-limit.js';
import { canonicalGlob, firstInertGlob, globProgramSizes, MAX_LIST_PROGRAM } from '../net/host-glob.js';

export interface EgressConfig {
  port: number;
  /** Default: the gateway's HOST. */
  host?: string;
  passThrough: string[];
  /** CONNECTs per session (pass-through or not); `false`: none. Default DEFAULT_CONNECT_LIMIT. */
  connectLimit?: RateLimit | false;
  /** How often open tunnels' sessions are read again (ends on other instances); default 2 s. */
  sessionRecheckMs?: number;
}

/**
 * An agent opens a tunnel per host and keeps it (HTTP keep-alive): 120 CONNECTs a minute is far
 * above that, and far below minting a certificate per made-up host as fast as one can ask.
 */
export const DEFAULT_CONNECT_LIMIT: RateLimit = { points: 120, seconds: 60 };

/** Splits at commas outside `{…}` (a comma inside braces separates a glob's alternatives). */
function splitTopLevel(v: string): string[] {
  const out: string[] = [];
  let depth = 0;
  let cur = '';
  for (const ch of v) {
    if (ch === '{') depth++;
    else if (ch === '}') depth = Math.max(0, depth - 1);
    if (ch === ',' && depth === 0) {
      out.push(cur);
      cur = '';
    } else cur += ch;
  }
  return [...out, cur];
}

/** Comma-separated host globs, e.g. `*.bank.example,pinned.example.{com,net}`. */
export function parsePassThrough(v: string | undefined, variable = 'CTL_GATEWAY_EGRESS_PASS_THROUGH'): string[] {
  // Hosts are matched in canonical form (service-kit/host-name.ts), and so are the globs.
  const list = splitTopLevel(v ?? '')
    .map((s) => s.trim())
    .filter(Boolean)
    .map((g) => {
      const c = canonicalGlob(g);
      if (c === undefined) throw new ConfigError(variable, `'${g}' is not a host name, an address or a host glob`);
      return c;
    });
  const inert = firstInertGlob(list);
  if (inert >= 0) throw new ConfigError(variable, `'${list[inert]}' can match no host`);
  const total = globProgramSizes(list).reduce((a, b) => a + b, 0);
  if (total > MAX_LIST_PROGRAM)
    throw new ConfigError(variable, `the globs compile to ${total} states, at most ${MAX_LIST_PROGRAM}`);
  return list;
}

/** The egress settings from the environment, or undefined when the proxy is off. */
export function egressFromEnv(env: Record<string, string | undefined>): EgressConfig | undefined {
  const portText = env.CTL_GATEWAY_EGRESS_PORT?.trim();
  const passThrough = parsePassThrough(env.CTL_GATEWAY_EGRESS_PASS_THROUGH);
  const limitText = env.CTL_GATEWAY_EGRESS_CONNECT_LIMIT;
  let connectLimit: RateLimit | undefined;
  try {
    connectLimit = parseRateLimit(limitText, 'CTL_GATEWAY_EGRESS_CONNECT_LIMIT', DEFAULT_CONNECT_LIMIT);
  } catch (e) {
    throw new ConfigError('CTL_GATEWAY_EGRESS_CONNECT_LIMIT', (e as Error).message.replace(/^[A-Z_]+: /, ''));
  }
  if (!portText) {
    for (const [name, set] of [
      ['CTL_GATEWAY_EGRESS_PASS_THROUGH', passThrough.length > 0],
      ['CTL_GATEWAY_EGRESS_CONNECT_LIMIT', Boolean(limitText?.trim())],
    ] as const)
      if (set) throw new ConfigError(name, 'set CTL_GATEWAY_EGRESS_PORT too (the proxy is off)');
    return undefined;
  }
  if (!/^[0-9]{1,5}$/.test(portText) || Number(portText) > 65535)
    throw new ConfigError('CTL_GATEWAY_EGRESS_PORT', `expected 0–65535, got '${portText}'`);
  const host = env.CTL_GATEWAY_EGRESS_HOST?.trim();
  return {
    port: Number(portText),
    host: host ? checkHost(host, 'CTL_GATEWAY_EGRESS_HOST') : undefined,
    passThrough,
    connectLimit: connectLimit ?? false,
  };
}
