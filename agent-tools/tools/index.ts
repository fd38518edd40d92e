/**
 * Every tool of a gateway session, in the order adapters offer them. A new tool is one more
 * definition file and one more entry here: MCP, the AI SDK and LangChain then all serve it.
 */
import type { CtlTool } from './tool.js';
import { paidFetch } from './paid-fetch.js';
import { sessionStatus } from './session-status.js';
import { listReceipts } from './list-receipts.js';
import { delegateBudget } from './delegate-budget.js';
import { checkLog } from './check-log.js';

export const CTL_TOOLS: readonly CtlTool[] = [paidFetch, sessionStatus, listReceipts, delegateBudget, checkLog];

export type CtlToolName = 'paid_fetch' | 'session_status' | 'list_receipts' | 'delegate_budget' | 'check_log';

/**
 * The tools named in `only` (all of them without it); an unknown name is a RangeError naming it.
 * @example selectTools(['paid_fetch']).map((t) => t.name) // ['paid_fetch']
 */
export function selectTools(only?: readonly string[]): CtlTool[] {
  if (only === undefined) return [...CTL_TOOLS];
  const known = new Map(CTL_TOOLS.map((t) => [t.name, t]));
  return only.map((name) => {
    const t = known.get(name);
    if (!t) throw new RangeError(`tools: no tool '${name}' (known: ${[...known.keys()].join(', ')})`);
    return t;
  });
}

export { isFailure, type CtlTool, type ToolAnswer, type ToolContext } from './tool.js';
