/**
 * The tables of one transparency log, all named `<prefix>_…` (a plain identifier, e.g. `gw_log`):
 *
 * - `<prefix>_pending`: entries written in the transaction of the record they log, not yet given
 *   an index (no lock taken: any number of writers at once);
 * - `<prefix>_entries`: entries by index, written once by the sequencer, never changed;
 * - `<prefix>_tiles`: tlog-tiles hashes; a full tile (width 256) is written once and never
 *   changed, the right-edge partial tile of each level grows;
 * - `<prefix>_tree`: the one row with the size and root hash the sequencer last integrated;
 * - `<prefix>_checkpoints`: every checkpoint signed, with the cosignatures witnesses returned;
 * - `<prefix>_key`: the log's note key and origin, made once (sealed when the service seals);
 * - `<prefix>_witnessed`, `<prefix>_split_views`: this service as a witness of other logs.
 *
 * Entries and full tiles refuse UPDATE and DELETE by trigger: a leaf never changes.
 */
import { checkTableName } from '../audit-log.js';
import type { Migration } from '../migrate.js';

export function transparencyLogMigrations(prefix: string): Migration[] {
  checkTableName(`${prefix}_split_views`);
  const p = prefix;
  const common = `
    CREATE TABLE ${p}_entries (idx BIGINT PRIMARY KEY, ref TEXT, entry TEXT NOT NULL);
    CREATE INDEX ${p}_entries_ref ON ${p}_entries (ref);
    CREATE TABLE ${p}_tree (id INTEGER PRIMARY KEY CHECK (id = 1), size BIGINT NOT NULL, root BYTES NOT NULL);
    CREATE TABLE ${p}_checkpoints (
      size BIGINT PRIMARY KEY, root BYTES NOT NULL, note TEXT NOT NULL, cosignatures TEXT NOT NULL DEFAULT '',
      witnessed INTEGER NOT NULL DEFAULT 0, at BIGINT NOT NULL);
    CREATE TABLE ${p}_key (id INTEGER PRIMARY KEY CHECK (id = 1), origin TEXT NOT NULL, skey TEXT NOT NULL);
    CREATE TABLE ${p}_witness_key (id INTEGER PRIMARY KEY CHECK (id = 1), origin TEXT NOT NULL, skey TEXT NOT NULL);
    CREATE TABLE ${p}_witness_state (witness TEXT PRIMARY KEY, size BIGINT NOT NULL);
    CREATE TABLE ${p}_witnessed (
      origin TEXT NOT NULL, size BIGINT NOT NULL, root BYTES NOT NULL, note TEXT NOT NULL, at BIGINT NOT NULL,
      PRIMARY KEY (origin, size));
    CREATE TABLE ${p}_witness_head (origin TEXT PRIMARY KEY, size BIGINT NOT NULL);
    CREATE TABLE ${p}_tiles (level INTEGER NOT NULL, n BIGINT NOT NULL, width INTEGER NOT NULL, hashes BYTES NOT NULL,
      PRIMARY KEY (level, n));`;
  return [
    {
      id: `service-kit-${p}-001`,
      sqlite: `${common.replace(/BYTES/g, 'BLOB')}
        CREATE TABLE ${p}_pending (id INTEGER PRIMARY KEY AUTOINCREMENT, ref TEXT, entry TEXT NOT NULL);
        CREATE TABLE ${p}_split_views (id INTEGER PRIMARY KEY AUTOINCREMENT, origin TEXT NOT NULL, size BIGINT NOT NULL,
          note_a TEXT NOT NULL, note_b TEXT NOT NULL, at BIGINT NOT NULL);
        INSERT INTO ${p}_tree (id, size, root)
          VALUES (1, 0, X'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855');
        CREATE TRIGGER ${p}_entries_fixed BEFORE UPDATE ON ${p}_entries BEGIN
          SELECT RAISE(ABORT, 'a log entry never changes'); END;
        CREATE TRIGGER ${p}_entries_kept BEFORE DELETE ON ${p}_entries BEGIN
          SELECT RAISE(ABORT, 'a log entry is never deleted'); END;
        CREATE TRIGGER ${p}_tiles_fixed BEFORE UPDATE ON ${p}_tiles WHEN OLD.width = 256 BEGIN
          SELECT RAISE(ABORT, 'a full tile never changes'); END;
        CREATE TRIGGER ${p}_tiles_kept BEFORE DELETE ON ${p}_tiles BEGIN
          SELECT RAISE(ABORT, 'a tile is never deleted'); END;`,
      postgres: `${common.replace(/BYTES/g, 'BYTEA')}
        CREATE TABLE ${p}_pending (id BIGSERIAL PRIMARY KEY, ref TEXT, entry TEXT NOT NULL);
        CREATE TABLE ${p}_split_views (id BIGSERIAL PRIMARY KEY, origin TEXT NOT NULL, size BIGINT NOT NULL,
          note_a TEXT NOT NULL, note_b TEXT NOT NULL, at BIGINT NOT NULL);
        INSERT INTO ${p}_tree (id, size, root)
          VALUES (1, 0, '\\xe3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855');
        CREATE FUNCTION ${p}_refuse() RETURNS trigger LANGUAGE plpgsql AS $$
          BEGIN RAISE EXCEPTION '% on %: log entries and full tiles never change', TG_OP, TG_TABLE_NAME; END $$;
        CREATE TRIGGER ${p}_entries_fixed BEFORE UPDATE OR DELETE ON ${p}_entries
          FOR EACH ROW EXECUTE FUNCTION ${p}_refuse();
        CREATE TRIGGER ${p}_tiles_fixed BEFORE UPDATE ON ${p}_tiles
          FOR EACH ROW WHEN (OLD.width = 256) EXECUTE FUNCTION ${p}_refuse();
        CREATE TRIGGER ${p}_tiles_kept BEFORE DELETE ON ${p}_tiles
          FOR EACH ROW EXECUTE FUNCTION ${p}_refuse();`,
    },
  ];
}
