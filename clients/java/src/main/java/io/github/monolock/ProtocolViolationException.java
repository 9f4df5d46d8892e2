package io.github.monolock;

/**
 * The server sent something the protocol does not allow at that point (an
 * unknown frame type, a WAITING after ACQUIRED, a changed token). The client
 * trusts nothing after it; this is a bug in the server or something between
 * the two, not a condition to retry.
 */
public final class ProtocolViolationException extends MonolockException {
    private static final long serialVersionUID = 1L;

    ProtocolViolationException(String message) {
        super(message);
    }
}
