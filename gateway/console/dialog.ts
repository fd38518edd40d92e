/**
 * Modal dialogs on the native <dialog> (focus kept inside, Escape cancels, focus returns to the
 * button that opened it). The safe choice has the initial focus.
 */
import { h } from './dom.js';

export function confirmDialog(o: {
  title: string;
  body: (Node | string)[];
  confirm: string;
  danger?: boolean;
  fields?: HTMLElement[];
  onConfirm: (form: HTMLFormElement) => Promise<string | void>;
}): void {
  const opener = document.activeElement as HTMLElement | null;
  const error = h('p', { class: 'field-error', role: 'alert' });
  const cancel = h('button', { type: 'button', class: 'btn', autofocus: true }, 'Cancel');
  const ok = h('button', { type: 'submit', class: o.danger ? 'btn danger' : 'btn primary' }, o.confirm);
  const form = h(
    'form',
    { method: 'dialog', novalidate: true },
    h('h2', { id: 'dialog-title' }, o.title),
    ...o.body.map((b) => (typeof b === 'string' ? h('p', null, b) : b)),
    ...(o.fields ?? []),
    error,
    h('div', { class: 'actions' }, cancel, ok),
  );
  const dlg = h('dialog', { 'aria-labelledby': 'dialog-title', class: o.danger ? 'danger' : '' }, form);
  const close = () => {
    dlg.close();
    dlg.remove();
    opener?.focus();
  };
  cancel.addEventListener('click', close);
  dlg.addEventListener('cancel', (e) => {
    e.preventDefault();
    close();
  });
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    ok.disabled = true;
    error.textContent = '';
    try {
      const problem = await o.onConfirm(form);
      if (problem) {
        error.textContent = problem;
        ok.disabled = false;
        return;
      }
      close();
    } catch (err) {
      error.textContent = (err as Error).message;
      ok.disabled = false;
    }
  });
  document.body.append(dlg);
  dlg.showModal();
  cancel.focus();
}
