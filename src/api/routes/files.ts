/**
 * Files in a running machine: one file read or written, a directory listed, a directory out or in as a tar.
 * Everything from the guest goes through `machine cp`'s bounded code (size, entries, idle time, names and
 * link targets: vm/copy-*.ts) into a scratch directory first, so a hostile guest is bounded exactly as cp
 * bounds it; an uploaded tar is checked by the same extractor before anything reaches the guest.
 */
import fs from 'node:fs';
import { stat } from 'node:fs/promises';
import path from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { create as tarCreate } from 'tar';
import { ExitCode, NoSpaceError, NotFoundError, SmolError, UserError } from '../../errors/index.js';
import { copy, execInMachine, extractUntrusted } from '../../vm/api/exec.js';
import { CappedBuffer } from '../exec-sinks.js';
import { ApiError } from '../errors.js';
import { tooLarge } from '../body.js';
import { bodyToFile, cappedBody, LIST_MAX_OUTPUT, LIST_SCRIPT, octal, parseListing, scratch, uploadCap } from '../files-io.js';
import { defineRoute, type Route } from '../router.js';
import { errorSchema } from '../schemas/error.js';
import { dirListingSchema, filePathQuerySchema, fileWriteQuerySchema, fileWrittenSchema, tarUploadedSchema } from '../schemas/files.js';
import { machineNameParamsSchema } from '../schemas/machines.js';

const common = { params: machineNameParamsSchema, tags: ['files'] };
const failures = {
  400: { description: 'a path that is not absolute, has `..` or NUL, or is too long', schema: errorSchema },
  404: { description: 'no such machine or guest path', schema: errorSchema },
  409: { description: 'the machine is not running', schema: errorSchema },
};
const guestEnd = (name: string, p: string) => `${name}:${p}`;
const tarExtract = 'mkdir -p -- "$1" && cd -- "$1" && exec tar -xf -';

/** cp's over-cap error names its CLI flag; over the API the bound is the server's SMOL_API_MAX_UPLOAD. */
function overCap(err: unknown, guestPath: string): unknown {
  if (!(err instanceof NoSpaceError) || !/larger than/.test(err.message)) return err;
  return new NoSpaceError(`${guestPath} in the guest is larger than the server's ${uploadCap()}-byte limit; nothing was sent`, {
    where: 'path', hint: 'Raise SMOL_API_MAX_UPLOAD where smol serve runs, or read the file in parts through exec (dd).',
  });
}

/** The extractor's refusal words are a guest's; for an upload the client sent the tar, and it is a bad request. */
function uploadRefusal(err: unknown): unknown {
  if (!(err instanceof SmolError) || err.exitCode !== ExitCode.integrity) return err;
  return new ApiError(400, 'invalid_input', err.message.replace(/^cp failed: the guest's archive/, 'the uploaded tar'), {
    where: 'body', hint: 'Every entry must stay below the target: relative names without `..`, link targets inside the tree.',
  }, ExitCode.invalidInput);
}

