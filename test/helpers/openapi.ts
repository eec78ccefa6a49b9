/**
 * Checks API answers against docs/openapi.json: each response's JSON Schema (its $refs into
 * components.schemas resolved) becomes a zod schema with zod 4's z.fromJSONSchema, so the test reads the
 * checked-in document, not the server's own zod schemas.
 */
import fs from 'node:fs';
import path from 'node:path';
import { z } from 'zod';
import { root } from './cli.js';

type Json = Record<string, unknown>;
const doc = JSON.parse(fs.readFileSync(path.join(root, 'docs', 'openapi.json'), 'utf8')) as { paths: Record<string, Record<string, { responses: Record<string, { content?: Record<string, { schema?: Json }> }> }>>; components: { schemas: Record<string, Json> } };

/** The schema with every `#/components/schemas/X` reference replaced by X (the document has no cycles). */
function inline(s: unknown): unknown {
  if (Array.isArray(s)) return s.map(inline);
  if (!s || typeof s !== 'object') return s;
  const o = s as Json;
  if (typeof o.$ref === 'string') return inline(doc.components.schemas[o.$ref.replace('#/components/schemas/', '')]);
  return Object.fromEntries(Object.entries(o).map(([k, v]) => [k, inline(v)]));
}

/** Throws naming the operation and the first mismatches when `body` is not what the document says. */
export function expectDocumented(method: string, template: string, status: number, body: unknown): void {
  const op = doc.paths[template]?.[method.toLowerCase()];
  if (!op) throw new Error(`${method} ${template} is not in docs/openapi.json`);
  const r = op.responses[String(status)] ?? op.responses.default;
  const schema = r?.content?.['application/json']?.schema;
  if (!schema) throw new Error(`${method} ${template} documents no JSON answer for ${status}`);
  const res = z.fromJSONSchema(inline(schema) as Parameters<typeof z.fromJSONSchema>[0]).safeParse(body);
  if (!res.success) throw new Error(`${method} ${template} ${status}: the answer does not match docs/openapi.json: ${JSON.stringify(res.error.issues.slice(0, 5))}`);
}
