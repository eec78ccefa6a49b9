/**
 * The route table: each route names its method, path template, zod schemas (params, query, body, responses)
 * and a handler. The router validates before the handler runs (a failing request changes nothing), and
 * openapi.ts documents the same table, so code and document cannot drift apart.
 */
import type http from 'node:http';
import type { Duplex } from 'node:stream';
import { z } from 'zod';
import { ValidationError } from '../errors/index.js';
import { ApiError } from './errors.js';
import { readJsonBody } from './body.js';
import type { ApiContext } from './context.js';

export type Method = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';

export interface ResponseDoc {
  description: string;
  /** A JSON body's schema (registered in schemas/registry.ts); absent for other content types. */
  schema?: z.ZodType;
  /** application/json unless said (text/event-stream, application/octet-stream, text/plain). */
  contentType?: string;
}

/** A JSON answer; a handler that wrote the response itself (a stream, raw bytes) returns nothing. */
export interface Reply { status?: number; body: unknown; headers?: Record<string, string> }

export interface Request<P, Q, B> {
  params: P;
  query: Q;
  body: B;
  req: http.IncomingMessage;
  res: http.ServerResponse;
  /** Aborted when the client goes away before the answer is complete. */
  signal: AbortSignal;
  ctx: ApiContext;
}

type ObjectSchema = z.ZodObject;

export interface Route<P extends ObjectSchema = ObjectSchema, Q extends ObjectSchema = ObjectSchema, B extends z.ZodType = z.ZodType> {
  method: Method;
  /** `/v1/machines/{name}`: each `{x}` is one path segment, validated by `params`. */
  path: string;
  summary: string;
  /** OpenAPI operationId and the metrics label's stable name. */
  operationId: string;
  tags?: string[];
  params?: P;
  query?: Q;
  /** A JSON body (capped at 1 MiB) validated by this schema; `raw`: the handler reads req itself (uploads). */
  body?: B | 'raw';
  /** What a raw body is, for the document. */
  rawBody?: { contentType: string; description: string };
  responses: Record<number, ResponseDoc>;
  /** No token needed even when the server has tokens (health probes). */
  public?: boolean;
  handle(r: Request<z.output<P>, z.output<Q>, z.output<B>>): Promise<Reply | void>;
  /** A WebSocket route: called on the HTTP upgrade instead of `handle` (after auth and params). */
  upgrade?(r: { params: z.output<P>; query: z.output<Q>; req: http.IncomingMessage; socket: Duplex; head: Buffer; ctx: ApiContext }): void;
}

/** Keeps each route's handler typed by its own schemas while the table holds them all. */
export function defineRoute<P extends ObjectSchema = z.ZodObject<Record<string, never>>, Q extends ObjectSchema = z.ZodObject<Record<string, never>>, B extends z.ZodType = z.ZodUndefined>(r: Route<P, Q, B>): Route {
  return r as unknown as Route;
}

export interface Match { route: Route; rawParams: Record<string, string> }

export class Router {
  constructor(readonly routes: readonly Route[]) {
    const seen = new Set<string>();
    for (const r of routes) {
      const key = `${r.method} ${r.path}`;
      if (seen.has(key)) throw new Error(`route ${key} is registered twice`);
      seen.add(key);
    }
  }

  /** The route for a method and path; a path that exists under other methods is 405, none is 404. */
  match(method: string, pathname: string): Match {
    const segs = pathname.split('/');
    let allowed: string[] = [];
    for (const route of this.routes) {
      const params = matchPath(route.path, segs);
      if (!params) continue;
      if (route.method === method) return { route, rawParams: params };
      allowed = [...allowed, route.method];
    }
    if (allowed.length) throw new ApiError(405, 'method_not_allowed', `${method} is not allowed on ${pathname}`, { hint: `Allowed: ${allowed.join(', ')}.` });
    throw new ApiError(404, 'not_found', `no route ${method} ${pathname}`, { hint: 'GET /v1/openapi.json (or `smol serve openapi`) lists the routes.' }, 66);
  }
}

function matchPath(template: string, segs: string[]): Record<string, string> | null {
  const t = template.split('/');
  if (t.length !== segs.length) return null;
  const params: Record<string, string> = {};
  for (let i = 0; i < t.length; i++) {
    const m = /^\{(\w+)\}$/.exec(t[i]);
    if (m) {
      if (!segs[i]) return null;
      try {
        params[m[1]] = decodeURIComponent(segs[i]);
      } catch {
        return null;
      }
    } else if (t[i] !== segs[i]) return null;
  }
  return params;
}

/** Zod issues as dot paths under what was being read (`ports.0`), the API's 400 `invalid_input`. */
export function parseOrThrow<T extends z.ZodType>(schema: T, value: unknown, what: string): z.output<T> {
  const r = schema.safeParse(value);
  if (r.success) return r.data;
  throw new ValidationError(`invalid ${what}`, r.error.issues.map((i) => ({ path: i.path.map(String).join('.') || '(root)', message: i.message })), { where: what });
}

/** Query strings: a key the schema declares as an array collects every value; any other takes its last. */
export function queryObject(schema: ObjectSchema | undefined, search: URLSearchParams): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const key of new Set(search.keys())) {
    const all = search.getAll(key);
    // the client names the keys: `toString` or `__proto__` must be an unknown key (400), not a lookup on
    // Object.prototype or an assignment to out's prototype
    const value = schema && Object.hasOwn(schema.shape, key) && isArrayField(schema.shape[key]) ? all : all[all.length - 1];
    Object.defineProperty(out, key, { value, enumerable: true, writable: true, configurable: true });
  }
  return out;
}

function isArrayField(s: z.core.$ZodType | undefined): boolean {
  let t = s;
  while (t && (t._zod.def.type === 'optional' || t._zod.def.type === 'default' || t._zod.def.type === 'nullable')) t = (t._zod.def as unknown as { innerType: z.core.$ZodType }).innerType;
  return t?._zod.def.type === 'array';
}

/** The route's validated inputs; the body is read only after params and query passed. */
export async function routeInputs(m: Match, req: http.IncomingMessage, url: URL): Promise<{ params: unknown; query: unknown; body: unknown }> {
  const { route } = m;
  const params = route.params ? parseOrThrow(route.params, m.rawParams, 'path parameters') : {};
  const query = parseOrThrow(route.query ?? z.strictObject({}), queryObject(route.query, url.searchParams), 'query');
  if (route.body === 'raw' || route.upgrade) return { params, query, body: undefined };
  const raw = await readJsonBody(req);
  if (!route.body) {
    if (raw !== undefined) throw new ApiError(400, 'invalid_input', `${route.method} ${route.path} takes no body`, { hint: 'Send the request without a body.' }, 65);
    return { params, query, body: undefined };
  }
  return { params, query, body: parseOrThrow(route.body, raw ?? {}, 'body') };
}
