/**
 * `delegate_budget`: gives a sub-agent part of this session's budget as a child session
 * (PROTOCOL.md §14, the gateway's POST /sessions/{id}/children with this session's own token).
 * The child only narrows this session, and each of its payments also counts here, so what the
 * sub-agents spend together never passes what this agent may spend.
 */
import { z } from 'zod';
import { formatTimestamp, isPurpose, WINDOW_PERIODS } from '../../src/index.js';
import { describeRefusal, refusalOf, unreachableMessage } from '../refusals.js';
import { defineTool } from './tool.js';

const MINOR = /^[1-9][0-9]{0,17}$/;
// Far past any session's expiry (the child is refused past its parent's anyway), and a date JS can write.
const MAX_DURATION_SECONDS = 10 * 366 * 86_400;

const input = {
  amountMinor: z
    .string()
    .regex(MINOR, 'a positive whole number of minor units, e.g. "500"')
    .describe(
      'The sub-agent\'s whole budget in minor units (cents for USD), e.g. "500"; at most what this session has.',
    ),
  purposes: z
    .array(z.string().refine(isPurpose, 'a purpose is <domain>:<kind>, lower case, e.g. api:search'))
    .min(1)
    .optional()
    .describe("What the sub-agent may pay for: some of this session's purposes (default: all of them)."),
  expiresAt: z
    .string()
    .optional()
    .describe(
      "When the sub-agent's session ends, RFC 3339 UTC (e.g. 2030-01-01T00:00:00Z); no later than this session's.",
    ),
  durationSeconds: z
    .number()
    .int()
    .min(1)
    .max(MAX_DURATION_SECONDS)
    .optional()
    .describe('Instead of expiresAt: the session ends this many seconds from now.'),
  label: z.string().max(200).optional().describe('A name for the sub-agent\'s session, e.g. "hotel booking".'),
  windows: z
    .array(
      z.object({
        every: z.enum(WINDOW_PERIODS),
        maxAmountMinor: z.string().regex(MINOR),
        maxPayments: z.number().int().min(1).optional(),
      }),
    )
    .optional()
    .describe(
      'Budget windows for the sub-agent, e.g. [{"every":"P1D","maxAmountMinor":"100"}] for 1.00 a day. ' +
        "This session's windows always apply as well.",
    ),
};

const output = {
  outcome: z.enum(['delegated', 'refused', 'failed']),
  sessionToken: z
    .string()
    .optional()
    .describe("The sub-agent's session token (gw_sess_…): give it to the sub-agent only, e.g. as CTL_SESSION_TOKEN."),
  sessionId: z.string().optional(),
  parentId: z.string().optional().describe("This agent's session, whose budget the child's payments also count on."),
  depth: z.number().int().optional().describe('Levels below the root session.'),
  budgetMinor: z.string().optional(),
  expiresAt: z.string().optional(),
  code: z
    .string()
    .optional()
    .describe("A refusal's PROTOCOL.md §9 code, e.g. delegation_invalid (a field widens this session)."),
  message: z.string().optional(),
  httpStatus: z.number().int().optional(),
  nextStep: z.string().optional(),
};

export const delegateBudget = defineTool({
  name: 'delegate_budget',
  title: 'Give a sub-agent part of this budget',
  description:
    'Creates a child spending session for a sub-agent: a budget (minor units), purposes, expiry and optional ' +
    "per-period windows, all within this agent's own session. Returns the child session token to hand to the " +
    'sub-agent (e.g. as CTL_SESSION_TOKEN for its ctl-mcp); the sub-agent sees and spends only its own slice, ' +
    'and every payment it makes ' +
    "also counts against this session's budget. Costs nothing by itself.",
  input,
  output,
  annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: false },
  async run(args, { session, gatewayUrl }) {
    if (args.expiresAt !== undefined && args.durationSeconds !== undefined)
      return {
        value: { outcome: 'failed', code: 'malformed', message: 'give expiresAt or durationSeconds, not both' },
      };
    const expiresAt =
      args.durationSeconds !== undefined ? formatTimestamp(Date.now() + args.durationSeconds * 1000) : args.expiresAt;
    let child;
    try {
      child = await session.delegate({
        budget: { amount: args.amountMinor },
        ...(args.purposes ? { purposes: args.purposes } : {}),
        ...(expiresAt ? { expiresAt } : {}),
        ...(args.label ? { label: args.label } : {}),
        ...(args.windows ? { windows: args.windows } : {}),
      });
    } catch (e) {
      const r = refusalOf(e);
      if (!r)
        return {
          value: { outcome: 'failed', code: 'unavailable', message: unreachableMessage(e, gatewayUrl) },
          lead: `${unreachableMessage(e, gatewayUrl)} (unavailable)`,
        };
      const d = describeRefusal(r, gatewayUrl, session.sessionId);
      return { value: { ...d }, lead: `Refused by the gateway (${r.code}): ${r.message}. ${d.nextStep}` };
    }
    return {
      value: {
        outcome: 'delegated',
        sessionToken: child.sessionToken,
        sessionId: child.sessionId,
        parentId: child.parentId,
        depth: child.depth,
        budgetMinor: args.amountMinor,
        expiresAt: child.expiresAt,
        nextStep:
          'Give sessionToken to the sub-agent (e.g. CTL_SESSION_TOKEN for its ctl-mcp server) and to no one else; ' +
          'it can spend at most budgetMinor, and its session_status shows its own slice.',
      },
    };
  },
});
