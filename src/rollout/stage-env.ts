/**
 * What a process stage must not inherit from its worker. A stage runs code from a manifest, which anyone who can
 * submit a rollout writes; the worker's environment holds what lets it act on the whole deployment: the ledger
 * URL (often with its password), the gateway token, object-store and PostgreSQL credentials. A stage gets its
 * manifest's `env`, smol's own variables and the rest of the worker's environment (PATH, HOME, a virtualenv…),
 * never these. VM stages start from an empty environment already.
 */
const WITHHELD = [/^SMOL_LEDGER$/, /^SMOL_GATEWAY_TOKEN$/, /^SMOL_BLOBS$/, /^PG[A-Z]+$/, /^AWS_/, /^DATABASE_URL$/];

export const withheldFromStages = (name: string): boolean => WITHHELD.some((re) => re.test(name));

/** The overrides that remove the withheld variables of `env` (undefined values unset a variable in a child). */
export function withholdSecrets(env: NodeJS.ProcessEnv = process.env): Record<string, undefined> {
  return Object.fromEntries(Object.keys(env).filter(withheldFromStages).map((k) => [k, undefined]));
}
