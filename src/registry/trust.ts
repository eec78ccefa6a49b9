/**
 * Which TLS certificates smol trusts for a registry, the way Docker does plus what Node users expect:
 *  - `$SMOL_HOME/certs.d/HOST[:PORT]/` and `/etc/docker/certs.d/HOST[:PORT]/` (Docker's layout): every
 *    `*.crt` is a CA added to the trusted roots; a `NAME.cert` + `NAME.key` pair is a client certificate;
 *  - `SSL_CERT_FILE` (as OpenSSL and Go read it): a CA bundle that replaces Node's built-in roots;
 *  - `NODE_EXTRA_CA_CERTS` (as Node reads it): CAs added to the roots.
 * Nothing configured: Node's defaults (no `ca` option at all).
 */
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import tls from 'node:tls';
import { ExitCode, SmolError } from '../errors/index.js';
import { smolHome } from '../util/paths.js';

export const DOCKER_CERTS_D = '/etc/docker/certs.d';

export const certsDirs = (host: string, env: NodeJS.ProcessEnv = process.env): string[] =>
  [path.join(smolHome(env), 'certs.d', host), path.join(DOCKER_CERTS_D, host)];

export interface Trust { options: tls.ConnectionOptions; sources: string[] }

const read = (f: string) => readFile(f, 'utf8').catch((e: NodeJS.ErrnoException) => {
  throw new SmolError(`cannot read the certificate file ${f}: ${e.code ?? e.message}`, ExitCode.prerequisite, { where: f, hint: 'Fix or remove the file.' });
});

/** A CA file: OpenSSL skips text that is not a PEM certificate without a word, so say it here. */
async function readPem(f: string): Promise<string> {
  const text = await read(f);
  if (!text.includes('-----BEGIN CERTIFICATE-----')) throw new SmolError(`${f} holds no PEM certificate (-----BEGIN CERTIFICATE-----)`, ExitCode.prerequisite, { where: f, hint: 'Convert it to PEM (openssl x509 -inform der -in FILE -out ca.crt), or remove it.' });
  return text;
}

/** TLS options for talking to these hosts (a registry and, for its tokens, its auth realm). */
export async function trustFor(hosts: string[], env: NodeJS.ProcessEnv = process.env): Promise<Trust> {
  const extra: string[] = [];
  const sources: string[] = [];
  const options: tls.ConnectionOptions = {};
  for (const host of hosts) {
    for (const dir of certsDirs(host, env)) {
      const names = (await readdir(dir).catch(() => [] as string[])).sort();
      for (const n of names.filter((x) => x.endsWith('.crt'))) { extra.push(await readPem(path.join(dir, n))); sources.push(path.join(dir, n)); }
      const cert = names.find((x) => x.endsWith('.cert'));
      if (cert && !options.cert) {
        const key = `${cert.slice(0, -5)}.key`;
        if (!names.includes(key)) throw new SmolError(`${path.join(dir, cert)} has no matching ${key}`, ExitCode.prerequisite, { where: dir, hint: 'A client certificate NAME.cert needs its key as NAME.key beside it (as for Docker).' });
        options.cert = await read(path.join(dir, cert));
        options.key = await read(path.join(dir, key));
        sources.push(path.join(dir, cert));
      }
    }
  }
  const bundle = env.SSL_CERT_FILE;
  const nodeExtra = env.NODE_EXTRA_CA_CERTS;
  // as Node does: an unreadable NODE_EXTRA_CA_CERTS is skipped (Node warns about it at start-up), not fatal
  const nodeExtraPem = nodeExtra ? await readPem(nodeExtra).catch(() => null) : null;
  if (nodeExtraPem) { extra.push(nodeExtraPem); sources.push(nodeExtra!); }
  if (bundle || extra.length) {
    const roots = bundle ? [await readPem(bundle)] : [...tls.rootCertificates];
    if (bundle) sources.unshift(bundle);
    options.ca = [...roots, ...extra];
  }
  if (!options.ca && !options.cert) return { options: {}, sources };
  // One context for every connection of the client: given `ca` itself, each connection re-parsed ~140
  // root certificates, and the https agent keyed its pool on their text (0.4 s per 100 MiB pull here).
  let secureContext: tls.SecureContext;
  try {
    secureContext = tls.createSecureContext(options);
  } catch (err) {
    throw new SmolError(`the certificates for ${hosts[0]} are unusable: ${(err as Error).message}`, ExitCode.prerequisite, { cause: err, where: sources.join(', '), hint: 'Each *.crt must be a PEM certificate, and NAME.key the key of NAME.cert.' });
  }
  return { options: { secureContext }, sources };
}

