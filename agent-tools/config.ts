/**
 * Where an agent's tools pay from: the gateway's address and one session's token, checked the
 * same way for every adapter (the MCP server reads them from its environment, the AI SDK and
 * LangChain tools take them as options).
 */
import { createGatewayClient, parseVerifierKey, type CheckpointStore } from '../src/index.js';
import type { ToolContext } from './tools/tool.js';
import type { CtlToolName } from './tools/index.js';

export interface GatewayConfig {
  /** The gateway's base URL, without a trailing slash. */
  gatewayUrl: string;
  /** `gw_sess_…`, the bearer credential of one session (spec §2.2). */
  sessionToken: string;
  /**
   * The gateway log's verifier key (`/log/vkey`, pinned out of band): `check_log` follows the log
   * under it. Without it, `check_log` answers `unsupported_feature`.
   */
  logVkey?: string;
}

/** The options of `ctlAiTools` and `ctlLangChainTools`. */
export interface CtlToolsOptions {
  /** The gateway's base URL (`https://`; plain `http://` only for localhost). */
  gatewayUrl: string;
  /** The session's `gw_sess_…` token, from the budget owner (POST /sessions or the console). */
  sessionToken: string;
  /** Only these tools (default: all of them). */
  tools?: readonly CtlToolName[];
  /** The `fetch` the gateway client uses (default the host's). */
  fetch?: typeof fetch;
  /** The gateway log's verifier key, pinned out of band (`check_log`). */
  logVkey?: string;
  /** Where `check_log` keeps the last checkpoint it accepted (default: memory, for this process). */
  logStore?: CheckpointStore;
}

/** A setting missing or malformed: the message names it and never repeats a secret's value. */
export class ConfigError extends Error {
  constructor(
    readonly variable: string,
    message: string,
  ) {
    super(`${variable}: ${message}`);
    this.name = 'ConfigError';
  }
}

// The gateway's own token syntax (gateway/sessions/service.ts sessionTokenOf).
const SESSION_TOKEN = /^gw_sess_[A-Za-z0-9_-]{1,128}$/;
const LOOPBACK = /^(localhost|127(?:\.\d{1,3}){3}|\[::1\])$/;

/**
 * Checks a gateway URL and session token; throws ConfigError naming the first bad one by the
 * name its caller knows it by (an environment variable, an option).
 * @example checkGatewayConfig({ gatewayUrl: 'https://gw.example/', sessionToken: 'gw_sess_x' }).gatewayUrl
 *   // 'https://gw.example'
 */
export function checkGatewayConfig(
  raw: { gatewayUrl?: string; sessionToken?: string; logVkey?: string },
  names: { gatewayUrl: string; sessionToken: string; logVkey?: string } = {
    gatewayUrl: 'gatewayUrl',
    sessionToken: 'sessionToken',
  },
): GatewayConfig {
  const rawUrl = typeof raw.gatewayUrl === 'string' ? raw.gatewayUrl.trim() : '';
  if (!rawUrl)
    throw new ConfigError(
      names.gatewayUrl,
      "not set: the payment gateway's base URL, e.g. https://gateway.example.com",
    );
  let url: URL;
  try {
    url = new URL(rawUrl);
  } catch {
    throw new ConfigError(names.gatewayUrl, `not an absolute URL: '${rawUrl}'`);
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:')
    throw new ConfigError(names.gatewayUrl, `must be an https:// URL, got '${url.protocol}'`);
  // spec §7: the session token travels over TLS only; plain http stays on this machine.
  if (url.protocol === 'http:' && !LOOPBACK.test(url.hostname)) {
    throw new ConfigError(
      names.gatewayUrl,
      'must be https:// (the session token is a bearer credential); plain http is allowed only for localhost, ' +
        `got host '${url.hostname}'`,
    );
  }
  if (url.username || url.password || url.search || url.hash)
    throw new ConfigError(names.gatewayUrl, 'must be a base URL without credentials, query or fragment');

  const token = typeof raw.sessionToken === 'string' ? raw.sessionToken.trim() : '';
  if (!token)
    throw new ConfigError(
      names.sessionToken,
      'not set: the session token (gw_sess_…) the budget owner created for this agent (POST /sessions)',
    );
  if (!SESSION_TOKEN.test(token))
    throw new ConfigError(
      names.sessionToken,
      'not a session token: expected gw_sess_ followed by 1–128 characters of A–Z, a–z, 0–9, _ or -',
    );
  const vkey = typeof raw.logVkey === 'string' ? raw.logVkey.trim() : '';
  if (vkey) {
    let type: number | undefined;
    try {
      type = parseVerifierKey(vkey).type;
    } catch (e) {
      throw new ConfigError(names.logVkey ?? 'logVkey', `not a log verifier key: ${(e as Error).message}`);
    }
    if (type !== 1)
      throw new ConfigError(names.logVkey ?? 'logVkey', "a witness's key (type 0x04), not the log's (0x01)");
  }
  return { gatewayUrl: url.href.replace(/\/+$/, ''), sessionToken: token, ...(vkey ? { logVkey: vkey } : {}) };
}

/**
 * What the tools of one agent share: the SDK's agent-side client on one session (src/client).
 * @example toolContext(checkGatewayConfig({ gatewayUrl, sessionToken }), 'ai_')
 */
export function toolContext(
  config: GatewayConfig,
  keyPrefix: string,
  o: { fetch?: typeof fetch; logStore?: CheckpointStore } = {},
): ToolContext {
  const client = createGatewayClient({ baseUrl: config.gatewayUrl, fetch: o.fetch });
  const session = client.session(config.sessionToken);
  // One follower per agent: every check_log call extends the checkpoint the last one kept.
  const log = config.logVkey ? client.log(config.logVkey, o.logStore) : undefined;
  return { session, gatewayUrl: config.gatewayUrl, keyPrefix, ...(log ? { log } : {}) };
}
