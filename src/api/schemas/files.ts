/** Files in a guest: the path and mode queries, and the answers of write, list and tar upload. */
import { z } from 'zod';
import { response } from './registry.js';

/** PATH_MAX of Linux: a longer path is no path the guest could open. */
export const GUEST_PATH_MAX = 4096;

/**
 * An absolute guest path with no `..` component: the route acts on exactly the path asked for, never one a
 * `..` climbs to (which a client might not have meant, and a proxy checking prefixes would not see).
 */
export const guestPathSchema = z.string()
  .min(1).max(GUEST_PATH_MAX, `at most ${GUEST_PATH_MAX} bytes`)
  .refine((s) => !s.includes('\0'), 'cannot contain NUL bytes')
  .refine((s) => s.startsWith('/'), 'must be an absolute guest path (start with /)')
  .refine((s) => !s.split('/').includes('..'), 'cannot contain .. components')
  .describe('an absolute guest path');

export const filePathQuerySchema = z.strictObject({ path: guestPathSchema });

export const fileWriteQuerySchema = z.strictObject({
  path: guestPathSchema.refine((s) => !s.endsWith('/'), 'names a file, so it cannot end in /'),
  mode: z.string().regex(/^0?[0-7]{3,4}$/, 'octal permission bits, e.g. 0644').optional().describe('octal, default 0644'),
});

export const fileWrittenSchema = response('FileWritten', z.object({ path: z.string(), bytes: z.int() }));

export const dirEntrySchema = response('DirEntry', z.object({
  name: z.string(),
  type: z.enum(['file', 'dir', 'symlink', 'other']),
  size: z.int(),
  mode: z.string().describe('octal permission bits, e.g. 0644'),
}));

export const dirListingSchema = response('DirListing', z.object({
  entries: z.array(dirEntrySchema),
  truncated: z.boolean().describe('the directory has more entries than one listing returns'),
}));

export const tarUploadedSchema = response('TarUploaded', z.object({ path: z.string(), entries: z.int(), bytes: z.int() }));
