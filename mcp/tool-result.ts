/**
 * One shape for every tool's answer (MCP "Structured content"): `structuredContent` for clients
 * that read it, the same JSON as text for those that do not, and the answer's lead first.
 */
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import type { z } from 'zod';
import { isFailure, type ToolAnswer } from '../agent-tools/tools/index.js';

/**
 * `answer` as an MCP result. A client validates `structuredContent` against the tool's output
 * schema even on an error, so a value of another shape (a read tool's refusal) travels as text only.
 * @example toolResult({ value: { outcome: 'refused', code: 'budget_exceeded' }, lead: 'Refused: …' }, output)
 */
export function toolResult(answer: ToolAnswer, output: z.ZodTypeAny): CallToolResult {
  const content: CallToolResult['content'] = [];
  if (answer.lead) content.push({ type: 'text', text: answer.lead });
  content.push({ type: 'text', text: JSON.stringify(answer.value) });
  const fits = output.safeParse(answer.value).success;
  return {
    content,
    ...(fits ? { structuredContent: answer.value } : {}),
    ...(isFailure(answer.value) ? { isError: true } : {}),
  };
}
