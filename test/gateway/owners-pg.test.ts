// The owner tests again on a fresh PostgreSQL schema: disabling an owner row-locks it against
// concurrent session creation there (SQLite's single writer does it for free).
process.env.CTL_GATEWAY_TEST_PG = '1';
await import('./owners.test.js');
