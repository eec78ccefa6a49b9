/**
 * Bearer tokens for the gateway (`smol gateway --token-file F`): one token per line, blank lines and `#`
 * comments ignored. The file is read again on SIGHUP and when it changes, so a token is added or revoked
 * without a restart (and without dropping the requests in flight).
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import fs from 'node:fs';
import { ExitCode, UserError, ValidationError, type ErrorDetail } from '../../errors/index.js';

/** A bad file or value, named where it came from (a flag, FILE:LINE). */
const invalid = (message: string, d: ErrorDetail & { where: string }) => new ValidationError(message, [{ path: d.where, message }], d);
import { readCapped, sizeLabel } from '../../util/read-capped.js';

/** A token file past this is not a token file (thousands of tokens fit in a few KiB). */
export const TOKEN_FILE_MAX_BYTES = 1024 * 1024;
/** Shorter tokens can be guessed online; `openssl rand -hex 32` gives 64 characters. */
export const TOKEN_MIN_CHARS = 16;
/** What may appear in an HTTP header value without quoting: printable ASCII, no spaces. */
const TOKEN_CHARS = /^[\x21-\x7e]+$/;

/** The tokens in a token file's text; a malformed line is an error naming FILE:LINE. */
export function parseTokens(text: string, file: string): string[] {
  const tokens: string[] = [];
  text.split('\n').forEach((raw, i) => {
    const line = raw.trim();
    if (line === '' || line.startsWith('#')) return;
    const where = `${file}:${i + 1}`;
    if (!TOKEN_CHARS.test(line)) throw invalid(`a token in ${where} holds spaces or characters outside printable ASCII`, { where, hint: 'One token per line; generate one with `openssl rand -hex 32`.' });
    if (line.length < TOKEN_MIN_CHARS) throw invalid(`the token in ${where} is ${line.length} characters; at least ${TOKEN_MIN_CHARS} are needed`, { where, hint: 'Generate one with `openssl rand -hex 32`.' });
    tokens.push(line);
  });
  return tokens;
}

/** Reads and parses a token file; `what` is the flag that named it, for the error. */
export function readTokenFile(file: string, what: string): string[] {
  let text: string | null;
  try {
    text = readCapped(file, TOKEN_FILE_MAX_BYTES);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    throw new UserError(`cannot read the token file ${file}: ${code ?? (err as Error).message}`, { where: what, hint: 'Name a readable file with one token per line.', cause: err }, code === 'ENOENT' ? ExitCode.notFound : ExitCode.usage);
  }
  if (text === null) throw invalid(`the token file ${file} is over ${sizeLabel(TOKEN_FILE_MAX_BYTES)}`, { where: what });
  return parseTokens(text, file);
}

const hash = (s: string) => createHash('sha256').update(s, 'utf8').digest();

export type TokenCheck = 'ok' | 'missing' | 'wrong';

/** The accepted tokens, held as SHA-256 digests: every comparison is the same 32 bytes, whatever was sent. */
export class TokenSet {
  private digests: Buffer[];

  constructor(tokens: readonly string[], readonly file?: string) {
    this.digests = tokens.map(hash);
  }

  static load(file: string): TokenSet {
    const tokens = readTokenFile(file, '--token-file');
    if (tokens.length === 0) throw invalid(`the token file ${file} holds no tokens`, { where: '--token-file', hint: 'Add a line with a token (`openssl rand -hex 32 >> FILE`).' });
    return new TokenSet(tokens, file);
  }

  get size(): number { return this.digests.length; }

  /**
   * Reads the file again. An unreadable or malformed file keeps the tokens as they were (an editor
   * mid-save must not lock every worker out) and the error is returned for the log; an empty file
   * revokes every token.
   */
  reload(): Error | null {
    if (!this.file) return null;
    try {
      this.digests = readTokenFile(this.file, '--token-file').map(hash);
      return null;
    } catch (err) {
      return err as Error;
    }
  }

  /** Checks an Authorization header: "Bearer TOKEN", the scheme in any case. */
  check(authorization: string | undefined): TokenCheck {
    const m = /^bearer +(\S+) *$/i.exec(authorization ?? '');
    if (!m) return 'missing';
    const d = hash(m[1]);
    // no early exit: the time taken does not say which token, or whether any, came close
    let ok = false;
    for (const t of this.digests) ok = timingSafeEqual(t, d) || ok;
    return ok ? 'ok' : 'wrong';
  }
}

/**
 * Reloads `set` on SIGHUP and when its file changes (a stat every 2 s, which survives an editor replacing
 * the file, unlike an inotify watch on it). Returns the function that stops watching.
 */
export function watchTokens(set: TokenSet, log: (line: string) => void): () => void {
  if (!set.file) return () => undefined;
  const file = set.file;
  const reload = (why: string) => {
    const err = set.reload();
    log(err ? `gateway: ${why}: keeping the previous tokens, the file could not be used: ${err.message}` : `gateway: ${why}: ${set.size} token(s) from ${file}`);
  };
  const onHup = () => reload('SIGHUP');
  const onChange = (cur: fs.Stats, prev: fs.Stats) => {
    if (cur.mtimeMs !== prev.mtimeMs || cur.ino !== prev.ino || cur.size !== prev.size) reload(`${file} changed`);
  };
  process.on('SIGHUP', onHup);
  fs.watchFile(file, { interval: 2000, persistent: false }, onChange);
  return () => {
    process.off('SIGHUP', onHup);
    fs.unwatchFile(file, onChange);
  };
}
