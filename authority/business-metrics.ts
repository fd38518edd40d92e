/**
 * The authority's business metrics, on the app's own prom-client registry (never the global
 * one: several apps share a test process). Labels take closed sets only, never a grant id.
 */
import { Counter, type Registry } from 'prom-client';

export interface AuthorityMetrics {
  /** A grant stored: signed by the authority's key, or by an enrolled person (PROTOCOL.md §10). */
  grantIssued(signer: 'authority' | 'person'): void;
  /** A grant revoked now (not a repeat): by an API key, or by a revocation its issuer signed. */
  grantRevoked(via: 'api' | 'signed'): void;
  bundleIssued(): void;
  /** GET /revoke answered: revoked, not_revoked, or unknown (no such grant). */
  revocationCheck(answer: 'revoked' | 'not_revoked' | 'unknown'): void;
}

const byRegistry = new WeakMap<Registry, AuthorityMetrics>();

/**
 * Once per registry (an app given a shared Metrics reuses its counters). @example
 * authorityMetrics(metrics.registry).bundleIssued()
 */
export function authorityMetrics(registry: Registry): AuthorityMetrics {
  const known = byRegistry.get(registry);
  if (known) return known;
  const registers = [registry];
  const grants = new Counter({
    name: 'ctl_authority_grants_issued_total',
    help: 'Policy grants issued, by signer (authority, person)',
    labelNames: ['signer'] as const,
    registers,
  });
  const revocations = new Counter({
    name: 'ctl_authority_revocations_total',
    help: 'Grants revoked, by how (api: an API key, signed: a revocation signed by the grant issuer)',
    labelNames: ['via'] as const,
    registers,
  });
  const bundles = new Counter({ name: 'ctl_authority_bundles_issued_total', help: 'Trust Bundles issued', registers });
  const checks = new Counter({
    name: 'ctl_authority_revocation_checks_total',
    help: 'Revocation checks (GET /revoke), by answer (revoked, not_revoked, unknown)',
    labelNames: ['answer'] as const,
    registers,
  });
  for (const signer of ['authority', 'person']) grants.inc({ signer }, 0);
  for (const via of ['api', 'signed']) revocations.inc({ via }, 0);
  for (const answer of ['revoked', 'not_revoked', 'unknown']) checks.inc({ answer }, 0);
  const m: AuthorityMetrics = {
    grantIssued: (signer) => grants.inc({ signer }),
    grantRevoked: (via) => revocations.inc({ via }),
    bundleIssued: () => bundles.inc(),
    revocationCheck: (answer) => checks.inc({ answer }),
  };
  byRegistry.set(registry, m);
  return m;
}
