// The bytes of monolock's wire protocol, version 1 (docs/protocol.md in the
// monolock repository). All integers are unsigned and big endian.

export const PROTOCOL_VERSION = 1;

export const TYPE_ACQUIRE = 0x01;
export const TYPE_HEARTBEAT = 0x02;
export const TYPE_RELEASE = 0x03;
export const TYPE_WAITING = 0x11;
export const TYPE_ACQUIRED = 0x12;
export const TYPE_ERROR = 0x13;

/** ACQUIRE's fixed part: type, version, lease_ms u32, name_len u16. */
export const ACQUIRE_HEADER_LEN = 8;

/** The one-byte HEARTBEAT frame. It is never written to, so one copy serves every session. */
export const HEARTBEAT: Uint8Array = Uint8Array.of(TYPE_HEARTBEAT);

/** The one-byte RELEASE frame, shared as HEARTBEAT is. */
export const RELEASE: Uint8Array = Uint8Array.of(TYPE_RELEASE);

/** Encodes ACQUIRE. The caller has validated the name and the lease (validate.ts). */
export function encodeAcquire(leaseMs: number, name: Uint8Array): Buffer {
  const frame = Buffer.allocUnsafe(ACQUIRE_HEADER_LEN + name.length);
  frame[0] = TYPE_ACQUIRE;
  frame[1] = PROTOCOL_VERSION;
  frame.writeUInt32BE(leaseMs, 2);
  frame.writeUInt16BE(name.length, 6);
  frame.set(name, ACQUIRE_HEADER_LEN);
  return frame;
}

/** One decoded server frame. `unknown` is a first byte the protocol does not define. */
export type ServerFrame =
  | { readonly type: 'waiting' }
  | { readonly type: 'acquired'; readonly token: bigint }
  | { readonly type: 'error'; readonly code: number; readonly reason: string }
  | { readonly type: 'unknown'; readonly byte: number };

const WAITING_FRAME: ServerFrame = { type: 'waiting' };

/**
 * Decodes the server's byte stream into whole frames, however TCP splits or
 * joins them: a read may hold part of a frame, several frames, or both.
 */
export class FrameDecoder {
  #pending: Buffer | undefined;

  /**
   * Feeds one chunk and returns every frame it completes, in order. After an
   * `unknown` frame the stream has no known layout, so decoding stops there:
   * the rest of the chunk is dropped and later chunks yield nothing.
   */
  push(chunk: Buffer): ServerFrame[] {
    const frames: ServerFrame[] = [];
    if (this.#broken) return frames;
    let buf = chunk;
    if (this.#pending !== undefined) {
      buf = Buffer.concat([this.#pending, chunk]);
      this.#pending = undefined;
    }
    let at = 0;
    while (at < buf.length) {
      const size = frameSize(buf, at);
      if (size === 0) {
        // Incomplete: keep a copy, the chunk's memory may be reused by the socket.
        this.#pending = Buffer.from(buf.subarray(at));
        break;
      }
      const frame = decodeAt(buf, at);
      frames.push(frame);
      if (frame.type === 'unknown') {
        this.#broken = true;
        break;
      }
      at += size;
    }
    return frames;
  }

  /** Bytes of a frame begun but not completed: a non-zero value at EOF means a truncated frame. */
  get pendingBytes(): number {
    return this.#pending?.length ?? 0;
  }

  #broken = false;
}

/** The size of the frame starting at buf[at], or 0 while it is incomplete. An unknown type is one byte. */
function frameSize(buf: Buffer, at: number): number {
  const left = buf.length - at;
  switch (buf[at]) {
    case TYPE_WAITING:
      return 1;
    case TYPE_ACQUIRED:
      return left >= 9 ? 9 : 0;
    case TYPE_ERROR: {
      if (left < 3) return 0;
      const size = 3 + buf[at + 2]!;
      return left >= size ? size : 0;
    }
    default:
      return 1;
  }
}

/** Decodes the complete frame at buf[at]. */
export function decodeAt(buf: Buffer, at: number): ServerFrame {
  const type = buf[at]!;
  switch (type) {
    case TYPE_WAITING:
      return WAITING_FRAME;
    case TYPE_ACQUIRED:
      return { type: 'acquired', token: buf.readBigUInt64BE(at + 1) };
    case TYPE_ERROR: {
      const len = buf[at + 2]!;
      // The reason is text for people; a malformed byte must not break the session's error path.
      const reason = buf.toString('utf8', at + 3, at + 3 + len);
      return { type: 'error', code: buf[at + 1]!, reason };
    }
    default:
      return { type: 'unknown', byte: type };
  }
}

/** The canonical text of each code of protocol version 1. */
export const CODE_TEXT: ReadonlyMap<number, string> = new Map([
  [0x01, 'server shutting down'],
  [0x02, 'closed by administrator'],
  [0x10, 'unsupported protocol version'],
  [0x11, 'first message must be ACQUIRE'],
  [0x12, 'duplicate ACQUIRE'],
  [0x13, 'unknown message type'],
  [0x14, 'empty lock name'],
  [0x15, 'lock name too long'],
  [0x16, 'lock name is not valid UTF-8'],
  [0x17, 'lease must be positive'],
  [0x18, 'not authorized for lock'],
]);

/** Codes below this are server conditions (reconnect); from it on, client errors (report). */
export const FIRST_CLIENT_ERROR_CODE = 0x10;

export const CODE_SHUTTING_DOWN = 0x01;
