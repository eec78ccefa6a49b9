/**
 * Pack and images. Pack paths are host paths read and written as the server's user: these routes are as
 * trusted as the token (docs/api.md says so).
 */
import { z } from 'zod';
import { execResultSchema, execSchema } from './exec.js';
import { request, response } from './registry.js';

const hostPath = z.string().min(1).max(4096).refine((s) => !s.includes('\0'), 'cannot contain NUL bytes').refine((s) => s.startsWith('/'), 'must be an absolute host path');

export const packCreateSchema = request('PackCreate', z.strictObject({
  machine: z.string().min(1).max(128).describe('the machine to pack (its disk; with withMemory, its running memory)'),
  output: hostPath.describe('the .smolmachine to write, a host path'),
  withMemory: z.boolean().optional(),
  sign: hostPath.optional().describe('an ed25519 private key file on the host'),
  force: z.boolean().optional().describe('replace an existing output'),
}));

export const packedSchema = response('Packed', z.object({ path: z.string(), digest: z.string(), bytes: z.int(), signed: z.boolean() }));

export const packVerifySchema = request('PackVerify', z.strictObject({ path: hostPath, key: hostPath.optional().describe('require a signature by this public key') }));

export const packVerifiedSchema = response('PackVerified', z.object({
  ok: z.boolean(), size: z.number(), failed: z.array(z.string()),
  entries: z.array(z.object({ name: z.string(), kind: z.string(), bytes: z.number(), ok: z.boolean() }).loose()),
  signature: z.object({ status: z.string(), keyId: z.string().nullable().optional() }).loose(),
}).loose());

/** As `POST /v1/run` takes a command (stdin, env, workdir, output caps and encoding), with the artifact as the machine. */
export const packRunSchema = request('PackRun', execSchema.extend({
  path: hostPath,
  argv: execSchema.shape.argv.optional().describe('default: the artifact\'s entrypoint'),
  env: execSchema.shape.env.describe('added to the artifact\'s recorded env'),
  workdir: execSchema.shape.workdir.describe('default: the artifact\'s recorded workdir'),
}));

export { execResultSchema as packRunResultSchema };

export const imageSchema = response('Image', z.object({ ref: z.string(), kind: z.string(), id: z.string(), digest: z.string().nullable().optional(), size: z.number(), usedBy: z.array(z.string()) }).loose());
export const imageListSchema = response('ImageList', z.object({ images: z.array(imageSchema) }));
export const imagePullSchema = request('ImagePull', z.strictObject({ ref: z.string().min(1).max(1024), offline: z.boolean().optional() }));
export const imagePulledSchema = response('ImagePulled', z.object({ ref: z.string(), manifestDigest: z.string(), platform: z.string(), fetchedBytes: z.number() }).loose());
export const imageRemovedSchema = response('ImageRemoved', z.object({ removed: z.array(z.string()), bytes: z.number() }).loose());
export const imageRefParamsSchema = z.strictObject({ ref: z.string().min(1).max(1024) });
export const imageRemoveQuerySchema = z.strictObject({ force: z.enum(['true', 'false', '1', '0']).optional().describe('remove it even while machines use it') });
