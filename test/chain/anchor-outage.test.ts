/**
 * A node down for an hour, on SQLite (outage.ts): backoff across a restart, one stalled event,
 * the heads folded into one, anchored once the node is back.
 */
import { test } from 'uvu';
import { startAnvil, deployContract, type Anvil } from '../helpers/anvil.js';
import { outageScenario } from './outage.js';

let anvil: Anvil;
let contract: `0x${string}`;
test.before(async () => {
  anvil = await startAnvil();
  contract = await deployContract(anvil, 'CtlAnchor', [anvil.accounts[1]!.address]);
});
test.after(() => anvil.stop());

test('SQLite: a node down for an hour, a restart, then the newest head anchored once', () =>
  outageScenario(anvil, contract, 'sqlite'));

test.run();
