/**
 * `session_status`: the agent's own session as the gateway sees it (GET /session): state, spend,
 * what is left and until when, so an agent can check before it pays.
 */
import { z } from 'zod';
import { WINDOW_PERIODS } from '../../src/index.js';
import { ownerActionForPause, failedRead } from '../refusals.js';
import { defineTool } from './tool.js';

const output = {
  sessionId: z.string(),
  state: z
    .enum(['active', 'paused', 'revoked', 'expired'])
    .describe(
      'active: can pay. paused: at its soft limit, the budget owner must approve (ownerAction). ' +
        'revoked / expired: can no longer pay.',
    ),
  label: z.string().optional(),
  currency: z.string(),
  budgetMinor: z.string().describe('The spending ceiling, in minor units (cents for USD).'),
  spentMinor: z.string().describe('Paid so far, minor units.'),
  reservedMinor: z.string().describe('Held for payments in progress, minor units.'),
  remainingMinor: z.string().describe('What can still be paid: budget − spent − reserved, minor units.'),
  expiresAt: z.string().describe('ISO 8601 UTC instant after which the session can no longer pay.'),
  purposes: z
    .array(z.string())
    .describe('Purposes paid_fetch may be given (<domain>:<kind>; <domain>:* allows every kind).'),
  softLimitMinor: z.string().optional().describe('How much the owner adds each time they approve a paused session.'),
  merchantAllowlist: z
    .array(z.string())
    .optional()
    .describe('Merchant host patterns this session may pay (absent: any).'),
  merchantBlocklist: z.array(z.string()).optional().describe('Merchant host patterns this session may not pay.'),
  windows: z
    .array(
      z.object({
        every: z.string().describe(`The period (ISO 8601, an hour to a year): one of ${WINDOW_PERIODS.join(', ')}.`),
        limitMinor: z.string().describe('The most this window may pay, minor units.'),
        maxPayments: z.number().int().optional().describe('The most payments in this window.'),
        spentMinor: z.string(),
        reservedMinor: z.string(),
        remainingMinor: z.string().describe('What this window can still pay until it resets, minor units.'),
        payments: z.number().int(),
        resetsAt: z.string().describe('When the current window ends and its spend starts again from 0, ISO 8601 UTC.'),
      }),
    )
    .optional()
    .describe(
      'Budget windows (e.g. 10.00 a day): each limits what is paid per period on top of ' +
        'the whole budget. A payment must fit every window and the budget.',
    ),
  pausedWindow: z
    .object({ every: z.string(), resetsAt: z.string() })
    .optional()
    .describe('state paused at a window: which one, and when the session resumes by itself.'),
  parentId: z
    .string()
    .optional()
    .describe('This session is a share of that session (delegated to this agent); its payments also count there.'),
  ownerAction: z.string().optional().describe('state paused: what the budget owner must do.'),
};

const list = (v: unknown) => (Array.isArray(v) && v.length > 0 ? (v as string[]) : undefined);

export const sessionStatus = defineTool({
  name: 'session_status',
  title: 'Spending session status',
  description:
    "The state of this agent's spending session: active/paused/revoked/expired, budget, " +
    'amount spent and remaining (minor units, e.g. cents), each budget window (per hour/day/week/month) ' +
    'with its reset time, expiry and the purposes paid_fetch may use. Costs nothing.',
  input: {},
  output,
  annotations: { readOnlyHint: true, openWorldHint: false },
  async run(_args, { session, gatewayUrl }) {
    let v;
    try {
      v = await session.status();
    } catch (e) {
      return failedRead(e, gatewayUrl);
    }
    const allow = list(v.merchantAllowlist);
    const block = list(v.merchantBlocklist);
    const soft = (v.softLimit as { amount?: unknown } | undefined)?.amount;
    return {
      value: {
        sessionId: v.sessionId,
        state: v.state,
        ...(v.label ? { label: v.label } : {}),
        currency: v.budget.currency,
        budgetMinor: v.budget.amount,
        spentMinor: v.spentMinor,
        reservedMinor: v.reservedMinor,
        remainingMinor: v.remainingMinor,
        expiresAt: v.expiresAt,
        purposes: v.purposes,
        ...(typeof soft === 'string' ? { softLimitMinor: soft } : {}),
        ...(allow ? { merchantAllowlist: allow } : {}),
        ...(block ? { merchantBlocklist: block } : {}),
        ...(v.windows?.length
          ? {
              windows: v.windows.map((w) => ({
                every: w.every,
                limitMinor: w.maxAmountMinor,
                ...(w.maxPayments !== undefined ? { maxPayments: w.maxPayments } : {}),
                spentMinor: w.spentMinor,
                reservedMinor: w.reservedMinor,
                remainingMinor: w.remainingMinor,
                payments: w.payments,
                resetsAt: w.resetsAt,
              })),
            }
          : {}),
        ...(v.pausedWindow ? { pausedWindow: v.pausedWindow } : {}),
        ...(v.parentId ? { parentId: v.parentId } : {}),
        ...(v.state === 'paused' ? { ownerAction: ownerActionForPause(gatewayUrl, v.sessionId) } : {}),
      },
    };
  },
});
