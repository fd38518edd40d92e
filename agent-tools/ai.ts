/**
 * The gateway session's tools for the Vercel AI SDK (`ai`): pass them to `generateText` /
 * `streamText` and the model pays for HTTP resources within the bounds its budget owner set.
 * Same tools, arguments and answers as the MCP server (agent-tools/tools). A refusal (past the
 * ceiling, a purpose not allowed…) is the tool's output marked as an error for the model
 * (`error-json`), with its PROTOCOL.md §9 code and what to do next; a pause is an ordinary output
 * telling the model to ask the budget owner.
 *
 *   import { ctlAiTools } from 'ctl-agent-tools/ai';
 *   const tools = ctlAiTools({ gatewayUrl: 'https://gateway.example', sessionToken });
 *   await generateText({ model, tools, stopWhen: stepCountIs(5), prompt: 'Find the tide tables for Brest' });
 */
import { tool, type Tool } from 'ai';
import { z } from 'zod';
import { checkGatewayConfig, toolContext, type CtlToolsOptions } from './config.js';
import { isFailure, selectTools } from './tools/index.js';

/** What `toModelOutput` answers (the type `ai` does not export by name). */
type ToolResultOutput = Awaited<ReturnType<NonNullable<Tool['toModelOutput']>>>;
type JsonValue = Extract<ToolResultOutput, { type: 'json' }>['value'];

/**
 * The model's view of an answer: a refusal or failure as `error-json`, anything else as `json`.
 * @example ctlToolModelOutput({ outcome: 'refused', code: 'budget_exceeded' }).type // 'error-json'
 */
export function ctlToolModelOutput(output: unknown): ToolResultOutput {
  const value = output as JsonValue;
  return isFailure(output) ? { type: 'error-json', value } : { type: 'json', value };
}

/**
 * The tools by name, ready for `generateText({ tools })`; a bad URL or token throws a
 * ConfigError naming the option (never the token's value).
 * @example const { paid_fetch } = ctlAiTools({ gatewayUrl, sessionToken, tools: ['paid_fetch'] })
 */
export function ctlAiTools(
  options: CtlToolsOptions,
): Record<string, Tool<Record<string, unknown>, Record<string, unknown>>> {
  const ctx = toolContext(checkGatewayConfig(options), 'ai_', {
    fetch: options.fetch,
    logStore: options.logStore,
  });
  return Object.fromEntries(
    selectTools(options.tools).map((t) => [
      t.name,
      tool<Record<string, unknown>, Record<string, unknown>>({
        title: t.title,
        description: t.description,
        inputSchema: z.object(t.input),
        // The AI SDK hands `execute` the input its schema parsed (defaults applied).
        execute: async (args) => (await t.run(args, ctx)).value,
        toModelOutput: ({ output }) => ctlToolModelOutput(output),
      }),
    ]),
  );
}

export { ConfigError, type CtlToolsOptions } from './config.js';
export type { CtlToolName } from './tools/index.js';
