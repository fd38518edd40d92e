/**
 * `ctl log audit|monitor <url>`: a service's transparency log checked from outside, with only its
 * public endpoints and a pinned verifier key (docs/operations.md "Auditing the log").
 * audit: every tile recomputed, every receipt verified, every session's books balanced.
 * monitor: follows the checkpoints, each proven consistent with the last one kept.
 */
import { readFileSync } from 'node:fs';
import { guard, one, parseArgs, readText, required, UsageError } from './device/args.js';
import { auditLog, AuditError } from './log/audit.js';
import { pollLog } from './log/monitor.js';
import { parseStrictJson, type Jwks } from '../src/index.js';
import { parseVerifierKey } from '../src/entries/log.js';

const USAGE = `usage: ctl log audit <url> --vkey VKEY [--jwks FILE] [--json]
       ctl log monitor <url> --vkey VKEY --state FILE [--interval SECONDS] [--once]

  <url>       the service's base URL (it serves /log/checkpoint, /log/tile/…, /log/vkey)
  --vkey      the log's note verifier key (name+hash+key), or @FILE: pinned, never taken from the server
  --jwks      audit: the gateway's receipt keys (JWKS file); default its /.well-known/ctl-keys.json
  --json      audit: the report as JSON
  --state     monitor: the file keeping the last checkpoint that passed
  --interval  monitor: seconds between polls (default 10); --once polls once
exit 0 holds, 1 a discrepancy or an alarm, 2 usage`;

function pinnedKey(v: string): string {
  const key = (v.startsWith('@') ? readText(v.slice(1), '--vkey file') : v).trim();
  try {
    parseVerifierKey(key);
  } catch (e) {
    throw new UsageError(`--vkey: not a note verifier key: ${(e as Error).message}`);
  }
  return key;
}

export async function main(args: string[]): Promise<number> {
  return guard(USAGE, async () => {
    if (args.includes('--help') || args.includes('-h')) {
      console.log(USAGE);
      return 0;
    }
    const [sub, ...rest] = args;
    if (sub === undefined) throw new UsageError('audit or monitor?');
    const p = parseArgs(rest, { values: ['vkey', 'jwks', 'state', 'interval'], flags: ['json', 'once'] });
    if (sub.startsWith('-')) throw new UsageError(`unknown option ${sub}`);
    const [url, extra] = p.positionals;
    if (!url || extra !== undefined) throw new UsageError('one <url>');
    if (!/^https?:\/\//.test(url)) throw new UsageError(`<url>: http(s) URL expected, got ${url}`);
    const vkey = pinnedKey(required(p, 'vkey'));
    if (sub === 'audit') return audit(url, vkey, one(p, 'jwks'), p.flags.has('json'));
    if (sub === 'monitor') {
      const interval = Number(one(p, 'interval') ?? 10);
      if (!Number.isFinite(interval) || interval <= 0) throw new UsageError('--interval: seconds, a positive number');
      return monitor(url, vkey, required(p, 'state'), interval, p.flags.has('once'));
    }
    throw new UsageError(`unknown subcommand ${sub}`);
  });
}

async function audit(url: string, vkey: string, jwksFile: string | undefined, json: boolean): Promise<number> {
  const jwks = jwksFile ? (parseStrictJson(readFileSync(jwksFile, 'utf8')) as Jwks) : undefined;
  try {
    const r = await auditLog(url, { vkey, fetch, ...(jwks ? { jwks } : {}) });
    if (json)
      console.log(JSON.stringify({ ...r, checkpoint: r.checkpoint && { ...r.checkpoint, rootHash: undefined } }));
    else {
      for (const m of r.problems) console.error(`ctl log audit: ${m}`);
      const cp = r.checkpoint;
      console.log(
        `${r.problems.length ? 'FAILED' : 'ok'}: ${cp?.origin ?? url} size ${cp?.size ?? '?'}; ${r.entries} entries, ` +
          `${r.receipts} receipts in ${r.sessions} sessions${r.digests ? ` (${r.digests} by digest only)` : ''}; ` +
          `${r.problems.length} discrepancies`,
      );
    }
    return r.problems.length ? 1 : 0;
  } catch (e) {
    if (!(e instanceof AuditError) && !(e instanceof TypeError)) throw e;
    console.error(`ctl log audit: ${(e as Error).message}`);
    return 1;
  }
}

async function monitor(url: string, vkey: string, state: string, seconds: number, once: boolean): Promise<number> {
  for (;;) {
    const r = await pollLog(url, vkey, state, fetch);
    if (r.alarm) {
      console.error(`ctl log monitor: ALARM ${url}: ${r.alarm}`);
      return 1;
    }
    if (r.unreachable) console.error(`ctl log monitor: ${url}: ${r.unreachable} (retrying)`);
    else console.log(`${new Date().toISOString()} ${r.checkpoint!.origin} size ${r.checkpoint!.size} consistent`);
    if (once) return r.unreachable ? 1 : 0;
    await new Promise((res) => setTimeout(res, seconds * 1000));
  }
}
