/**
 * The gateway's import arrows run one way (ARCHITECTURE.md): rails and 402 terms parsers know
 * nothing of the services that use them, and no store imports a service. A static scan of the
 * sources: every relative import (`from '…'`, `import('…')`) resolved to its file. That no two
 * rooms import each other is test/layout/rooms.test.ts.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { readdirSync, readFileSync, statSync, existsSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { repoRoot } from '../helpers/vectors.js';

const gateway = join(repoRoot, 'gateway');

function sources(dir: string, out: string[] = []): string[] {
  if (!existsSync(dir)) return out;
  for (const name of readdirSync(dir)) {
    if (name === 'node_modules') continue;
    const path = join(dir, name);
    if (statSync(path).isDirectory()) sources(path, out);
    else if (name.endsWith('.ts')) out.push(path);
  }
  return out;
}

/** The files under gateway/ that `file` imports, as paths relative to gateway/. */
export function importsOf(file: string): string[] {
  const text = readFileSync(file, 'utf8');
  const specs = [
    ...text.matchAll(/\bfrom\s+'([^']+)'/g),
    ...text.matchAll(/\bimport\s*\(\s*'([^']+)'\s*\)/g),
    ...text.matchAll(/^\s*import\s+'([^']+)'/gm),
  ].map((m) => m[1]!);
  return specs
    .filter((s) => s.startsWith('.'))
    .map((s) =>
      relative(gateway, resolve(dirname(file), s))
        .replace(/\.js$/, '.ts')
        .split('\\')
        .join('/'),
    );
}

const rel = (f: string) => relative(gateway, f).split('\\').join('/');
const under = (prefixes: string[]) => (f: string) => prefixes.some((p) => f === p || f.startsWith(p));

/** A store: the SQL of one room (a `store.ts`, a `store/` folder, and the few named here). */
const isStore = (f: string) =>
  /(^|\/)store(\.ts$|\/)/.test(f) || ['sessions/dispatches.ts', 'keys/bundle-sequence.ts', 'schema.ts'].includes(f);

/** A service: anything that uses rails, terms or stores to decide (and so may not be used by them). */
const inServiceRooms = under([
  'net/',
  'log/',
  'keys/',
  'sessions/',
  'owners/',
  'idempotency/',
  'console/stream.ts',
  'business-metrics.ts',
  'routes/',
  'payments/service.ts',
  'payments/reconcile.ts',
  'payments/signing.ts',
  'payments/schemes/x402/protocol.ts',
  'payments/schemes/mpp/protocol.ts',
  'payments/schemes/x-payment/protocol.ts',
  'app.ts',
  'app-outbound.ts',
  'app-log.ts',
  'app-services.ts',
  'app-http.ts',
  'app-deps.ts',
  'server.ts',
]);
const isService = (f: string) => inServiceRooms(f) && !isStore(f);

function violations(files: string[]): string[] {
  return files.flatMap((f) =>
    importsOf(f)
      .filter(isService)
      .map((t) => `${rel(f)} → ${t}`),
  );
}

test('the payments room exists: schemes, the EVM home, store, service', () => {
  for (const f of [
    'payments/service.ts',
    'payments/store/payments.ts',
    'payments/rail.ts',
    'payments/schemes/x402/terms.ts',
    'payments/evm/chain.ts',
  ])
    assert.ok(existsSync(join(gateway, f)), `gateway/${f}`);
});

/** A scheme's files other than its protocol (the terms parser, the rail, the store). */
const schemeParts = () =>
  sources(join(gateway, 'payments', 'schemes')).filter((f) => !f.endsWith('protocol.ts') && !f.endsWith('scheme.ts'));

test('rails and terms parsers import no service, route or payment protocol', () => {
  const files = [
    ...sources(join(gateway, 'payments', 'evm')),
    ...schemeParts(),
    join(gateway, 'payments', 'rail.ts'),
    join(gateway, 'payments', 'ledger.ts'),
  ];
  assert.ok(files.length >= 6, `found ${files.length} files`);
  assert.equal(violations(files), []);
});

test('no store imports a service', () => {
  const files = [
    ...sources(gateway).filter((f) => isStore(rel(f)) && !rel(f).startsWith('payments/')),
    ...sources(join(gateway, 'payments', 'store')),
    ...sources(join(gateway, 'payments', 'schemes')).filter((f) => f.endsWith('store.ts')),
  ];
  assert.ok(files.length >= 8, `found ${files.length} files`);
  assert.equal(violations(files), []);
});

test("a scheme's folder imports no other scheme's folder", () => {
  const files = sources(join(gateway, 'payments', 'schemes')).filter((f) => !f.endsWith('scheme.ts'));
  const folder = (f: string) => /^payments\/schemes\/([^/]+)\//.exec(f)?.[1];
  assert.ok(files.length >= 8, `found ${files.length} files`);
  const crossing = files.flatMap((f) =>
    importsOf(f)
      .filter((t) => folder(t) !== undefined && folder(t) !== folder(rel(f)))
      .map((t) => `${rel(f)} → ${t}`),
  );
  assert.equal(crossing, []);
});

test('the scan sees an upward import when there is one', () => {
  // The protocols pay through the service: the scan must report exactly that kind of arrow.
  const found = violations([join(gateway, 'payments', 'schemes', 'x-payment', 'protocol.ts')]);
  assert.ok(
    found.some((v) => v.endsWith('payments/service.ts')),
    found.join(', '),
  );
});

test.run();
