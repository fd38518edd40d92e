// The gateway is a house of rooms by role (ARCHITECTURE.md: sessions/, payments/, net/, egress/,
// console/, log/…), and no two rooms import each other, not even for a type: the arrows between
// rooms form a DAG, so a room can be read, tested and changed knowing only the rooms below it.
// The files at gateway/'s top (app.ts, server.ts, config.ts…) are one more room, the one that
// wires the others: a room importing it would be a cycle too.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { readFileSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { repoRoot } from '../helpers/vectors.js';
import { sources, specifiers } from '../helpers/imports.js';

const ROOT_ROOM = '(top)';

/** A file's room: its first folder under the service, or the top for a file directly in it. */
export function roomOf(path: string): string {
  const parts = path.split('/');
  return parts.length > 1 ? parts[0]! : ROOT_ROOM;
}

/** room → room it imports → the first import seen that makes that arrow (`file → specifier`). */
export type RoomGraph = Map<string, Map<string, string>>;

/**
 * The room graph of a service's files (`path` relative to the service folder, '/'-separated):
 * an arrow for every relative import that lands in another room of the same service.
 * @example roomGraph([{ path: 'a/x.ts', text: "import '../b/y.js';" }]) // a → b
 */
export function roomGraph(files: { path: string; text: string }[]): RoomGraph {
  const graph: RoomGraph = new Map();
  for (const f of files) {
    const from = roomOf(f.path);
    if (!graph.has(from)) graph.set(from, new Map());
    for (const spec of specifiers(f.text)) {
      if (!spec.startsWith('.')) continue;
      const target = join(dirname(f.path), spec).split(sep).join('/');
      if (target.startsWith('..')) continue; // outside the service: service-kit/, src/
      const to = roomOf(target);
      if (to !== from && !graph.get(from)!.has(to)) graph.get(from)!.set(to, `${f.path} → ${spec}`);
    }
  }
  return graph;
}

/**
 * A cycle of rooms, as the rooms in order with the first repeated at the end, or undefined.
 * @example findCycle(roomGraph(files)) // ['payments', 'sessions', 'payments']
 */
export function findCycle(graph: RoomGraph): string[] | undefined {
  const done = new Set<string>();
  const path: string[] = [];
  const visit = (room: string): string[] | undefined => {
    const at = path.indexOf(room);
    if (at >= 0) return [...path.slice(at), room];
    if (done.has(room)) return undefined;
    path.push(room);
    for (const next of [...(graph.get(room)?.keys() ?? [])].sort()) {
      const cycle = visit(next);
      if (cycle) return cycle;
    }
    path.pop();
    done.add(room);
    return undefined;
  };
  for (const room of [...graph.keys()].sort()) {
    const cycle = visit(room);
    if (cycle) return cycle;
  }
  return undefined;
}

/** The cycle with the import behind each arrow, for the failure message. */
export function describeCycle(graph: RoomGraph, cycle: string[]): string {
  const arrows = cycle.slice(1).map((to, i) => `  ${cycle[i]} → ${to}: ${graph.get(cycle[i]!)!.get(to)}`);
  return `rooms import each other: ${cycle.join(' → ')}\n${arrows.join('\n')}`;
}

function serviceFiles(folder: string) {
  const dir = join(repoRoot, folder);
  return sources(dir).map((file) => ({
    path: relative(dir, file).split(sep).join('/'),
    text: readFileSync(file, 'utf8'),
  }));
}

test('roomGraph and findCycle: a planted cycle is found and named, type-only imports included', () => {
  const dag = [
    { path: 'app.ts', text: "import { a } from './sessions/service.js';\nimport { b } from './payments/pay.js';" },
    { path: 'payments/pay.ts', text: "import type { S } from '../sessions/store.js';" },
    {
      path: 'sessions/store.ts',
      text: "import { x } from '../../service-kit/index.js';\nimport { y } from './keys.js';",
    },
  ];
  assert.is(findCycle(roomGraph(dag)), undefined);

  const typeOnly = [
    ...dag,
    { path: 'sessions/service.ts', text: "import type {\n  Counters,\n} from '../payments/store/counters.js';" },
  ];
  const g = roomGraph(typeOnly);
  const cycle = findCycle(g);
  assert.equal(cycle, ['payments', 'sessions', 'payments']);
  assert.match(describeCycle(g, cycle!), 'sessions → payments: sessions/service.ts → ../payments/store/counters.js');

  // Three rooms round, and a room that imports the top (which imports every room).
  const round = [
    { path: 'net/a.ts', text: "export { b } from '../log/b.js';" },
    { path: 'log/b.ts', text: "const c = await import('../keys/c.js');" },
    { path: 'keys/c.ts', text: "import '../net/a.js';" },
  ];
  assert.equal(findCycle(roomGraph(round)), ['keys', 'net', 'log', 'keys']);
  const upward = [...dag, { path: 'payments/x.ts', text: "import { cfg } from '../config.js';" }];
  assert.equal(findCycle(roomGraph(upward)), [ROOT_ROOM, 'payments', ROOT_ROOM]);
});

test('the scan reads the gateway as it is: the rooms and their arrows', () => {
  const graph = roomGraph(serviceFiles('gateway'));
  for (const room of ['sessions', 'payments', 'net', 'egress', 'console', 'log', 'routes'])
    assert.ok(graph.has(room), `gateway/${room}/ is a room`);
  // Arrows the gateway has by design, so an empty graph (a broken scan) cannot pass.
  assert.ok(graph.get('payments')?.has('sessions'), 'payments → sessions');
  assert.ok(graph.get('egress')?.has('net'), 'egress → net');
  assert.ok(graph.get('routes')?.has('net'), 'routes → net');
});

test('the cycle the rooms once had, planted back in the real gateway, is found', () => {
  // sessions/ read the window counters from the money store while payments/ reads sessions/.
  const files = serviceFiles('gateway').map((f) =>
    f.path === 'sessions/service.ts'
      ? { ...f, text: `import type { Row } from '../payments/store/counters.js';\n${f.text}` }
      : f,
  );
  const graph = roomGraph(files);
  const cycle = findCycle(graph);
  assert.ok(cycle && cycle.includes('sessions') && cycle.includes('payments'), String(cycle));
  assert.match(describeCycle(graph, cycle!), 'sessions/service.ts → ../payments/store/counters.js');
});

test('no two gateway rooms import each other, not even for a type', () => {
  const graph = roomGraph(serviceFiles('gateway'));
  const cycle = findCycle(graph);
  assert.ok(!cycle, cycle && describeCycle(graph, cycle));
});

test('net/, log/ and keys/ are the ground floor: they import no other room', () => {
  const graph = roomGraph(serviceFiles('gateway'));
  for (const room of ['net', 'log', 'keys']) {
    const up = [...(graph.get(room)?.entries() ?? [])].map(([to, why]) => `${room} → ${to}: ${why}`);
    assert.equal(up, [], up.join('\n'));
  }
});

test.run();
