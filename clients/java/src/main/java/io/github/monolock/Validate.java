package io.github.monolock;

import java.nio.ByteBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.time.Duration;

/** The checks made before connecting: what the protocol cannot carry is refused here, never sent. */
final class Validate {
    private Validate() {}

    /** The protocol's limit on a lock name, in UTF-8 bytes. */
    static final int MAX_NAME_BYTES = 255;
    /** The largest lease the wire carries (u32 milliseconds, about 49.7 days). */
    static final long MAX_LEASE_MS = 0xffff_ffffL;

    /** The name's UTF-8 bytes; a Java string with a lone surrogate has none and is refused. */
    static byte[] name(String name) {
        if (name == null) throw new IllegalArgumentException("monolock: the lock name is null: give the lock a name of 1 to 255 bytes");
        if (name.isEmpty()) throw new IllegalArgumentException("monolock: empty lock name: give the lock a name of 1 to 255 bytes");
        ByteBuffer b;
        try {
            b = StandardCharsets.UTF_8.newEncoder()
                    .onMalformedInput(CodingErrorAction.REPORT)
                    .onUnmappableCharacter(CodingErrorAction.REPORT)
                    .encode(java.nio.CharBuffer.wrap(name));
        } catch (CharacterCodingException e) {
            throw new IllegalArgumentException("monolock: lock name is not valid UTF-8: it contains a lone surrogate"
                    + " (a broken UTF-16 pair); fix the string before using it as a name", e);
        }
        if (b.remaining() > MAX_NAME_BYTES) {
            throw new IllegalArgumentException("monolock: lock name too long: " + b.remaining()
                    + " bytes in UTF-8, the limit is " + MAX_NAME_BYTES + "; shorten it or hash the long part");
        }
        byte[] out = new byte[b.remaining()];
        b.get(out);
        return out;
    }

    /** The lease in the wire's whole milliseconds: at least 1 ms asked, a fraction rounded up so the server never drops a session earlier than asked. */
    static long leaseMs(Duration lease) {
        if (lease == null) throw new IllegalArgumentException("monolock: the lease is null: give a lease such as Duration.ofSeconds(2)");
        if (lease.isNegative() || lease.isZero()) {
            throw new IllegalArgumentException("monolock: lease must be positive: " + lease + " is not; use at least 1 ms");
        }
        if (lease.compareTo(Duration.ofMillis(1)) < 0) {
            // Never sent as 1 ms: the client's own timings would not match the server's.
            throw new IllegalArgumentException("monolock: lease " + lease + " is shorter than 1 ms, the shortest the wire"
                    + " carries; use at least 1 ms");
        }
        if (lease.compareTo(Duration.ofMillis(MAX_LEASE_MS)) > 0) {
            throw new IllegalArgumentException("monolock: lease " + lease + " is longer than the wire maximum of "
                    + MAX_LEASE_MS + " ms (about 49.7 days)");
        }
        long ms = lease.toMillis();
        if (Duration.ofMillis(ms).compareTo(lease) < 0) ms++;
        return ms;
    }

    /** host:port, or [v6]:port. */
    static String[] address(String address) {
        if (address == null) throw new IllegalArgumentException("monolock: the address is null: give host:port, for example 127.0.0.1:7070");
        int colon = address.lastIndexOf(':');
        String host = colon < 0 ? "" : address.substring(0, colon);
        String port = colon < 0 ? "" : address.substring(colon + 1);
        if (host.startsWith("[") && host.endsWith("]")) host = host.substring(1, host.length() - 1);
        else if (host.contains(":")) host = "";
        int p = -1;
        if (port.matches("[0-9]{1,5}")) p = Integer.parseInt(port);
        if (host.isEmpty() || p < 1 || p > 65535) {
            throw new IllegalArgumentException("monolock: address \"" + address
                    + "\" is not host:port (for example 127.0.0.1:7070 or [::1]:7070)");
        }
        return new String[] {host, port};
    }
}
