/** Streams and events: ids minted by the guest (creation costs no round trip), mapped to driver handles here. */
import { CU, type OpHandlers } from '../session-state.js';

/** Where an elapsed time is narrowed to the float the guest's cuEventElapsedTime returns. */
const floatBits = Buffer.alloc(4);

export const streamOps = {
  StreamCreate(s, a) {
    const id = a.stream;
    if (id <= 2 || s.streams.has(id)) return s.fire(CU.invalidHandle);
    const r = s.drv.cuStreamCreateWithPriority(s.out1, a.flags, a.priority | 0);
    if (!r) s.streams.set(id, s.num(s.out1[0]));
    return s.fire(r);
  },
  StreamDestroy(s, a) {
    const h = s.lookup(s.streams, a.stream);
    s.streams.delete(a.stream);
    return s.fire(s.drv.cuStreamDestroy(h));
  },
  StreamSynchronize: (s, a) => s.ret(s.drv.cuStreamSynchronize(s.stream(a.stream))),
  StreamQuery: (s, a) => s.ret(s.drv.cuStreamQuery(s.stream(a.stream))),
  StreamWaitEvent: (s, a) => s.fire(s.drv.cuStreamWaitEvent(s.stream(a.stream), s.lookup(s.events, a.event), a.flags)),

  EventCreate(s, a) {
    const id = a.event;
    if (s.events.has(id)) return s.fire(CU.invalidHandle);
    const r = s.drv.cuEventCreate(s.out1, a.flags);
    if (!r) s.events.set(id, s.num(s.out1[0]));
    return s.fire(r);
  },
  EventRecord: (s, a) => s.fire(s.drv.cuEventRecord(s.lookup(s.events, a.event), s.stream(a.stream))),
  EventSynchronize: (s, a) => s.ret(s.drv.cuEventSynchronize(s.lookup(s.events, a.event))),
  EventQuery: (s, a) => s.ret(s.drv.cuEventQuery(s.lookup(s.events, a.event))),
  EventElapsedTime(s, a) {
    const r = s.drv.cuEventElapsedTime(s.out1, s.lookup(s.events, a.start), s.lookup(s.events, a.end));
    floatBits.writeFloatLE(r ? 0 : s.out1[0]);
    return s.ret(r, [floatBits.readUInt32LE(0)]);
  },
  EventDestroy(s, a) {
    const h = s.lookup(s.events, a.event);
    s.events.delete(a.event);
    return s.fire(s.drv.cuEventDestroy(h));
  },
} satisfies Partial<OpHandlers>;
