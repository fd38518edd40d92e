/**
 * The MCP server's configuration: the gateway's address and the agent's session token, from the
 * environment an MCP client (Claude Desktop, an agent framework) starts the server with.
 */

export interface McpConfig {
  /** The gateway's base URL, without a trailing slash. */
  gatewayUrl: string;
  /** `gw_sess_…`, the bearer credential of one session (spec §2.2). */
  sessionToken: string;
}

/** A variable missing or malformed: the message names it and never repeats a secret's value. */
export class ConfigError extends Error {
  constructor(
    readonly variable: string,
    message: string,
  ) {
    super(`${variable}: ${message}`);
    this.name = 'ConfigError';
  }
}

// The gateway's own token syntax (gateway/services/sessions.ts sessionTokenOf).
const SESSION_TOKEN = /^gw_sess_[A-Za-z0-9_-]{1,128}$/;
const LOOPBACK = /^(localhost|127(?:\.\d{1,3}){3}|\[::1\])$/;

/**
 * Reads CTL_GATEWAY_URL and CTL_SESSION_TOKEN; throws ConfigError naming the first bad one.
 * @example const { gatewayUrl, sessionToken } = mcpConfigFromEnv(process.env)
 */
export function mcpConfigFromEnv(env: Record<string, string | undefined>): McpConfig {
  const rawUrl = env.CTL_GATEWAY_URL?.trim();
  if (!rawUrl)
    throw new ConfigError(
      'CTL_GATEWAY_URL',
      "not set: the payment gateway's base URL, e.g. https://gateway.example.com",
    );
  let url: URL;
  try {
    url = new URL(rawUrl);
  } catch {
    throw new ConfigError('CTL_GATEWAY_URL', `not an absolute URL: '${rawUrl}'`);
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:')
    throw new ConfigError('CTL_GATEWAY_URL', `must be an https:// URL, got '${url.protocol}'`);
  // spec §7: the session token travels over TLS only; plain http stays on this machine.
  if (url.protocol === 'http:' && !LOOPBACK.test(url.hostname)) {
    throw new ConfigError(
      'CTL_GATEWAY_URL',
      `must be https:// (the session token is a bearer credential); plain http is allowed only for localhost, got host '${url.hostname}'`,
    );
  }
  if (url.username || url.password || url.search || url.hash)
    throw new ConfigError('CTL_GATEWAY_URL', 'must be a base URL without credentials, query or fragment');

  const token = env.CTL_SESSION_TOKEN?.trim();
  if (!token)
    throw new ConfigError(
      'CTL_SESSION_TOKEN',
      'not set: the session token (gw_sess_…) the budget owner created for this agent (POST /sessions)',
    );
  if (!SESSION_TOKEN.test(token))
    throw new ConfigError(
      'CTL_SESSION_TOKEN',
      'not a session token: expected gw_sess_ followed by 1–128 characters of A–Z, a–z, 0–9, _ or -',
    );
  return { gatewayUrl: url.href.replace(/\/+$/, ''), sessionToken: token };
}
