export { Client, DEFAULT_ADDRESS, type AcquireOptions, type ClientOptions } from './client.js';
export { Lock } from './lock.js';
export {
  BusyError,
  InvalidArgumentError,
  LockLostError,
  MonolockError,
  ProtocolError,
  ServerError,
  UnavailableError,
  type LossKind,
} from './errors.js';
export { MAX_LEASE_MS, MAX_NAME_BYTES } from './validate.js';
export * as fence from './fence.js';
export { FenceTableMissingError, StaleTokenError, type AdmitOptions, type Dialect } from './fence.js';
