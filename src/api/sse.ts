/**
 * Long-lived server-sent event streams (logs, events): headers, a ping comment every 15 s so proxies keep the
 * connection, and a cap on what one client may leave unread — a slow client is dropped, never buffered forever.
 */
import type http from 'node:http';
import { sseEvent } from './exec-sinks.js';

export const SSE_PING_MS = 15_000;
/** Bytes queued for one client before it counts as gone. */
export const SSE_CLIENT_MAX_QUEUED = 4 * 1024 * 1024;

export interface SseStream {
  /** Queues one event; false once the client is gone or was dropped for not reading. */
  send(event: string, data: unknown): boolean;
  readonly closed: boolean;
  end(): void;
}

export function openSse(res: http.ServerResponse, onClose: () => void): SseStream {
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-store', 'x-accel-buffering': 'no' });
  res.flushHeaders();
  let closed = false;
  const close = () => {
    if (closed) return;
    closed = true;
    clearInterval(ping);
    onClose();
  };
  const write = (text: string): boolean => {
    if (closed || res.destroyed) return false;
    res.write(text);
    if (res.writableLength > SSE_CLIENT_MAX_QUEUED) {
      res.destroy(); // it stopped reading: drop it rather than hold its backlog
      close();
      return false;
    }
    return true;
  };
  const ping = setInterval(() => write(': ping\n\n'), SSE_PING_MS);
  res.on('close', close);
  return {
    send: (event, data) => write(sseEvent(event, data)),
    get closed() { return closed; },
    end: () => { if (!closed) { res.end(); close(); } },
  };
}
