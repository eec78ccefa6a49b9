/** Host side of CUDA remoting: the daemon (one session process per guest process). */
export { startGpuDaemon, queryGpuDaemon, type GpuDaemon, type GpuDaemonOptions, type GpuDaemonStatus, type SessionStatus, type GpuStopReport, type StoppedSession } from './server.js';
