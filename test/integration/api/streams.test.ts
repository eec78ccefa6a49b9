/**
 * Logs and lifecycle events of a real `smol serve` with one machine: the console log whole and followed as
 * SSE lines, and `machine` events for changes made by the CLI (the server polls the machine database).
 */
import http from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { killQemuMentioning, smol } from '../../helpers/cli.js';
import { request, startServe, type ServeHandle } from '../../helpers/serve.js';
import { machineEventSchema, logLineSchema } from '../../../src/api/schemas/streams.js';

let srv: ServeHandle;
const VM = 'streams1';

/** An open SSE stream: its events as they came, and a wait for one that matches. */
function sse(pathname: string) {
  const events: { event: string; data: unknown }[] = [];
  let text = '';
  let ended = false;
  const waiters: (() => void)[] = [];
  const req = http.get({ socketPath: srv.socket, path: pathname }, (res) => {
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toBe('text/event-stream');
    res.on('data', (c: Buffer) => {
      text += c.toString();
      for (let i = text.indexOf('\n\n'); i >= 0; i = text.indexOf('\n\n')) {
        const block = text.slice(0, i);
        text = text.slice(i + 2);
        const ev = /^event: (.*)$/m.exec(block)?.[1];
        const data = /^data: (.*)$/m.exec(block)?.[1];
        if (ev && data) events.push({ event: ev, data: JSON.parse(data) });
      }
      waiters.splice(0).forEach((w) => w());
    });
    res.on('end', () => { ended = true; waiters.splice(0).forEach((w) => w()); });
  });
  const until = async (ok: () => boolean, what: string, ms = 60_000) => {
    const t0 = Date.now();
    while (!ok()) {
      if (Date.now() - t0 > ms) throw new Error(`timed out waiting for ${what}; got ${JSON.stringify(events.slice(-5))}`);
      await new Promise<void>((r) => { waiters.push(r); setTimeout(r, 500); });
    }
  };
  return { events, until, ended: () => ended, close: () => req.destroy() };
}

beforeAll(async () => {
  srv = await startServe();
  const made = await request('/v1/machines', { method: 'POST', body: { name: VM, start: true }, socket: srv.socket });
  expect(made.status, made.text).toBe(201);
});

afterAll(async () => {
  await srv?.stop();
  if (srv) killQemuMentioning(srv.home);
});

describe('logs and events', () => {
  it('answers the console log as text, and its last lines with tail', async () => {
    const r = await request(`/v1/machines/${VM}/exec`, { method: 'POST', body: { argv: ['sh', '-c', 'echo api-log-first-7 > /dev/console'] }, socket: srv.socket });
    expect(r.status, r.text).toBe(200);
    let all = await request(`/v1/machines/${VM}/logs`, { socket: srv.socket });
    for (let i = 0; i < 50 && !all.text.includes('api-log-first-7'); i++) {
      await new Promise((res) => setTimeout(res, 200));
      all = await request(`/v1/machines/${VM}/logs`, { socket: srv.socket });
    }
    expect(all.status).toBe(200);
    expect(all.headers['content-type']).toMatch(/^text\/plain/);
    expect(all.text).toMatch(/api-log-first-7/);
    expect(all.text.split('\n').length).toBeGreaterThan(1);
    const one = await request(`/v1/machines/${VM}/logs?tail=1`, { socket: srv.socket });
    expect(one.text.trimEnd().split('\n').length).toBe(1);
    expect((await request('/v1/machines/nope/logs', { socket: srv.socket })).status).toBe(404);
  });

  it('follows new console lines as SSE line events', async () => {
    const s = sse(`/v1/machines/${VM}/logs?follow=1&tail=0`);
    try {
      await new Promise((r) => setTimeout(r, 500));
      const r = await request(`/v1/machines/${VM}/exec`, { method: 'POST', body: { argv: ['sh', '-c', 'echo api-log-marker-42 > /dev/console'] }, socket: srv.socket });
      expect(r.status, r.text).toBe(200);
      await s.until(() => s.events.some((e) => e.event === 'line' && (e.data as { line: string }).line.includes('api-log-marker-42')), 'the marker line');
      for (const e of s.events) expect(logLineSchema.safeParse(e.data).success).toBe(true);
    } finally {
      s.close();
    }
  });

  it('sends a machine event for a stop made by the CLI, and ends a log follow when the machine stops', async () => {
    const ev = sse('/v1/events');
    const logs = sse(`/v1/machines/${VM}/logs?follow=1&tail=0`);
    try {
      await new Promise((r) => setTimeout(r, 1000));
      const stop = await smol(['machine', 'stop', VM], { home: srv.home, timeoutMs: 120_000 });
      expect(stop.code, stop.stderr).toBe(0);
      await ev.until(() => ev.events.some((e) => (e.data as { state: string }).state === 'stopped'), 'the stopped event');
      const stopped = ev.events.find((e) => (e.data as { state: string }).state === 'stopped')!;
      expect(stopped.event).toBe('machine');
      expect(machineEventSchema.parse(stopped.data)).toMatchObject({ name: VM, state: 'stopped' });
      await logs.until(() => logs.ended(), 'the log follow to end');
    } finally {
      ev.close();
      logs.close();
    }
  });
});
