/**
 * The create form's fields: each a label, an input, its help and its error line, kept by name so a
 * problem (the form's own or the gateway's `field: reason`) lands under the field it names.
 */
import { h } from '../../dom.js';

export interface Field {
  name: string;
  label: string;
  help?: string;
  input: HTMLInputElement | HTMLTextAreaElement;
  error: HTMLElement;
}

/** A field's name and what is wrong with it ("required"). */
export type Problem = [string, string];

export type FieldMaker = (
  name: string,
  label: string,
  attrs: Record<string, string>,
  help?: string,
  multiline?: boolean,
) => HTMLElement;

/** Makes fields and records each in `fields`; the input is described by its help and its error. */
export function fieldMaker(fields: Map<string, Field>): FieldMaker {
  return (name, label, attrs, help, multiline = false) => {
    const id = `f-${name}`;
    const input = multiline ? h('textarea', { id, name, rows: '2', ...attrs }) : h('input', { id, name, ...attrs });
    const error = h('p', { id: `${id}-error`, class: 'field-error' });
    input.setAttribute('aria-describedby', `${id}-help ${id}-error`);
    fields.set(name, { name, label, help, input, error });
    return h(
      'div',
      { class: 'field' },
      h('label', { for: id }, label),
      input,
      h('p', { id: `${id}-help`, class: 'help' }, help ?? ''),
      error,
    );
  };
}

/** Clears every problem shown, before the form is checked again. */
export function clearProblems(fields: Map<string, Field>, formError: HTMLElement) {
  for (const f of fields.values()) {
    f.error.textContent = '';
    f.input.removeAttribute('aria-invalid');
  }
  formError.textContent = '';
}

/** Each problem under its field (the first for a field wins), a summary on top, the focus on the first. */
export function showProblems(fields: Map<string, Field>, formError: HTMLElement, problems: Problem[]) {
  for (const [name, msg] of problems) {
    const f = fields.get(name)!;
    if (f.error.textContent) continue;
    f.error.textContent = `${f.label}: ${msg}.`;
    f.input.setAttribute('aria-invalid', 'true');
  }
  formError.textContent =
    `Please correct ${problems.length === 1 ? 'one field' : `${new Set(problems.map((p) => p[0])).size} fields`}: ` +
    'each problem is named under its field.';
  fields.get(problems[0]![0])!.input.focus();
}

/** The form field a gateway message names ("budget.amount" → amount; "windows[1]…" → the second window sent). */
export function fieldOf(path: string, windows: Record<string, unknown>[]): string | undefined {
  const w = /^windows\[(\d+)\](\.maxPayments)?/.exec(path);
  if (w) return `${w[2] ? 'windowPayments' : 'window'}-${windows[Number(w[1])]?.every}`;
  const root = path.replace(/\[\d+\]$/, '');
  const map: Record<string, string> = {
    'budget.amount': 'amount',
    'budget.currency': 'currency',
    budget: 'amount',
    purposes: 'purposes',
    expiresAt: 'expiresIn',
    label: 'label',
    'softLimit.amount': 'softLimit',
    softLimit: 'softLimit',
    'velocity.maxPaymentsPerHour': 'maxPaymentsPerHour',
    'velocity.maxAmountPerMerchantPerDay': 'maxAmountPerMerchantPerDay',
    merchantAllowlist: 'merchantAllowlist',
    merchantBlocklist: 'merchantBlocklist',
    thresholds: 'thresholds',
    webhookUrl: 'webhookUrl',
    windowsStart: 'windowsStart',
  };
  return map[root];
}
