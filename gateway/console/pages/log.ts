/**
 * The gateway's transparency log, from `/log/status`: the latest checkpoint
 * (size, root, when it was signed) with its signature checked in this browser against the log's
 * vkey (the SDK's `ctl/log`), the witnesses' cosignatures on it, and the split views this gateway
 * saw as a witness of other logs.
 */
import { h, clear, formatTime } from '../dom.js';
import { logStatus, type LogStatus } from '../api.js';
import { heading, errorBox, type Page } from '../page.js';
import { verifyCheckpoint } from '../../../src/entries/log.js';

const row = (t: string, v: Node | string, mono = false) =>
  h('div', null, h('dt', null, t), h('dd', { class: mono ? 'mono wrap' : '' }, v));

/** The split-view banner (also shown above every page, main.ts), or nothing. */
export function splitViewBanner(s: LogStatus | undefined): HTMLElement | null {
  if (!s?.splitView) return null;
  const views = s.witness?.splitViews ?? [];
  return h(
    'div',
    { class: 'callout stop', role: 'alert', id: 'split-view-banner' },
    h('strong', null, 'Split view detected. '),
    `A log this gateway witnesses signed two different trees of one size (` +
      views.map((v) => `${v.origin} at size ${v.size}, ${formatTime(v.detectedAt)}`).join('; ') +
      '). Its operator showed different histories to different parties: stop trusting it until explained.',
  );
}

export function logPage(): Page {
  const el = h('div', { class: 'page' }, h('p', { class: 'muted' }, 'Loading…'));
  async function load() {
    let s: LogStatus;
    try {
      s = await logStatus();
    } catch (e) {
      return clear(el, heading('Transparency log'), errorBox(e));
    }
    const c = s.checkpoint;
    const verdict = h('p', { id: 'log-verdict', class: 'muted' }, c ? 'Checking the signature…' : '');
    if (c)
      void verifyCheckpoint(c.note, [s.vkey]).then((r) => {
        verdict.textContent = r.valid
          ? '✓ Signed by the log’s key (checked in this browser).'
          : `✗ The signature does not verify: ${r.error.message}`;
        verdict.className = r.valid ? 'check ok' : 'check bad';
      });
    const cosigned = c?.cosignatures ?? [];
    clear(
      el,
      heading('Transparency log'),
      splitViewBanner(s),
      h(
        'section',
        { class: 'card', 'aria-labelledby': 'cp-h' },
        h('h2', { id: 'cp-h' }, 'Latest checkpoint'),
        c
          ? h(
              'dl',
              { class: 'bounds', id: 'log-checkpoint' },
              row('Entries', String(c.size)),
              row('Root hash', c.root, true),
              row('Signed at', formatTime(c.signedAt)),
              row('Log', s.origin, true),
            )
          : h('p', { class: 'muted' }, 'No checkpoint yet: the log signs one within a second of its first entry.'),
        verdict,
        h(
          'p',
          { class: 'help' },
          'Every receipt and session change is an entry of this log (C2SP tlog-tiles at /log/). ' +
            'Anyone can check it without trusting the gateway: ctl log audit ' +
            `${location.origin} --vkey '${s.vkey}'.`,
        ),
      ),
      h(
        'section',
        { class: 'card', 'aria-labelledby': 'wit-h' },
        h('h2', { id: 'wit-h' }, 'Witness cosignatures'),
        cosigned.length
          ? h(
              'ul',
              { id: 'log-cosignatures' },
              ...cosigned.map((x) =>
                h('li', null, h('span', { class: 'mono' }, x.name), ` vouched at ${formatTime(x.time)}`),
              ),
            )
          : h('p', { class: 'muted', id: 'log-cosignatures' }, 'No witness cosigned this checkpoint.'),
        s.witnesses.length ? h('h3', null, 'Witnesses this log asks') : null,
        s.witnesses.length
          ? h(
              'ul',
              { class: 'muted' },
              ...s.witnesses.map((w) =>
                h(
                  'li',
                  null,
                  h('span', { class: 'mono' }, w.name),
                  w.lastError
                    ? `: last attempt failed (${w.lastError})`
                    : w.cosignedSize !== null
                      ? `: cosigned up to ${w.cosignedSize} entries`
                      : ': not asked yet',
                ),
              ),
            )
          : null,
      ),
    );
  }
  void load();
  return { title: 'Transparency log', el, refresh: load };
}
