/**
 * The CTL MCP server (Model Context Protocol): gives an AI agent the gateway session's tools
 * (agent-tools/tools: paid_fetch, session_status, list_receipts, delegate_budget, check_log), so a
 * model can pay for HTTP resources within the bounds its owner set, read where it stands and check
 * the gateway's log, without any payment code of its own.
 */
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { z } from 'zod';
import { toolContext } from '../agent-tools/config.js';
import { CTL_TOOLS } from '../agent-tools/tools/index.js';
import type { McpConfig } from './config.js';
import { toolResult } from './tool-result.js';
import { checkpointFile } from './checkpoint-file.js';

export const SERVER_INFO = { name: 'ctl-mcp', version: '0.1.0' };

/**
 * The server with its tools, not yet connected to a transport.
 * @example await createCtlMcpServer(mcpConfigFromEnv(process.env)).connect(new StdioServerTransport())
 */
export function createCtlMcpServer(config: McpConfig, o: { fetch?: typeof fetch } = {}): McpServer {
  const ctx = toolContext(config, 'mcp_', {
    fetch: o.fetch,
    ...(config.logStateFile ? { logStore: checkpointFile(config.logStateFile) } : {}),
  });
  const server = new McpServer(SERVER_INFO, {
    instructions:
      'Tools to pay for HTTP resources from a spending session a budget owner gave this agent (CTL payment gateway). ' +
      ('Use paid_fetch for any URL that may ask for payment; check session_status for the ' +
        'budget left and the allowed purposes. ') +
      'If a result says the session is paused, stop and ask the budget owner to approve (the result says how). ' +
      "check_log checks the gateway's transparency log against what this agent saw before; if it fails, stop paying.",
  });
  for (const t of CTL_TOOLS) {
    const output = z.object(t.output);
    server.registerTool(
      t.name,
      {
        title: t.title,
        description: t.description,
        inputSchema: t.input,
        outputSchema: t.output,
        annotations: t.annotations,
      },
      async (args: Record<string, unknown>) => toolResult(await t.run(args, ctx), output),
    );
  }
  return server;
}
