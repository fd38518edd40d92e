// The three weeks of ledger-growth.test.ts (test:slow): 5,000 payments where `npm test` makes 1,200.
process.env['CTL_TEST_LONG'] = '1';
await import('./ledger-growth.test.js');
