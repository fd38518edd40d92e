/** Sign-in with the owner API key: checked against the API, kept in this tab's session storage only. */
import { h } from '../dom.js';
import { api, ApiError, ownerKey } from '../api.js';
import { heading, type Page } from '../page.js';

export function signInPage(o: { notice?: string; signedIn: () => void }): Page {
  const input = h('input', {
    id: 'owner-key',
    name: 'ownerKey',
    type: 'password',
    autocomplete: 'off',
    spellcheck: 'false',
    required: true,
    'aria-describedby': 'owner-key-help owner-key-error',
  });
  const error = h('p', { id: 'owner-key-error', class: 'field-error', role: 'alert' });
  const button = h('button', { type: 'submit', class: 'btn primary' }, 'Sign in');
  const form = h(
    'form',
    { class: 'card narrow', novalidate: true },
    heading('Sign in'),
    o.notice ? h('p', { class: 'callout info', role: 'status' }, o.notice) : null,
    h(
      'div',
      { class: 'field' },
      h('label', { for: 'owner-key' }, 'Owner API key'),
      input,
      h(
        'p',
        { id: 'owner-key-help', class: 'help' },
        'The budget owner key (ctlk_…) from your gateway administrator. It is kept in this ' +
          'browser tab only and is forgotten when you sign out or close the tab.',
      ),
      error,
    ),
    h('div', { class: 'actions' }, button),
  );
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    const key = input.value.trim();
    error.textContent = '';
    input.removeAttribute('aria-invalid');
    if (!key) return fail('Enter the owner API key.');
    button.disabled = true;
    try {
      await api('GET', '/sessions?limit=1', undefined, key);
      ownerKey.set(key);
      o.signedIn();
    } catch (err) {
      const ae = err as ApiError;
      fail(
        ae.status === 401
          ? 'This key was not accepted: check that it is a current owner API key (it may have been revoked).'
          : ae.status === 403
            ? 'This is not an owner key (the admin key owns no sessions). Use a budget owner key.'
            : ae.message,
      );
    } finally {
      button.disabled = false;
    }
  });
  function fail(msg: string) {
    error.textContent = msg;
    input.setAttribute('aria-invalid', 'true');
    input.focus();
  }
  return { title: 'Sign in', el: h('div', { class: 'center' }, form) };
}
