/**
 * Safe extraction. Nothing from the archive chooses a path: each entry lands at `<dest>/<name>` where
 * the name passed the manifest's flat-name rule and the tar member matched it exactly (layout.ts), so
 * `..`, absolute paths and links are refused before the first byte is written. Each entry gets the
 * checks verify runs too (entry.ts): declared sizes enforced while decompressing (a lie or a bomb stops
 * at once), totals capped up front, a disk that would open a host file refused; everything goes to a temp
 * directory that is renamed into place only when every check passed.
 */
import type { KeyObject } from 'node:crypto';
import { mkdir, open, rename, rm, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { ArtifactError, ConflictError, ExitCode, mapFsError } from '../errors/index.js';
import { tempSibling } from './atomic.js';
import { checkCaps, checkEntry, defaultCaps, type ExtractCaps } from './entry.js';
import { FOOTER_SIGNED_SIZE } from './footer.js';
import { frameDigest, readAt, readLayout } from './layout.js';
import { hostArch, type ArtifactManifest } from './manifest.js';
import { loadPublicKey } from './sign.js';
import { checkSignature, describeSignature, openArtifact } from './verify.js';
import { SparseWriter } from './zstd.js';

export { defaultCaps, type ExtractCaps };

export interface ExtractOptions {
  caps?: Partial<ExtractCaps>;
  /** Require a signature by this key (PEM path or key object). */
  publicKey?: string | KeyObject;
  /** Extract a guest of another architecture anyway (e.g. to inspect its disk). */
  allowForeignArch?: boolean;
  onBytes?: (n: number) => void;
}

export interface ExtractResult {
  dir: string;
  manifest: ArtifactManifest;
  digest: string;
  /** Paths of the extracted entries by kind (disk, kernel, initrd, memory, device-state). */
  files: Partial<Record<ArtifactManifest['entries'][number]['kind'], string>>;
}

export function entryFiles(dir: string, m: ArtifactManifest): ExtractResult['files'] {
  return Object.fromEntries(m.entries.map((e) => [e.kind, path.join(dir, e.name)]));
}

export async function extractArtifact(file: string, destDir: string, opts: ExtractOptions = {}): Promise<ExtractResult> {
  const caps = { ...defaultCaps, ...opts.caps };
  const trusted = typeof opts.publicKey === 'string' ? await loadPublicKey(opts.publicKey) : opts.publicKey;
  const dest = path.resolve(destDir);
  const fh = await openArtifact(file);
  let tmp: string | undefined;
  try {
    const layout = await readLayout(fh, file);
    const m = layout.manifest;
    const arch = hostArch();
    if (m.guest.arch !== arch && !opts.allowForeignArch) {
      throw new ArtifactError(`artifact is for ${m.guest.arch} guests; this host is ${arch}`, { where: file }, ExitCode.prerequisite);
    }
    checkCaps(m, caps, file);
    // the signature binds the footer digest, which the entries are checked against below
    const signature = checkSignature(await readAt(fh, layout.footerOffset, FOOTER_SIGNED_SIZE), layout.footer, m, trusted);
    if (!signature.ok) {
      throw new ArtifactError(describeSignature(signature), { where: `${file}: signature` });
    }
    if (await stat(dest).catch(() => null)) throw new ConflictError(`${dest} already exists`, { where: dest });
    await mkdir(path.dirname(dest), { recursive: true });
    tmp = tempSibling(dest);
    await mkdir(tmp, { mode: 0o700 });

    const digests: Buffer[] = [];
    for (const mem of layout.members) {
      const e = mem.entry;
      const out = await open(path.join(tmp, e.name), 'wx', 0o600);
      let r: Awaited<ReturnType<typeof checkEntry>>;
      try {
        const w = new SparseWriter(out);
        r = await checkEntry(file, mem, { out: w, onBytes: opts.onBytes });
        if (!r.problem) await w.finish();
      } finally {
        await out.close();
      }
      if (r.problem) throw new ArtifactError(r.problem, { where: `${file}: ${e.name}` });
      digests.push(Buffer.from(r.stored, 'hex'));
    }
    if (!(await frameDigest(fh, layout.members, layout.footerOffset, digests)).equals(layout.footer.digest)) {
      throw new ArtifactError('artifact framing (tar headers or padding) was altered: the artifact digest does not match the footer', { where: `${file}: framing` });
    }
    await writeFile(path.join(tmp, 'manifest.json'), layout.manifestBytes, { mode: 0o600 });
    await rename(tmp, dest).catch((err: NodeJS.ErrnoException) => {
      if (err.code === 'ENOTEMPTY' || err.code === 'EEXIST') throw new ConflictError(`${dest} appeared while extracting`, { where: dest });
      throw err;
    });
    tmp = undefined;
    return { dir: dest, manifest: m, digest: layout.footer.digest.toString('hex'), files: entryFiles(dest, m) };
  } catch (err) {
    throw mapFsError(err, `extracting ${file}`);
  } finally {
    await fh.close();
    if (tmp) await rm(tmp, { recursive: true, force: true });
  }
}
