package io.github.monolock;

import java.util.OptionalInt;

/**
 * The server could not be reached or could not serve the request now: the
 * connection failed, was lost or went silent (no answer within 0.8 × lease)
 * before the lock was granted, or the server sent an ERROR with a code below
 * 0x10 (a server condition, such as shutting down). A new attempt may
 * succeed; {@link MonolockClient#run} makes one.
 */
public final class ServerUnavailableException extends MonolockException {
    private static final long serialVersionUID = 1L;
    /** The ERROR code, or -1 when no ERROR frame ended the attempt. */
    private final int code;
    /** The ERROR's reason text, or null. */
    private final String reason;
    /** Whether another attempt may succeed. */
    private final boolean retriable;

    ServerUnavailableException(String message, Throwable cause, boolean retriable) {
        super(message, cause);
        this.code = -1;
        this.reason = null;
        this.retriable = retriable;
    }

    ServerUnavailableException(int code, String reason) {
        super("monolock: server condition " + Wire.hex(code) + ": " + (reason.isEmpty() ? Wire.codeText(code) : reason)
                + "; a new connection may succeed (MonolockClient.run retries it)");
        this.code = code;
        this.reason = reason;
        this.retriable = true;
    }

    /**
     * The ERROR code (below 0x10) when the server sent one: 0x01 "server
     * shutting down", 0x02 "closed by administrator", or a later one.
     *
     * @return the code, or empty when no ERROR frame ended the attempt
     */
    public OptionalInt code() {
        return code < 0 ? OptionalInt.empty() : OptionalInt.of(code);
    }

    /**
     * The ERROR's reason text, for people; never parse it.
     *
     * @return the server's text, or null when no ERROR frame ended the attempt
     */
    public String reason() {
        return reason;
    }

    /**
     * Whether another attempt may succeed: false when it would meet the same
     * failure (a TLS certificate that one side rejects).
     *
     * @return true for a condition that may pass
     */
    public boolean isRetriable() {
        return retriable;
    }
}
