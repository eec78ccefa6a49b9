/**
 * Image references as Docker and the OCI distribution spec write them:
 * `[registry[:port]/]repository[:tag][@sha256:digest]`. A first component with a dot or a port, or
 * `localhost`, names the registry; otherwise it is Docker Hub, where one-component names live under `library/`.
 */
import { UserError } from '../errors/index.js';

export const DOCKER_HUB = 'docker.io';
/** Docker Hub's API endpoint: `docker.io` is its name, not the host that serves /v2/. */
const DOCKER_HUB_API = 'registry-1.docker.io';

export interface ImageReference {
  /** As written in the reference, with Docker Hub's aliases folded into `docker.io`. */
  registry: string;
  repository: string;
  tag?: string;
  digest?: string;
  /** What /v2/<repo>/manifests/<reference> takes: the digest when given, else the tag (`latest` by default). */
  reference: string;
  /** Fully qualified, Docker style: `docker.io/library/alpine:latest`, `127.0.0.1:5000/x@sha256:…`. */
  canonical: string;
  /** host[:port] serving the API. */
  apiHost: string;
}

const COMPONENT = /^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*$/;
const TAG = /^[A-Za-z0-9_][A-Za-z0-9._-]{0,127}$/;
const DIGEST = /^sha256:[a-f0-9]{64}$/;
const HOST = /^(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?(?:\.[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)*|\[[0-9a-fA-F:]+\])(?::\d{1,5})?$/;

function invalid(ref: string, why: string): UserError {
  return new UserError(`invalid image reference ${JSON.stringify(ref)}: ${why}`, {
    where: ref,
    hint: 'Write [REGISTRY[:PORT]/]NAME[:TAG][@sha256:DIGEST], e.g. debian:bookworm, ghcr.io/org/app:v1, localhost:5000/x.',
  });
}

export function parseImageReference(ref: string): ImageReference {
  if (!ref || ref.length > 4096 || /\s/.test(ref)) throw invalid(ref, 'empty, too long or containing spaces');
  let rest = ref;
  let digest: string | undefined;
  const at = rest.indexOf('@');
  if (at >= 0) {
    digest = rest.slice(at + 1);
    rest = rest.slice(0, at);
    if (!DIGEST.test(digest)) throw invalid(ref, `${JSON.stringify(digest)} is not a sha256:<64 hex> digest`);
  }
  let tag: string | undefined;
  const colon = rest.lastIndexOf(':');
  if (colon > rest.lastIndexOf('/')) {
    tag = rest.slice(colon + 1);
    rest = rest.slice(0, colon);
    if (!TAG.test(tag)) throw invalid(ref, `tag ${JSON.stringify(tag)} is not valid`);
  }
  const slash = rest.indexOf('/');
  const first = slash >= 0 ? rest.slice(0, slash) : '';
  let registry = DOCKER_HUB;
  let repository = rest;
  if (slash >= 0 && (/[.:]/.test(first) || first === 'localhost' || first.startsWith('['))) {
    if (!HOST.test(first)) throw invalid(ref, `registry ${JSON.stringify(first)} is not a host[:port]`);
    registry = first;
    repository = rest.slice(slash + 1);
  }
  if (['index.docker.io', 'registry-1.docker.io', 'registry.hub.docker.com'].includes(registry)) registry = DOCKER_HUB;
  if (!repository) throw invalid(ref, 'no repository name');
  for (const c of repository.split('/')) {
    if (!COMPONENT.test(c)) throw invalid(ref, `repository component ${JSON.stringify(c)} must be lower-case letters, digits and separators`);
  }
  if (registry === DOCKER_HUB && !repository.includes('/')) repository = `library/${repository}`;
  if (!tag && !digest) tag = 'latest';
  const name = `${registry}/${repository}`;
  return {
    registry, repository, tag, digest,
    reference: digest ?? tag!,
    canonical: `${name}${tag ? `:${tag}` : ''}${digest ? `@${digest}` : ''}`,
    apiHost: registry === DOCKER_HUB ? DOCKER_HUB_API : registry,
  };
}

/** Loopback registries speak plain HTTP, as do hosts listed in SMOL_INSECURE_REGISTRIES (comma-separated host[:port]). */
export function isInsecureRegistry(host: string, env: NodeJS.ProcessEnv = process.env): boolean {
  if (/^(localhost|127(?:\.\d{1,3}){3}|\[::1\])(:\d+)?$/.test(host)) return true;
  const listed = (env.SMOL_INSECURE_REGISTRIES ?? '').split(',').map((s) => s.trim()).filter(Boolean);
  return listed.some((h) => h === host || h === host.replace(/:\d+$/, ''));
}

export function registryBaseUrl(host: string, opts: { plainHttp?: boolean; env?: NodeJS.ProcessEnv } = {}): string {
  return `${opts.plainHttp || isInsecureRegistry(host, opts.env) ? 'http' : 'https'}://${host}`;
}