export const routes: Route[] = [
  defineRoute({
    ...common, method: 'GET', path: '/v1/machines/{name}/files', operationId: 'readFile', query: filePathQuerySchema,
    summary: 'Read one guest file: its bytes, its permission bits in X-Smol-Mode (bounded by SMOL_API_MAX_UPLOAD)',
    responses: { 200: { description: 'the file\'s bytes', contentType: 'application/octet-stream' }, ...failures },
    handle: async ({ ctx, params, query, res, signal }) => {
      const tmp = await scratch(ctx.home, res);
      try {
        const file = path.join(tmp.dir, 'file');
        await copy(ctx.svc, guestEnd(params.name, query.path), file, { maxBytes: uploadCap(), signal }).catch((err: unknown) => { throw overCap(err, query.path); });
        const st = await stat(file);
        res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': st.size, 'x-smol-mode': octal(st.mode & 0o7777) });
        await pipeline(fs.createReadStream(file), res);
      } finally {
        await tmp.done();
      }
    },
  }),
  defineRoute({
    ...common, method: 'PUT', path: '/v1/machines/{name}/files', operationId: 'writeFile', query: fileWriteQuerySchema, body: 'raw',
    rawBody: { contentType: 'application/octet-stream', description: 'the file\'s bytes (at most SMOL_API_MAX_UPLOAD, else 413)' },
    summary: 'Write one guest file (replaced whole), with the permission bits of `mode`',
    responses: { 200: { description: 'written', schema: fileWrittenSchema }, 413: { description: 'over SMOL_API_MAX_UPLOAD', schema: errorSchema }, ...failures },
    handle: async ({ ctx, params, query, req, res }) => {
      const mode = query.mode ? Number.parseInt(query.mode, 8) : 0o644;
      ctx.svc.store.get(params.name); // a missing machine is 404 before the upload is read
      const tmp = await scratch(ctx.home, res);
      try {
        const file = path.join(tmp.dir, 'file');
        const bytes = await bodyToFile(req, file, mode, uploadCap());
        await copy(ctx.svc, file, guestEnd(params.name, query.path));
        return { body: { path: query.path, bytes } };
      } finally {
        await tmp.done();
      }
    },
  }),
  defineRoute({
    ...common, method: 'GET', path: '/v1/machines/{name}/files/list', operationId: 'listFiles', query: filePathQuerySchema,
    summary: 'List a guest directory (the guest\'s busybox find and stat; at most 10,000 entries)',
    responses: { 200: { description: 'the entries, by name', schema: dirListingSchema }, ...failures },
    handle: async ({ ctx, params, query, signal }) => {
      const out = new CappedBuffer(LIST_MAX_OUTPUT);
      const err = new CappedBuffer(4096);
      const r = await execInMachine(ctx.svc, params.name, { argv: ['sh', '-c', LIST_SCRIPT, 'sh', query.path], cwd: '/' }, { stdin: null, stdout: out, stderr: err, signal, timeoutMs: 60_000 });
      if (r.code === 2) throw new NotFoundError(`no such guest path: ${query.path}`, { where: 'path' });
      if (r.code === 3) throw new UserError(`${query.path} is not a directory`, { where: 'path', hint: 'Read a file with GET …/files?path=' });
      if (r.code !== 0) throw new SmolError(`listing ${query.path} failed in the guest: ${err.bytes().toString('utf8').trim() || `exit ${r.code ?? r.signal}`}`, ExitCode.guestChannel);
      return { body: parseListing(out.bytes().toString('utf8')) };
    },
  }),
  defineRoute({
    ...common, method: 'GET', path: '/v1/machines/{name}/files/tar', operationId: 'downloadTar', query: filePathQuerySchema,
    summary: 'A guest directory as a tar (modes kept; setuid/setgid, specials and links leaving it dropped, as machine cp does)',
    responses: { 200: { description: 'a tar of the directory\'s contents', contentType: 'application/x-tar' }, ...failures },
    handle: async ({ ctx, params, query, res, signal }) => {
      const tmp = await scratch(ctx.home, res);
      try {
        const tree = path.join(tmp.dir, 'tree');
        const skipped: string[] = [];
        await copy(ctx.svc, guestEnd(params.name, query.path), tree, { recursive: true, maxBytes: uploadCap(), signal, warn: (l) => skipped.push(l) })
          .catch((err: unknown) => { throw overCap(err, query.path); });
        if (!(await stat(tree)).isDirectory()) throw new UserError(`${query.path} is not a directory`, { where: 'path', hint: 'Read a file with GET …/files?path=' });
        const headers: Record<string, string> = { 'content-type': 'application/x-tar' };
        // the guest chose the names in these lines: only a short, header-safe summary
        if (skipped.length) headers['x-smol-skipped'] = skipped.join('; ').replace(/[^\x20-\x7e]/g, '?').slice(0, 1024);
        res.writeHead(200, headers);
        await pipeline(tarCreate({ cwd: tree, portable: true }, ['.']) as unknown as Readable, res);
      } finally {
        await tmp.done();
      }
    },
  }),
  defineRoute({
    ...common, method: 'PUT', path: '/v1/machines/{name}/files/tar', operationId: 'uploadTar', query: filePathQuerySchema, body: 'raw',
    rawBody: { contentType: 'application/x-tar', description: 'a tar (gzip or zstd too); every entry must stay below path' },
    summary: 'Unpack a tar into a guest directory (made if missing); a tar with entries leaving it is refused whole',
    responses: { 200: { description: 'unpacked', schema: tarUploadedSchema }, 413: { description: 'over SMOL_API_MAX_UPLOAD', schema: errorSchema }, ...failures },
    handle: async ({ ctx, params, query, req, res, signal }) => {
      const cap = uploadCap();
      ctx.svc.store.get(params.name);
      const tmp = await scratch(ctx.home, res);
      try {
        const tree = path.join(tmp.dir, 'tree');
        fs.mkdirSync(tree, { mode: 0o700 });
        const skipped: string[] = [];
        // checked and written on the host first: a refused tar leaves nothing in the guest
        const stats = await extractUntrusted(cappedBody(req, cap, 'tar upload'), tree, { limit: { maxBytes: cap, overCap: () => tooLarge(cap, 'tar upload\'s contents') }, warn: (l) => skipped.push(l) })
          .catch((err: unknown) => { throw uploadRefusal(err); });
        if (skipped.length) throw new ApiError(400, 'invalid_input', `the uploaded tar has entries smol will not write: ${skipped.join('; ')}`, { where: 'body', hint: 'Symlinks must point inside the tree; device nodes and FIFOs are not unpacked.' }, ExitCode.invalidInput);
        const err = new CappedBuffer(4096);
        const r = await execInMachine(ctx.svc, params.name, { argv: ['sh', '-c', tarExtract, 'sh', query.path], cwd: '/' }, {
          stdin: tarCreate({ cwd: tree, portable: true }, ['.']) as unknown as Readable, stdout: new CappedBuffer(0), stderr: err, signal,
        });
        if (r.code !== 0) throw new SmolError(`unpacking into ${query.path} failed in the guest: ${err.bytes().toString('utf8').trim() || `exit ${r.code ?? r.signal}`}`, ExitCode.failure, { where: 'path' });
        return { body: { path: query.path, entries: stats.entries, bytes: stats.bytes } };
      } finally {
        await tmp.done();
      }
    },
  }),
];
