/**
 * The MCP server's configuration: the gateway's address and the agent's session token, from the
 * environment an MCP client (Claude Desktop, an agent framework) starts the server with.
 */
import { checkGatewayConfig, type GatewayConfig } from '../agent-tools/config.js';

export { ConfigError } from '../agent-tools/config.js';
export type McpConfig = GatewayConfig;

/**
 * Reads CTL_GATEWAY_URL and CTL_SESSION_TOKEN; throws ConfigError naming the first bad one.
 * @example const { gatewayUrl, sessionToken } = mcpConfigFromEnv(process.env)
 */
export function mcpConfigFromEnv(env: Record<string, string | undefined>): McpConfig {
  return checkGatewayConfig(
    { gatewayUrl: env.CTL_GATEWAY_URL, sessionToken: env.CTL_SESSION_TOKEN },
    { gatewayUrl: 'CTL_GATEWAY_URL', sessionToken: 'CTL_SESSION_TOKEN' },
  );
}
