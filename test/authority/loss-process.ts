/**
 * An authority process for pg-connection-loss.test.ts (not a test file itself):
 * `node loss-process.js <database url> <schema>` starts an authority there, sends `{ url }`
 * over IPC and stops on 'stop'. A process of its own, so an unhandled error shows as its exit.
 */
import { startTestAuthority } from './harness.js';

const t = await startTestAuthority({ databaseUrl: process.argv[2], schema: process.argv[3] });
process.send!({ url: t.url });
process.on('message', async (m) => {
  if (m === 'stop') {
    await t.close();
    process.exit(0);
  }
});
