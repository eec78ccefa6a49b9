/** Host side of the smol guest agent protocol (docs/agent-protocol.md). */
export { AgentClient, type ConnectOptions, type RunResult, type StreamListener } from './client.js';
export { ExecSession, type ExitStatus } from './exec-session.js';
export type { GuestFile } from './file-transfer.js';
export type { ConfigureRequest, ExecRequest, Hello } from './payloads.js';
export { FrameDecoder, ProtocolError, encodeFrame, encodeHeader, type Frame } from './codec.js';
export * from './protocol.js';
export { signalName, signalNumber } from './signals.js';
