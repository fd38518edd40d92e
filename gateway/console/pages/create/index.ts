/**
 * Create a session (POST /sessions): amounts typed in major units and sent as minor-unit strings,
 * every problem named next to its field (the gateway's own `field: reason` messages land on the
 * field they name), and the session token shown once with a copy button.
 */
import { h, clear } from '../../dom.js';
import { createSession, ApiError } from '../../api.js';
import { heading, type Page } from '../../page.js';
import { fieldMaker, clearProblems, showProblems, fieldOf, type Field, type Problem } from './fields.js';
import { createForm } from './form.js';
import { checkForm, sessionConfig } from './validate.js';
import { createdView, type Created } from './created.js';

export function createPage(o: { created: (id: string, label: string) => void }): Page {
  const fields = new Map<string, Field>();
  const formError = h('div', { role: 'alert', class: 'form-error' });
  const submit = h('button', { type: 'submit', class: 'btn primary' }, 'Create session');
  const form = createForm(fieldMaker(fields), formError, submit);
  const el = h(
    'div',
    { class: 'page' },
    h(
      'div',
      { class: 'page-head' },
      h(
        'div',
        null,
        h('nav', { 'aria-label': 'Breadcrumb', class: 'crumbs' }, h('a', { href: '#/sessions' }, 'Sessions'), ' › new'),
        heading('New session'),
      ),
    ),
    form,
  );
  (form.querySelector('h1') ?? el.querySelector('h1'))?.setAttribute('id', 'create-h');

  const val = (n: string) => fields.get(n)!.input.value.trim();
  const show = (problems: Problem[]) => showProblems(fields, formError, problems);

  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    clearProblems(fields, formError);
    const { problems, values } = checkForm(val);
    if (problems.length) return show(problems);
    const config = sessionConfig(values, val);
    submit.disabled = true;
    try {
      const res = await createSession(config);
      showCreated(res, config);
    } catch (err) {
      const ae = err as ApiError;
      // The gateway names the field first ("budget.amount: …", "purposes[1]: …").
      const m = /^([A-Za-z.[\]0-9]+): (.*)$/.exec(ae.message);
      const name = m ? fieldOf(m[1]!, values.windows) : undefined;
      if (name && fields.has(name)) show([[name, m![2]!]]);
      else formError.textContent = `The gateway refused this session: ${ae.message} (${ae.code}).`;
    } finally {
      submit.disabled = false;
    }
  });

  function showCreated(res: Created, config: Record<string, unknown>) {
    clear(el, ...createdView(res, config));
    o.created(res.sessionId, String(config.label ?? ''));
    (el.querySelector('h1') as HTMLElement).focus();
  }

  return { title: 'New session', el };
}
