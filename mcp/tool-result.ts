/**
 * One shape for every tool's answer (MCP "Structured content"): `structuredContent` for clients
 * that read it, the same JSON as text for those that do not, and an optional first sentence that
 * says what matters before the data.
 */
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';

/**
 * @example toolResult({ outcome: 'refused', code: 'budget_exceeded' }, { isError: true, lead: 'Refused: budget_exceeded' })
 */
export function toolResult(
  structured: Record<string, unknown>,
  o: { isError?: boolean; lead?: string } = {},
): CallToolResult {
  const content: CallToolResult['content'] = [];
  if (o.lead) content.push({ type: 'text', text: o.lead });
  content.push({ type: 'text', text: JSON.stringify(structured) });
  return { content, structuredContent: structured, ...(o.isError ? { isError: true } : {}) };
}
