/**
 * The approve-continuation dialog of a paused session (spec §3 paused row): an optional raise, at
 * most the soft limit's step, sent with the session's one-use continuation token.
 */
import { h, formatMoney, toMinor, currencyDigits } from '../../dom.js';
import { continueSession, ApiError, type SessionView } from '../../api.js';
import { confirmDialog } from '../../dialog.js';

/** `reload`: the page's load, run whether the approval went through or not. */
export function approveDialog(s: SessionView, reload: () => Promise<void>) {
  const max = s.softLimit?.amount ?? '0';
  const input = h('input', {
    id: 'raise',
    name: 'raise',
    inputmode: 'decimal',
    autocomplete: 'off',
    'aria-describedby': 'raise-help',
  });
  confirmDialog({
    title: 'Approve continuation',
    body: [
      `“${s.label}” paused at ${formatMoney(s.budget.amount, s.budget.currency)}. Approving ` +
        'lets it spend again, up to a new ceiling. The approval can be used once.',
    ],
    fields: [
      h(
        'div',
        { class: 'field' },
        h('label', { for: 'raise' }, `Raise the ceiling by (${s.budget.currency}, optional)`),
        input,
        h(
          'p',
          { id: 'raise-help', class: 'help' },
          `At most ${formatMoney(max, s.budget.currency)}; empty raises by exactly that.`,
        ),
      ),
    ],
    confirm: 'Approve',
    async onConfirm() {
      const raise = raiseOf(input.value, s, max);
      if ('problem' in raise) return raise.problem;
      try {
        await continueSession(s.sessionId, s.continuationToken!, raise.amount);
      } catch (e) {
        if (e instanceof ApiError && e.code === 'continuation_invalid')
          return 'This approval was already used, or the session is no longer paused. The page has been refreshed.';
        throw e;
      } finally {
        await reload();
      }
    },
  });
}

/** The raise typed, in minor units (undefined when empty: the full step), or what is wrong with it. */
function raiseOf(text: string, s: SessionView, max: string): { amount?: string } | { problem: string } {
  if (!text.trim()) return { amount: undefined };
  const m = toMinor(text, currencyDigits(s.budget.currency));
  if ('error' in m) return { problem: `Raise: ${m.error}.` };
  if (BigInt(m.minor) === 0n || BigInt(m.minor) > BigInt(max))
    return {
      problem: `Raise: between ${formatMoney('1', s.budget.currency)} and ${formatMoney(max, s.budget.currency)}.`,
    };
  return { amount: m.minor };
}
