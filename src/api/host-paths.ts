/**
 * `smol serve --host-paths DIR[,DIR…]`: which of the server's files a token may name. Without the flag a token
 * is a shell as the server's user (docs/api.md, "What a token can reach"). With it, every host path a request
 * names (volumes, an image or artifact path, secret files, pack output, key and artifact paths) must resolve,
 * symlinks followed, inside one of the roots, and secret env names are refused: they would hand the server's
 * own environment (cloud credentials, tokens) to whoever holds a token.
 */
import fs from 'node:fs';
import path from 'node:path';
import type { Smolfile } from '../smolfile/schema.js';
import { UserError } from '../errors/index.js';
import { ApiError } from './errors.js';
import { errorSchema } from './schemas/error.js';

/** The answer a route declares for a refused host path (OpenAPI). */
export const hostPathRefused = { 403: { description: 'a host path outside `smol serve --host-paths`, or secret env under it', schema: errorSchema } };

const refuse = (what: string, where: string, hint: string) => new ApiError(403, 'host_path_refused', what, { where, hint });

/** The path with every existing component resolved (a symlink anywhere on the way counts where it points). */
function resolved(p: string): string {
  let head = path.resolve(p);
  const tail: string[] = [];
  for (;;) {
    try {
      return path.join(fs.realpathSync(head), ...tail);
    } catch {
      const parent = path.dirname(head);
      if (parent === head) return path.join(head, ...tail);
      tail.unshift(path.basename(head));
      head = parent;
    }
  }
}

export class HostPathPolicy {
  /** null: unrestricted (the default); []: no host path at all (`--host-paths none`). */
  private constructor(readonly roots: readonly string[] | null) {}

  static unrestricted(): HostPathPolicy { return new HostPathPolicy(null); }

  /** The flag's value: comma-separated directories, or `none`. Each root must be an existing directory. */
  static parse(flag: string | undefined): HostPathPolicy {
    if (flag === undefined) return HostPathPolicy.unrestricted();
    if (flag.trim() === 'none') return new HostPathPolicy([]);
    const roots = flag.split(',').map((s) => s.trim()).filter(Boolean).map((r) => {
      const st = fs.statSync(r, { throwIfNoEntry: false });
      if (!st?.isDirectory()) throw new UserError(`--host-paths: ${r} is not a directory`, { where: '--host-paths', hint: 'Name existing directories, comma-separated, or `none`.' });
      return fs.realpathSync(r);
    });
    if (!roots.length) throw new UserError('--host-paths is empty', { where: '--host-paths', hint: 'Name existing directories, comma-separated, or `none`.' });
    return new HostPathPolicy(roots);
  }

  /** Refuses `p` unless it resolves inside a root; `where` names the request field. */
  check(p: string, where: string): void {
    if (!this.roots) return;
    const r = resolved(p);
    if (this.roots.some((root) => r === root || r.startsWith(root.endsWith('/') ? root : `${root}/`))) return;
    throw refuse(`host path ${p} is outside what this server allows`, where,
      this.roots.length ? `This server (smol serve --host-paths) allows host paths under ${this.roots.join(', ')} only.` : 'This server (smol serve --host-paths none) takes no host paths.');
  }

  /** An image is a host path when it names an existing file or directory; otherwise it is `default` or a registry reference. */
  checkImage(image: string | undefined, where: string): void {
    if (!this.roots || image === undefined || image === 'default') return;
    if (fs.existsSync(path.resolve(image))) this.check(image, where);
  }

  /** Every host path a machine spec names, and its secret env names. */
  checkSpec(spec: Smolfile, where: string): void {
    if (!this.roots) return;
    this.checkImage(spec.image, `${where}.image`);
    spec.volumes.forEach((v, i) => this.check(v.host, `${where}.volumes[${i}]`));
    for (const [name, file] of Object.entries(spec.secrets?.files ?? {})) this.check(file, `${where}.secrets.files.${name}`);
    if (spec.secrets?.env.length) {
      throw refuse(`secret env ${spec.secrets.env.join(', ')} would pass this server's environment to the guest`, `${where}.secrets.env`,
        'A server started with --host-paths passes none of its environment; send values in env instead.');
    }
  }
}
