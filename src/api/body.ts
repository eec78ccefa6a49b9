/** Request bodies, read with a cap: a client cannot make the server hold more than the cap in memory. */
import type http from 'node:http';
import { ValidationError } from '../errors/index.js';
import { ApiError } from './errors.js';

/** JSON bodies are small requests (a machine's options, an exec's argv); files and tars stream instead. */
export const JSON_BODY_MAX_BYTES = 1024 * 1024;

export const tooLarge = (limit: number, what: string) =>
  new ApiError(413, 'payload_too_large', `the ${what} is over ${limit} bytes`, { hint: `Send at most ${limit} bytes${what === 'JSON body' ? '; files go through the files routes' : ''}.` }, 65);

/** The body as parsed JSON; undefined for an empty body. Over the cap: 413, after reading no further. */
export async function readJsonBody(req: http.IncomingMessage, limit = JSON_BODY_MAX_BYTES): Promise<unknown> {
  const declared = Number(req.headers['content-length'] ?? NaN);
  if (declared > limit) throw tooLarge(limit, 'JSON body');
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > limit) throw tooLarge(limit, 'JSON body');
    chunks.push(chunk);
  }
  if (size === 0) return undefined;
  const text = Buffer.concat(chunks).toString('utf8');
  let value: unknown;
  try {
    value = JSON.parse(text) as unknown;
  } catch (err) {
    const message = `not JSON: ${(err as Error).message}`;
    throw new ValidationError(`the body is ${message}`, [{ path: '(root)', message }], { where: 'body', hint: 'Send a JSON object with Content-Type: application/json.' });
  }
  const depth = nesting(value, JSON_BODY_MAX_DEPTH);
  if (depth > JSON_BODY_MAX_DEPTH) {
    const message = `nests arrays and objects more than ${JSON_BODY_MAX_DEPTH} deep`;
    throw new ValidationError(`the body ${message}`, [{ path: '(root)', message }], { where: 'body', hint: 'No request needs more than a few levels; send the value flat.' });
  }
  return value;
}

/**
 * No request is deeper than a Smolfile (a handful of levels). 1 MiB of `[` parses fine but is 500,000 levels,
 * and the recursive code after the parse (JSON.stringify of a smolfile object, YAML) overflows the stack on it.
 */
export const JSON_BODY_MAX_DEPTH = 64;

/** How deep `value` nests, counted without recursion and no further than just past `limit`. */
function nesting(value: unknown, limit: number): number {
  let deepest = 0;
  const stack: [unknown, number][] = [[value, 0]];
  while (stack.length) {
    const [v, d] = stack.pop()!;
    if (v === null || typeof v !== 'object') continue;
    if (d + 1 > limit) return d + 1;
    deepest = Math.max(deepest, d + 1);
    for (const child of Object.values(v)) stack.push([child, d + 1]);
  }
  return deepest;
}
