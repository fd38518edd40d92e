/** The revoke dialog: what the session has spent, and that revoking stops it for good (spec §3 DELETE row). */
import { h, formatMoney } from '../../dom.js';
import { revokeSession, type SessionView } from '../../api.js';
import { confirmDialog } from '../../dialog.js';

/** `reload`: the page's load, run once the revocation went through. */
export function revokeDialog(s: SessionView, reload: () => Promise<void>) {
  confirmDialog({
    title: 'Revoke this session?',
    body: [
      h(
        'p',
        null,
        h('strong', null, s.label || s.sessionId),
        ` has spent ${formatMoney(s.spentMinor, s.budget.currency)} ` +
          `of ${formatMoney(s.budget.amount, s.budget.currency)}.`,
      ),
      'Revoking stops it now, on every gateway instance: the agent’s next payment is refused, ' +
        'and verifiers see the grant revoked. This cannot be undone.',
    ],
    confirm: 'Revoke session',
    danger: true,
    async onConfirm() {
      await revokeSession(s.sessionId);
      await reload();
    },
  });
}
