/**
 * Where ctl-mcp keeps the last log checkpoint it accepted (`CTL_LOG_STATE_FILE`): the note's text,
 * replaced atomically (write, then rename), so a new run of the server still refuses a log that
 * rewrote what an earlier run saw.
 */
import { mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import type { CheckpointStore } from '../src/index.js';

/** @example createCtlMcpServer(config, { logStore: checkpointFile('/var/lib/agent/gateway-log.txt') }) */
export function checkpointFile(path: string): CheckpointStore {
  return {
    get() {
      try {
        return readFileSync(path, 'utf8');
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
        throw e;
      }
    },
    set(note) {
      mkdirSync(dirname(path), { recursive: true });
      const tmp = `${path}.${process.pid}.tmp`;
      writeFileSync(tmp, note, { mode: 0o600 });
      renameSync(tmp, path);
    },
  };
}
