// The spec §3 table again, on a fresh PostgreSQL schema: the gateway's PostgreSQL path reserves
// and commits in single statements, so every refusal is checked there too.
process.env.CTL_GATEWAY_TEST_PG = '1';
await import('./states.test.js');
