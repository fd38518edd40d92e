/**
 * A node down for an hour, on PostgreSQL (outage.ts): the same scenario as on SQLite.
 */
import { test } from 'uvu';
import { startAnvil, deployContract, type Anvil } from '../helpers/anvil.js';
import { pgAvailable } from '../service-kit/pg-fixture.js';
import { outageScenario } from './outage.js';

const pg = await pgAvailable();
let anvil: Anvil;
let contract: `0x${string}`;
test.before(async () => {
  if (!pg) return;
  anvil = await startAnvil();
  contract = await deployContract(anvil, 'CtlAnchor', [anvil.accounts[1]!.address]);
});
test.after(async () => {
  await anvil?.stop();
});

test('PostgreSQL: a node down for an hour, a restart, then the newest head anchored once', async () => {
  if (!pg) return console.log('SKIPPED: PostgreSQL is not reachable');
  await outageScenario(anvil, contract, 'postgres');
});

test.run();
