/**
 * The CTL MCP server (Model Context Protocol): gives an AI agent three tools over one gateway
 * session, so a model can pay for HTTP resources within the bounds its owner set and read where
 * it stands, without any payment code of its own.
 */
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { createGatewayClient } from '../src/index.js';
import type { McpConfig } from './config.js';
import { registerPaidFetch } from './tools/paid-fetch.js';
import { registerSessionStatus } from './tools/session-status.js';
import { registerListReceipts } from './tools/list-receipts.js';

export const SERVER_INFO = { name: 'ctl-mcp', version: '0.1.0' };

/**
 * The server with its tools, not yet connected to a transport.
 * @example await createCtlMcpServer(mcpConfigFromEnv(process.env)).connect(new StdioServerTransport())
 */
export function createCtlMcpServer(config: McpConfig, o: { fetch?: typeof fetch } = {}): McpServer {
  const session = createGatewayClient({ baseUrl: config.gatewayUrl, fetch: o.fetch }).session(config.sessionToken);
  const server = new McpServer(SERVER_INFO, {
    instructions:
      'Tools to pay for HTTP resources from a spending session a budget owner gave this agent (CTL payment gateway). ' +
      'Use paid_fetch for any URL that may ask for payment; check session_status for the budget left and the allowed purposes. ' +
      'If a result says the session is paused, stop and ask the budget owner to approve (the result says how).',
  });
  registerPaidFetch(server, session, config.gatewayUrl);
  registerSessionStatus(server, session, config.gatewayUrl);
  registerListReceipts(server, session, config.gatewayUrl);
  return server;
}
