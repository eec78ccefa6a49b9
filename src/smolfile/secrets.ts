/**
 * Secret declarations (docs/secrets.md): names only. A secret's value is read from the host each time it is
 * delivered (`smol run`, `machine start`… see vm/secrets.ts) and is never written to smol's state.
 */
import { z } from 'zod';

const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
/** A file name under /run/secrets in the guest: no slashes, not . or .. */
export const SECRET_FILE_NAME = /^(?!\.\.?$)[A-Za-z0-9_.-]{1,64}$/;
export const SECRETS_DIR = '/run/secrets';

export const secretsSchema = z.object({
  /** Host environment variables passed to the guest command's environment under the same name. */
  env: z.array(z.string().regex(ENV_NAME, 'secret env names are letters, digits and _, not starting with a digit')).default([]),
  /** NAME: host file; the guest sees it at /run/secrets/NAME (tmpfs, mode 0400). Relative paths are relative to the Smolfile. */
  files: z.record(z.string().regex(SECRET_FILE_NAME, 'secret file names are 1–64 letters, digits, ".", "_" or "-"'), z.string().min(1, 'host path must not be empty')).default({}),
}).strict();

export type SecretDecl = z.output<typeof secretsSchema>;
export const noSecrets = (): SecretDecl => ({ env: [], files: {} });
export const hasSecrets = (d: SecretDecl | undefined): boolean => !!d && (d.env.length > 0 || Object.keys(d.files).length > 0);

/** Declarations from `--secret-env NAME` and `--secret-file NAME=PATH`; paths absolute against `cwd`. */
export function secretFlagsSchema(cwd: string) {
  return z.object({
    secretEnv: z.array(z.string().regex(ENV_NAME, 'use the name of a host environment variable (letters, digits and _)')).optional(),
    secretFile: z.array(z.string().regex(/^[^=]+=.+$/, 'use NAME=PATH').superRefine((v, ctx) => {
      if (!SECRET_FILE_NAME.test(v.slice(0, v.indexOf('=')))) ctx.addIssue({ code: 'custom', message: `"${v.slice(0, v.indexOf('='))}": secret file names are 1–64 letters, digits, ".", "_" or "-"` });
    })).optional(),
  }).passthrough().transform((f): SecretDecl => ({
    env: [...new Set(f.secretEnv ?? [])],
    files: Object.fromEntries((f.secretFile ?? []).map((e) => [e.slice(0, e.indexOf('=')), resolveFrom(cwd, e.slice(e.indexOf('=') + 1))])),
  }));
}

const resolveFrom = (dir: string, p: string) => (p.startsWith('/') ? p : `${dir.replace(/\/$/, '')}/${p}`);

export function mergeSecrets(a: SecretDecl | undefined, b: SecretDecl | undefined): SecretDecl {
  return { env: [...new Set([...(a?.env ?? []), ...(b?.env ?? [])])], files: { ...a?.files, ...b?.files } };
}
