// Receipt storage again, on a fresh PostgreSQL schema: there the receipt and its grant are CTE members of the payment's
// one statement.
process.env.CTL_GATEWAY_TEST_PG = '1';
await import('./receipt-storage.test.js');