const UNTRUSTED = new Set([
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE', 'UNABLE_TO_GET_ISSUER_CERT', 'UNABLE_TO_GET_ISSUER_CERT_LOCALLY', 'SELF_SIGNED_CERT_IN_CHAIN',
  'DEPTH_ZERO_SELF_SIGNED_CERT', 'CERT_UNTRUSTED', 'CERT_SIGNATURE_FAILURE', 'CERT_HAS_EXPIRED', 'CERT_NOT_YET_VALID', 'ERR_TLS_CERT_ALTNAME_INVALID',
]);

/** Alerts a server sends when it wants a client certificate it did not get (or does not accept). */
const CLIENT_CERT_REFUSED = new Set(['ERR_SSL_SSLV3_ALERT_BAD_CERTIFICATE', 'ERR_SSL_TLSV13_ALERT_CERTIFICATE_REQUIRED', 'ERR_SSL_TLSV1_ALERT_UNKNOWN_CA', 'ERR_SSL_SSLV3_ALERT_CERTIFICATE_UNKNOWN']);

/** A certificate the client refused, or a server that refused ours: exit 69 with how to fix it; null for other errors. */
export function tlsTrustError(err: unknown, registry: string, what: string, env: NodeJS.ProcessEnv = process.env): SmolError | null {
  const code = (err as NodeJS.ErrnoException | undefined)?.code;
  if (code && CLIENT_CERT_REFUSED.has(code)) {
    return new SmolError(`${what} failed: ${registry} refused the TLS handshake: it wants a client certificate smol did not present or it does not accept (${code})`, ExitCode.prerequisite, {
      cause: err, where: registry,
      hint: `Put the client certificate and its key at ${path.join(certsDirs(registry, env)[0], 'client.cert')} and client.key (or in ${certsDirs(registry, env)[1]}), as for Docker.`,
    });
  }
  if (!code || !UNTRUSTED.has(code)) return null;
  return new SmolError(`${what} failed: the TLS certificate of ${registry} is not trusted (${code}: ${(err as Error).message})`, ExitCode.prerequisite, {
    cause: err, where: registry,
    hint: `Trust the registry's CA as Docker does: put it at ${path.join(certsDirs(registry, env)[0], 'ca.crt')} (or ${path.join(certsDirs(registry, env)[1], 'ca.crt')}), or name it in NODE_EXTRA_CA_CERTS; use --plain-http only for a registry that really serves HTTP.`,
  });
}

/**
 * Whether `host[:port]` answers a TLS handshake: how a loopback or listed-insecure registry is reached
 * (HTTPS when it speaks TLS, else HTTP, as Docker decides). A certificate smol does not trust still
 * counts as TLS: the request that follows fails with how to trust it, never silently falls back.
 */
export function speaksTls(hostPort: string, options: tls.ConnectionOptions, timeoutMs = 3000): Promise<boolean> {
  const u = new URL(`https://${hostPort}`);
  const host = u.hostname.replace(/^\[|\]$/g, '');
  return new Promise((resolve) => {
    const s = tls.connect({ ...options, host, port: Number(u.port || 443), servername: /^[\d.]+$|:/.test(host) ? undefined : host });
    const done = (v: boolean) => { s.destroy(); resolve(v); };
    s.setTimeout(timeoutMs, () => done(false));
    s.once('secureConnect', () => done(true));
    s.once('error', (e: NodeJS.ErrnoException) => done(UNTRUSTED.has(e.code ?? '')));
  });
}
