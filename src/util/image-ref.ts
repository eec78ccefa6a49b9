/** Image references as Docker and OCI write them, told apart from paths. */
import fs from 'node:fs';
import path from 'node:path';

/** [registry[:port]/]repo[/more][:tag][@sha256:digest], lower-case repository components. */
const REFERENCE = /^(?:[a-z0-9][a-z0-9.-]*(?::\d+)?\/)?[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:\/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*(?::[\w][\w.-]{0,127})?(?:@sha256:[a-f0-9]{64})?$/;

export function isTarballRef(ref: string): boolean {
  return /\.(tar|tar\.gz|tgz|tar\.zst)$/i.test(ref);
}

/** True for `debian:bookworm`, `localhost:5000/x`, `alpine@sha256:…`; false for `./dir`, `/abs`, `img.tar`. */
export function looksLikeImageReference(ref: string): boolean {
  return !isTarballRef(ref) && !/^[./~]/.test(ref) && REFERENCE.test(ref);
}

/**
 * An image as written in a Smolfile (relative to its directory) or a flag (relative to the cwd): a path
 * becomes absolute; a registry reference (`debian:bookworm`) stays as written unless a path of that name
 * exists there.
 */
export function resolveImageRef(ref: string, baseDir: string | undefined): string {
  if (ref === 'default' || !baseDir || path.isAbsolute(ref)) return ref;
  const abs = path.resolve(baseDir, ref);
  return looksLikeImageReference(ref) && !fs.existsSync(abs) ? ref : abs;
}
