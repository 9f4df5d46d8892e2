package io.github.monolock;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;

/**
 * The bytes of monolock's wire protocol, version 1 (docs/protocol.md): all
 * integers unsigned and big endian.
 */
final class Wire {
    private Wire() {}

    static final byte VERSION = 1;
    static final byte TYPE_ACQUIRE = 0x01;
    static final byte TYPE_HEARTBEAT = 0x02;
    /** The end of a session: the server closes the connection first. */
    static final byte TYPE_RELEASE = 0x03;
    static final int TYPE_WAITING = 0x11;
    static final int TYPE_ACQUIRED = 0x12;
    static final int TYPE_ERROR = 0x13;

    /** ACQUIRE's fixed part: type, version, lease_ms u32, name_len u16. */
    static final int ACQUIRE_HEADER = 8;
    /** The largest server frame: ERROR with a 255-byte reason. */
    static final int MAX_SERVER_FRAME = 3 + 255;

    /** Codes below this are server conditions (reconnect); from it on, client errors (report). */
    static final int FIRST_CLIENT_ERROR = 0x10;
    static final int CODE_SHUTTING_DOWN = 0x01;

    /** Encodes ACQUIRE; the name and the lease are validated already. */
    static byte[] acquire(long leaseMs, byte[] name) {
        ByteBuffer b = ByteBuffer.allocate(ACQUIRE_HEADER + name.length);
        b.put(TYPE_ACQUIRE).put(VERSION).putInt((int) leaseMs).putShort((short) name.length).put(name);
        return b.array();
    }

    /** The canonical text of each code of protocol version 1, or a text naming an unknown code. */
    static String codeText(int code) {
        switch (code) {
            case 0x01: return "server shutting down";
            case 0x02: return "closed by administrator";
            case 0x10: return "unsupported protocol version";
            case 0x11: return "first message must be ACQUIRE";
            case 0x12: return "duplicate ACQUIRE";
            case 0x13: return "unknown message type";
            case 0x14: return "empty lock name";
            case 0x15: return "lock name too long";
            case 0x16: return "lock name is not valid UTF-8";
            case 0x17: return "lease must be positive";
            case 0x18: return "not authorized for lock";
            default: return String.format("unknown error code 0x%02x", code);
        }
    }

    static String hex(int code) {
        return String.format("0x%02x", code);
    }

    /**
     * Receives the server's frames from a byte stream however TCP splits or
     * joins them. The part of a frame still incomplete at the end of a read
     * is kept in a buffer of {@link #MAX_SERVER_FRAME} bytes, made on the
     * first split frame only, so a connection that reads whole frames holds
     * none.
     */
    static final class Decoder {
        private byte[] pending;
        private int pendingLen;

        /** What {@link #next} found. */
        int type;
        long token;
        int code;
        String reason;

        /**
         * Takes the next whole frame from in (and any partial frame kept from
         * before) into the fields above and returns true, or keeps a partial
         * frame and returns false once in has no whole frame left. A type
         * other than WAITING, ACQUIRED or ERROR is returned as a one-byte
         * frame: after it the stream has no known layout.
         */
        boolean next(ByteBuffer in) {
            if (pendingLen > 0) {
                int need = size(pending, 0, pendingLen);
                while (need == 0 && in.hasRemaining()) {
                    pending[pendingLen++] = in.get();
                    need = size(pending, 0, pendingLen);
                }
                if (need == 0) return false;
                // need ≥ pendingLen: the header is in pending, the rest follows in in.
                int more = need - pendingLen;
                if (in.remaining() < more) {
                    int n = in.remaining();
                    in.get(pending, pendingLen, n);
                    pendingLen += n;
                    return false;
                }
                in.get(pending, pendingLen, more);
                decode(ByteBuffer.wrap(pending, 0, need));
                pendingLen = 0;
                return true;
            }
            if (!in.hasRemaining()) return false;
            int at = in.position();
            int need = size(in, at);
            if (need == 0 || in.remaining() < need) {
                if (pending == null) pending = new byte[MAX_SERVER_FRAME];
                pendingLen = in.remaining();
                in.get(pending, 0, pendingLen);
                return false;
            }
            decode(in); // in place: no copy and no allocation for WAITING and ACQUIRED
            in.position(at + need);
            return true;
        }

        /** Bytes of a frame begun and not finished. */
        int pendingBytes() {
            return pendingLen;
        }

        private void decode(ByteBuffer f) {
            int at = f.position();
            type = f.get(at) & 0xff;
            token = 0;
            code = 0;
            reason = null;
            if (type == TYPE_ACQUIRED) {
                token = f.getLong(at + 1);
            } else if (type == TYPE_ERROR) {
                code = f.get(at + 1) & 0xff;
                int len = f.get(at + 2) & 0xff;
                byte[] r = new byte[len];
                f.get(at + 3, r);
                // Text for people: a malformed byte must not break the error path.
                reason = new String(r, StandardCharsets.UTF_8);
            }
        }

        /** The whole size of the frame whose first bytes are given, or 0 while too few are there to tell. */
        private static int size(byte[] b, int off, int len) {
            return size(ByteBuffer.wrap(b, off, len), off);
        }

        private static int size(ByteBuffer b, int at) {
            int left = b.limit() - at;
            if (left < 1) return 0;
            switch (b.get(at) & 0xff) {
                case TYPE_ACQUIRED: return 9;
                case TYPE_ERROR: return left < 3 ? 0 : 3 + (b.get(at + 2) & 0xff);
                default: return 1; // WAITING, or a type the protocol does not define
            }
        }
    }
}
