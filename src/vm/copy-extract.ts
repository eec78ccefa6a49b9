/**
 * A guest's tar stream, written into a fresh host directory that nothing else writes to. node-tar parses
 * the stream; every write is ours (copy-writer.ts), so the rules are ours to keep (#31.1, #31.3):
 * - a path is components below the root: an absolute one or one with `..` fails the copy, as does one
 *   through a symlink or file the stream made (an honest tar never writes either);
 * - files are created new (O_EXCL|O_NOFOLLOW), so a name the stream used before, a hard link included,
 *   is replaced, never written through; hard links may only join two regular files of this stream;
 * - symlinks are made last, as text, and only when they resolve inside the tree (others: --keep-outside-links);
 * - setuid/setgid are dropped; device nodes and FIFOs are skipped unless --preserve-special; owners are the
 *   host user's (nothing is chowned); file contents count against --max-size, so a compressed stream
 *   (node-tar inflates gzip and zstd on sight) cannot expand past it.
 */
import { once } from 'node:events';
import { lstat } from 'node:fs/promises';
import { Parser, type ReadEntry } from 'tar';
import { ExitCode, SmolError, mapFsError } from '../errors/index.js';
import { refused, TreeWriter, type ExtractStats, type WriterOptions } from './copy-writer.js';
import { CP_TAR_META_MAX_BYTES } from './limits.js';

export type ExtractOptions = WriterOptions;
export type { ExtractStats };

/** A host error writing an entry (a name too long, a full disk) names the entry, not a bug in smol (70). */
function asCopyError(err: unknown, what: string): unknown {
  const mapped = mapFsError(err, `cp of ${what}`);
  if (mapped instanceof SmolError || !(mapped instanceof Error)) return mapped;
  return new SmolError(`cp failed: writing ${what} from the guest's archive: ${mapped.message}`, ExitCode.failure, { cause: mapped });
}

/**
 * Extracts `input` into `root` (an empty directory only this call writes to). On any failure the caller
 * removes `root`; this returns only after every write it started has ended, so that removal is final.
 */
export async function extractUntrusted(input: AsyncIterable<Buffer>, root: string, o: ExtractOptions): Promise<ExtractStats> {
  if (!(await lstat(root)).isDirectory()) throw new SmolError(`cp failed: ${root} is not a directory`);
  const w = new TreeWriter(root, o);
  const parser = new Parser({ strict: true, maxMetaEntrySize: CP_TAR_META_MAX_BYTES });
  let failure: unknown;
  let current: ReadEntry | undefined;
  let chain = Promise.resolve();
  parser.on('entry', (e: ReadEntry) => {
    chain = chain.then(async () => {
      if (failure !== undefined) return void e.resume();
      current = e;
      try {
        await w.entry(e);
      } catch (err) {
        failure ??= asCopyError(err, JSON.stringify(e.path));
        e.resume();
      } finally {
        current = undefined;
      }
    });
  });
  parser.on('error', (err: Error) => { failure ??= refused(`is not a valid tar stream (${err.message})`); });
  const ended = new Promise<void>((resolve, reject) => { parser.on('end', resolve); parser.on('error', reject); });
  ended.catch(() => undefined);
  try {
    for await (const chunk of input) {
      if (failure !== undefined) break;
      if (!parser.write(chunk)) await once(parser, 'drain');
    }
    if (failure === undefined) {
      parser.end();
      await ended;
    }
  } catch (err) {
    failure ??= err;
  } finally {
    // an entry waiting for bytes that will never come would hold the chain open
    if (failure !== undefined) current?.destroy();
    await chain;
  }
  if (failure !== undefined) throw failure instanceof Error ? failure : new Error(String(failure));
  try {
    await w.finish();
  } catch (err) {
    throw asCopyError(err, 'its symlinks and directory modes');
  }
  return w.stats;
}
