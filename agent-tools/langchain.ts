/**
 * The gateway session's tools for LangChain.js (`@langchain/core`): bind them to a chat model
 * (`model.bindTools(tools)`) or give them to an agent, and the model pays for HTTP resources
 * within the bounds its budget owner set. Same tools, arguments and answers as the MCP server
 * (agent-tools/tools). Called with a tool call (as agents do), a tool answers a ToolMessage whose
 * content is the answer as JSON (after its lead sentence), whose `artifact` is the structured
 * answer, and whose `status` is `error` for a refusal or failure (past the ceiling, a purpose not
 * allowed…); a pause is a `success` telling the model to ask the budget owner.
 *
 *   import { ctlLangChainTools } from 'ctl-agent-tools/langchain';
 *   const tools = ctlLangChainTools({ gatewayUrl: 'https://gateway.example', sessionToken });
 *   const model = chatModel.bindTools(tools);
 */
import { ToolMessage } from '@langchain/core/messages';
import { tool, type DynamicStructuredTool } from '@langchain/core/tools';
import { z } from 'zod';
import { checkGatewayConfig, toolContext, type CtlToolsOptions } from './config.js';
import { isFailure, selectTools, type ToolAnswer } from './tools/index.js';

/** The text a model reads: the lead sentence, then the answer as JSON. */
const contentOf = (a: ToolAnswer) => (a.lead ? `${a.lead}\n` : '') + JSON.stringify(a.value);

/**
 * The tools, ready for `bindTools` or an agent; a bad URL or token throws a ConfigError naming
 * the option (never the token's value). Invoked with plain arguments (no tool call), a tool
 * answers the content string.
 * @example const tools = ctlLangChainTools({ gatewayUrl, sessionToken, tools: ['paid_fetch', 'session_status'] })
 */
export function ctlLangChainTools(options: CtlToolsOptions): DynamicStructuredTool[] {
  const ctx = toolContext(checkGatewayConfig(options), 'lc_', {
    fetch: options.fetch,
    logStore: options.logStore,
  });
  return selectTools(options.tools).map(
    (t) =>
      tool(
        async (args: Record<string, unknown>, config) => {
          const answer = await t.run(args, ctx);
          const call = config?.toolCall;
          if (!call?.id) return contentOf(answer);
          return new ToolMessage({
            tool_call_id: call.id,
            name: t.name,
            content: contentOf(answer),
            artifact: answer.value,
            status: isFailure(answer.value) ? 'error' : 'success',
          });
        },
        { name: t.name, description: t.description, schema: z.object(t.input) },
      ) as DynamicStructuredTool,
  );
}

export { ConfigError, type CtlToolsOptions } from './config.js';
export type { CtlToolName } from './tools/index.js';
