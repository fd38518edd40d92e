/**
 * The MCP server's configuration: the gateway's address and the agent's session token, from the
 * environment an MCP client (Claude Desktop, an agent framework) starts the server with; and
 * optionally the gateway log's pinned key and where the last checkpoint seen is kept (check_log).
 */
import { ConfigError, checkGatewayConfig, type GatewayConfig } from '../agent-tools/config.js';

export { ConfigError } from '../agent-tools/config.js';
export type McpConfig = GatewayConfig & {
  /** `CTL_LOG_STATE_FILE`: the last checkpoint check_log accepted, kept across runs (default: memory). */
  logStateFile?: string;
};

/**
 * Reads CTL_GATEWAY_URL, CTL_SESSION_TOKEN, CTL_GATEWAY_LOG_VKEY and CTL_LOG_STATE_FILE; throws
 * ConfigError naming the first bad one.
 * @example const { gatewayUrl, sessionToken } = mcpConfigFromEnv(process.env)
 */
export function mcpConfigFromEnv(env: Record<string, string | undefined>): McpConfig {
  const config = checkGatewayConfig(
    { gatewayUrl: env.CTL_GATEWAY_URL, sessionToken: env.CTL_SESSION_TOKEN, logVkey: env.CTL_GATEWAY_LOG_VKEY },
    { gatewayUrl: 'CTL_GATEWAY_URL', sessionToken: 'CTL_SESSION_TOKEN', logVkey: 'CTL_GATEWAY_LOG_VKEY' },
  );
  const file = env.CTL_LOG_STATE_FILE?.trim();
  if (file && !config.logVkey)
    throw new ConfigError(
      'CTL_LOG_STATE_FILE',
      'set it together with CTL_GATEWAY_LOG_VKEY (the key it is checked under)',
    );
  return { ...config, ...(file ? { logStateFile: file } : {}) };
}
