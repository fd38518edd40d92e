/**
 * The log's note key: configured (a `PRIVATE+KEY+…` text, e.g. from the environment), or made
 * once per database and kept in `<prefix>_key`, sealed when the service seals its secrets. The
 * key's name is the log's origin (C2SP tlog-checkpoint); it never changes once made, since every
 * checkpoint and every client's pinned vkey names it.
 */
import type { SqlDatabase } from '../database.js';
import type { SecretSealer } from '../secrets/index.js';
import { generateNoteSigner, parseNoteSigner, type NoteSigner, type NoteKeyType, ED25519_NOTE } from './note-key.js';

export interface LogKeyOptions {
  /** The origin for a new log, e.g. `gateway.example.com/ctl-gateway-log`. */
  origin: string;
  /** A configured key (its name is the origin); else made once and stored. */
  skey?: string;
  sealer?: SecretSealer;
  /** Which key: the log's (0x01, default) or its witness's cosigning key (0x04, in `<prefix>_witness_key`). */
  type?: NoteKeyType;
}

export async function openLogKey(db: SqlDatabase, prefix: string, o: LogKeyOptions): Promise<NoteSigner> {
  const type = o.type ?? ED25519_NOTE;
  if (o.skey) {
    const s = await parseNoteSigner(o.skey);
    if (s.type !== type) throw new RangeError(`${prefix} key: expected a key of type ${type}, got ${s.type}`);
    return s;
  }
  const table = type === ED25519_NOTE ? `${prefix}_key` : `${prefix}_witness_key`;
  const context = `${table}:1`;
  const read = async () => {
    const r = await db.get<{ origin: string; skey: string }>(`SELECT origin, skey FROM ${table} WHERE id = 1`);
    if (!r) return undefined;
    return parseNoteSigner(o.sealer ? await o.sealer.open(r.skey, context) : r.skey);
  };
  const stored = await read();
  if (stored) return stored;
  const made = await generateNoteSigner(o.origin, type);
  const sealed = o.sealer ? await o.sealer.seal(made.skey, context) : made.skey;
  // Two instances starting together: the first row stays, and both use it.
  await db.run(`INSERT INTO ${table} (id, origin, skey) VALUES (1, ?, ?) ON CONFLICT DO NOTHING`, [o.origin, sealed]);
  return (await read())!;
}
