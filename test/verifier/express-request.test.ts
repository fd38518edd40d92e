// Express users get `req.ctl` typed from the declarations the package ships (dist/types): the
// fixture express-request.types.ts, importing `ctl` by the package's own name as a user would,
// must typecheck, and the same fixture reading a field that does not exist must not (so the
// check cannot pass because `req` is `any`). Needs `npm run build` (it builds dist/types).
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { repoRoot } from '../helpers/vectors.js';

const fixture = readFileSync(join(repoRoot, 'test', 'verifier', 'express-request.types.ts'), 'utf8').replace(
  "'../../src/index.js'",
  "'ctl'",
);
const dir = join(repoRoot, 'build', 'types-check', 'express-request');
const tsc = join(repoRoot, 'node_modules', '.bin', 'tsc');

function typecheck(source: string): { status: number | null; output: string } {
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'app.ts'), source);
  writeFileSync(
    join(dir, 'tsconfig.json'),
    JSON.stringify({
      compilerOptions: {
        target: 'ES2022',
        module: 'NodeNext',
        moduleResolution: 'NodeNext',
        strict: true,
        noEmit: true,
        skipLibCheck: true,
        esModuleInterop: true,
        types: ['node'],
      },
      files: ['app.ts'],
    }),
  );
  const r = spawnSync(tsc, ['-p', join(dir, 'tsconfig.json')], { cwd: repoRoot, encoding: 'utf8' });
  return { status: r.status, output: `${r.stdout}${r.stderr}` };
}

test('req.ctl is typed for Express users from the shipped declarations', () => {
  assert.ok(existsSync(join(repoRoot, 'dist', 'types', 'index.d.ts')), 'dist/types is missing: run `npm run build`');
  assert.ok(fixture.includes("from 'ctl'"));
  const ok = typecheck(fixture);
  assert.is(ok.status, 0, ok.output);
  const wrong = typecheck(fixture.replace('req.ctl.grant.grantId', 'req.ctl.grant.notAField'));
  assert.is.not(wrong.status, 0, 'a field that does not exist must not typecheck');
  assert.match(wrong.output, /notAField/);
});

test.after(() => rmSync(dir, { recursive: true, force: true }));
test.run();
