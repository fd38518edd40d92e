/**
 * Reads GET /metrics as a Prometheus server would: the exposition content type, then the text
 * format parsed by an independent parser (parse-prometheus-text-format, prom2json's output).
 */
import * as assert from 'uvu/assert';
import parsePrometheusTextFormat, { type PromFamily } from 'parse-prometheus-text-format';

export interface Scrape {
  family(name: string, type: PromFamily['type']): PromFamily;
  /** The value of the sample of `name` whose labels include `labels` (exactly one must match). */
  value(name: string, labels?: Record<string, string>): number;
}

export async function scrape(base: string): Promise<Scrape> {
  const res = await fetch(`${base}/metrics`);
  assert.is(res.status, 200);
  assert.match(res.headers.get('content-type') ?? '', /^text\/plain; version=0\.0\.4/);
  const text = await res.text();
  const families = new Map(parsePrometheusTextFormat(text).map((f) => [f.name, f]));
  const family = (name: string, type: PromFamily['type']) => {
    const f = families.get(name);
    assert.ok(f, `family ${name} is exposed`);
    assert.is(f!.type, type, `${name} is a ${type}`);
    assert.ok(f!.help.length > 0, `${name} has HELP`);
    return f!;
  };
  return {
    family,
    value(name, labels = {}) {
      const f = families.get(name);
      assert.ok(f, `family ${name} is exposed`);
      const hits = f!.metrics.filter((m) => Object.entries(labels).every(([k, v]) => m.labels?.[k] === v));
      assert.is(hits.length, 1, `one ${name} sample with ${JSON.stringify(labels)}`);
      const h = hits[0]!;
      return Number(h.value ?? h.count);
    },
  };
}

/** Every label on every sample of `f` has a snake_case name and none carries an id or a URL. */
export function assertBoundedLabels(f: PromFamily): void {
  for (const m of f.metrics) {
    for (const [k, v] of Object.entries(m.labels ?? {})) {
      assert.match(k, /^[a-z][a-z0-9_]*$/, `${f.name}: label ${k} is snake_case`);
      assert.not.match(v, /:\/\/|^[A-Za-z0-9_-]{20,}$/, `${f.name}: ${k}="${v}" is not an id or URL`);
    }
  }
}
