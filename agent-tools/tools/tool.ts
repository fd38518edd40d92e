/**
 * One tool of a gateway session, written once and served by every adapter: the MCP server
 * (mcp/), the Vercel AI SDK (agent-tools/ai.ts) and LangChain.js (agent-tools/langchain.ts).
 * A definition is its name, words for the model, zod schemas of its input and output, and `run`,
 * which never throws: a refusal or a failure is an answer the model reads and acts on.
 */
import type { z } from 'zod';
import type { AgentSession, LogFollower } from '../../src/index.js';

/** What every tool of one agent works with. */
export interface ToolContext {
  session: AgentSession;
  /** The gateway's base URL, named in messages the budget owner acts on. */
  gatewayUrl: string;
  /** The start of the idempotency keys a tool makes (`mcp_`, `ai_`, `lc_`): whose call it was. */
  keyPrefix: string;
  /** The gateway's transparency log under its pinned key (`check_log`); absent without a log vkey. */
  log?: LogFollower;
}

/**
 * A tool's answer. `value` is the structured result (MCP `structuredContent`, the AI SDK's tool
 * output, LangChain's artifact); `lead` is one sentence that says what matters before the data,
 * for a reader that shows only the first text.
 */
export interface ToolAnswer {
  value: Record<string, unknown>;
  lead?: string;
}

/**
 * A refusal or failure: the adapters mark it as a tool error the model sees (MCP `isError`, the
 * AI SDK's `error-json` output, LangChain's `status: 'error'`). A pause is not one: it is a
 * question for the budget owner, answered as an ordinary result (spec §3 paused row).
 * Read from the value itself, so it holds for an answer that was stored and read back.
 * @example isFailure({ outcome: 'refused', code: 'budget_exceeded' }) // true
 */
export function isFailure(value: unknown): boolean {
  const outcome = (value as { outcome?: unknown } | null)?.outcome;
  return outcome === 'refused' || outcome === 'failed';
}

export interface ToolAnnotations {
  readOnlyHint?: boolean;
  destructiveHint?: boolean;
  idempotentHint?: boolean;
  openWorldHint?: boolean;
}

export interface CtlTool<In extends z.ZodRawShape = z.ZodRawShape> {
  name: string;
  title: string;
  description: string;
  input: In;
  /** The shape of a successful answer's value (a failure's value may have another shape). */
  output: z.ZodRawShape;
  annotations: ToolAnnotations;
  /** `args` as the input schema parsed them (defaults applied). */
  run(args: z.output<z.ZodObject<In>>, ctx: ToolContext): Promise<ToolAnswer>;
}

/** Keeps `In` inferred for `run` while the list of tools stays one type. */
export const defineTool = <In extends z.ZodRawShape>(t: CtlTool<In>): CtlTool<In> => t;
