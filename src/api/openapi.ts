/**
 * The OpenAPI 3.1 document, generated from the route table and the zod schemas the server validates with
 * (`smol serve openapi`, docs/openapi.json via `npm run gen:openapi`, drift-checked by scripts/check-generated.sh).
 */
import { z } from 'zod';
import type { Route } from './router.js';
import { requestSchemas, responseSchemas } from './schemas/registry.js';
import { errorSchema } from './schemas/error.js';

type Json = Record<string, unknown>;
const ref = (id: string) => ({ $ref: `#/components/schemas/${id}` });

function components(): Record<string, Json> {
  const opts = { uri: (id: string) => `#/components/schemas/${id}`, unrepresentable: 'any' as const };
  const req = z.toJSONSchema(requestSchemas, { ...opts, io: 'input' }).schemas;
  const res = z.toJSONSchema(responseSchemas, { ...opts, io: 'output' }).schemas;
  const out: Record<string, Json> = {};
  for (const [id, s] of Object.entries({ ...req, ...res }).sort(([a], [b]) => a.localeCompare(b))) {
    const { $schema: _drop, $id: _id, ...rest } = s as Json;
    out[id] = rest;
  }
  return out;
}

function schemaOf(s: z.ZodType, io: 'input' | 'output'): Json {
  const id = (io === 'input' ? requestSchemas : responseSchemas).get(s)?.id;
  if (id) return ref(id);
  const { $schema: _drop, ...rest } = z.toJSONSchema(s, { io, unrepresentable: 'any' }) as Json;
  return rest;
}

function parameters(r: Route): Json[] {
  const out: Json[] = [];
  for (const [where, obj] of [['path', r.params], ['query', r.query]] as const) {
    if (!obj) continue;
    for (const [name, field] of Object.entries(obj.shape)) {
      const schema = schemaOf(field as z.ZodType, 'input');
      const { description, ...rest } = schema;
      out.push({
        name, in: where, required: where === 'path' || !(field as z.ZodType).safeParse(undefined).success, schema: rest,
        ...(description ? { description } : {}), ...(rest.type === 'array' ? { style: 'form', explode: true } : {}),
      });
    }
  }
  return out;
}

function operation(r: Route): Json {
  const responses: Json = {};
  for (const [status, d] of Object.entries(r.responses)) {
    const type = d.contentType ?? 'application/json';
    responses[status] = { description: d.description, ...(d.schema || type !== 'application/json' ? { content: { [type]: d.schema ? { schema: schemaOf(d.schema, 'output') } : {} } } : {}) };
  }
  responses.default = { description: 'an error (docs/api.md, Errors)', content: { 'application/json': { schema: schemaOf(errorSchema, 'output') } } };
  const body = r.body === 'raw'
    ? { required: true, description: r.rawBody?.description, content: { [r.rawBody?.contentType ?? 'application/octet-stream']: {} } }
    : r.body ? { required: true, content: { 'application/json': { schema: schemaOf(r.body, 'input') } } } : undefined;
  const params = parameters(r);
  return {
    operationId: r.operationId, summary: r.summary, ...(r.tags ? { tags: r.tags } : {}),
    ...(params.length ? { parameters: params } : {}), ...(body ? { requestBody: body } : {}), responses,
    ...(r.public ? { security: [] } : {}),
  };
}

export function openApiDocument(routes: readonly Route[], version: string): Json {
  const paths: Record<string, Json> = {};
  for (const r of [...routes].sort((a, b) => a.path.localeCompare(b.path))) {
    paths[r.path] = { ...paths[r.path], [r.method.toLowerCase()]: operation(r) };
  }
  return {
    openapi: '3.1.0',
    info: { title: 'smol API', version, description: 'The HTTP API of `smol serve` (docs/api.md). Errors share one shape; exitCode is what the CLI would exit with.' },
    servers: [{ url: 'http://localhost', description: 'the Unix socket $SMOL_HOME/smol.sock (no token), or --listen HOST:PORT (bearer token)' }],
    security: [{ bearer: [] }],
    paths,
    components: { schemas: components(), securitySchemes: { bearer: { type: 'http', scheme: 'bearer', description: 'A line of the server\'s --token-file; not needed on the Unix socket' } } },
  };
}
