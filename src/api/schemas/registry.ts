/**
 * The named schemas of the API. Each request and response schema registers here under its OpenAPI component
 * name; openapi.ts turns the registry into `components.schemas`, so the schemas the server validates with are
 * the document (issue #29 item 2).
 */
import { z } from 'zod';

/** Request schemas are documented as their input (what a client sends), responses as their output. */
export const requestSchemas = z.registry<{ id: string; description?: string }>();
export const responseSchemas = z.registry<{ id: string; description?: string }>();

export function request<T extends z.ZodType>(id: string, schema: T, description?: string): T {
  requestSchemas.add(schema, { id, description });
  return schema;
}

export function response<T extends z.ZodType>(id: string, schema: T, description?: string): T {
  responseSchemas.add(schema, { id, description });
  return schema;
}
