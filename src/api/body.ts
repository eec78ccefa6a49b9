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
  try {
    return JSON.parse(text) as unknown;
  } catch (err) {
    const message = `not JSON: ${(err as Error).message}`;
    throw new ValidationError(`the body is ${message}`, [{ path: '(root)', message }], { where: 'body', hint: 'Send a JSON object with Content-Type: application/json.' });
  }
}
