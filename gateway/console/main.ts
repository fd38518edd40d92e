/**
 * The budget owner's console (served by the gateway at /console): the shell, hash routing, sign
 * in / out, and the live feed that keeps the current page current.
 *
 *   #/sessions[?state=]            the list          #/new                   create a session
 *   #/sessions/{id}                a session         #/sessions/{id}/receipts/{rid}   a receipt
 *   #/log                          the transparency log and its witnesses
 *
 * A split view the gateway saw as a witness (two trees of one size signed by a log) is a banner
 * above every page, checked on each navigation and every 30 seconds.
 */
import { h, clear } from './dom.js';
import { logStatus, ownerKey, setUnauthorizedHandler } from './api.js';
import { connectLive, type LiveStatus } from './live.js';
import { defineComponents } from './components.js';
import type { Page } from './page.js';
import { signInPage } from './pages/sign-in.js';
import { sessionsPage, activity } from './pages/sessions/index.js';
import { sessionPage } from './pages/session/index.js';
import { receiptPage } from './pages/receipt.js';
import { createPage } from './pages/create/index.js';
import { logPage, splitViewBanner } from './pages/log.js';

defineComponents();
const top = document.getElementById('top')!;
const main = document.getElementById('main')!;
const labels = new Map<string, string>();
let page: Page | undefined;
let stopLive: (() => void) | undefined;
let notice: string | undefined;
const liveBadge = h('span', { class: 'live', role: 'status', 'aria-live': 'polite' });
const banner = h('div', { id: 'log-banner' });

/** Shows the split-view banner when the gateway reports one; a failed check changes nothing. */
async function checkLog() {
  if (!ownerKey.get()) return clear(banner);
  const s = await logStatus().catch(() => undefined);
  if (s) clear(banner, splitViewBanner(s));
}
setInterval(() => void checkLog(), 30_000);

function setLive(s: LiveStatus, detail?: string) {
  const text: Record<LiveStatus, string> = {
    connecting: 'Connecting…',
    live: 'Live',
    reconnecting: 'Reconnecting…',
    busy: 'Live updates paused',
  };
  liveBadge.className = `live live-${s}`;
  liveBadge.title =
    s === 'live'
      ? `Updates arrive as they happen (${detail === 'notify' ? 'every gateway instance' : 'this gateway instance'}).`
      : (detail ?? '');
  clear(liveBadge, h('span', { class: 'dot', 'aria-hidden': 'true' }), ` ${text[s]}`);
}

function signOut(message?: string) {
  stopLive?.();
  stopLive = undefined;
  ownerKey.clear();
  notice = message;
  activity.length = 0;
  location.hash = '#/';
  route();
}

function renderTop(signedIn: boolean) {
  const out = h('button', { type: 'button', class: 'btn ghost' }, 'Sign out');
  out.addEventListener('click', () => signOut('Signed out. The key was removed from this tab.'));
  const nav = (href: string, text: string, match: RegExp) =>
    h('a', { href, 'aria-current': match.test(location.hash || '#/') ? 'page' : undefined }, text);
  clear(
    top,
    h('a', { class: 'skip', href: '#main' }, 'Skip to content'),
    h(
      'div',
      { class: 'brand' },
      h('span', { class: 'logo', 'aria-hidden': 'true' }, 'CTL'),
      h('span', null, 'Budget console'),
    ),
    signedIn
      ? h(
          'nav',
          { 'aria-label': 'Main' },
          nav('#/sessions', 'Sessions', /^#\/(sessions.*)?$/),
          nav('#/new', 'New session', /^#\/new/),
          nav('#/log', 'Log', /^#\/log/),
        )
      : null,
    h('div', { class: 'spacer' }),
    signedIn ? liveBadge : null,
    signedIn ? out : null,
  );
  top.querySelector('.skip')!.addEventListener('click', (e) => {
    e.preventDefault();
    main.focus();
  });
}

function route() {
  page?.dispose?.();
  const key = ownerKey.get();
  renderTop(!!key);
  if (!key) {
    page = signInPage({
      notice,
      signedIn: () => {
        notice = undefined;
        startLive();
        location.hash = '#/sessions';
        route();
      },
    });
  } else {
    if (!stopLive) startLive();
    const [path, query] = (location.hash.replace(/^#/, '') || '/sessions').split('?');
    const parts = path!.split('/').filter(Boolean).map(decodeURIComponent);
    if (parts[0] === 'new') page = createPage({ created: (id, label) => labels.set(id, label) });
    else if (parts[0] === 'log') page = logPage();
    else if (parts[0] === 'sessions' && parts[1] && parts[2] === 'receipts' && parts[3])
      page = receiptPage(parts[1], parts[3], { labels });
    else if (parts[0] === 'sessions' && parts[1]) page = sessionPage(parts[1], { labels });
    else page = sessionsPage({ filter: new URLSearchParams(query ?? '').get('state') ?? undefined, labels });
  }
  document.title = `${page.title} · CTL console`;
  clear(main, banner, page.el);
  void checkLog();
  (main.querySelector('h1') as HTMLElement | null)?.focus();
}

function startLive() {
  const key = ownerKey.get();
  if (!key) return;
  setLive('connecting');
  stopLive = connectLive(key, {
    status: setLive,
    resync: () => void page?.refresh?.(),
    unauthorized: () =>
      signOut('Your API key is no longer accepted (revoked, or the owner was disabled). Sign in again.'),
    event: (e) => {
      activity.unshift(e);
      activity.length = Math.min(activity.length, 50);
      page?.onLive?.(e);
    },
  });
}

setUnauthorizedHandler((m) => signOut(m));
window.addEventListener('hashchange', () => {
  if (location.hash === '#main') return; // the skip link
  route();
});
route();
