/**
 * `ctl-mcp`: the MCP server on stdio, configured by CTL_GATEWAY_URL and CTL_SESSION_TOKEN.
 * stdout is the protocol's: every message of our own goes to stderr.
 */
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { ConfigError, mcpConfigFromEnv } from './config.js';
import { createCtlMcpServer } from './server.js';

let config;
try {
  config = mcpConfigFromEnv(process.env);
} catch (e) {
  if (!(e instanceof ConfigError)) throw e;
  process.stderr.write(`ctl-mcp: ${e.message}\n`);
  process.exit(2);
}
const server = createCtlMcpServer(config);
await server.connect(new StdioServerTransport());
// The client closing stdin is the end of the session.
process.stdin.on('end', () => void server.close().finally(() => process.exit(0)));
