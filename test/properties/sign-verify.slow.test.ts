// The long search of sign-verify.test.ts (test:slow): `npm test` runs it at a quarter of its runs
// (fixtures.ts `runs`), this file with every run.
process.env['CTL_TEST_LONG'] = '1';
await import('./sign-verify.test.js');
