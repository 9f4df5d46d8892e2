package io.github.monolock;

/**
 * An ERROR from the server with a code of 0x10 or above: the request itself
 * is wrong, or not allowed (0x18, the ACL), and asking again gets the same
 * answer, so nothing retries it. Codes this client does not know are
 * classified by the same range.
 */
public final class MonolockServerException extends MonolockException {
    private static final long serialVersionUID = 1L;
    /** The ERROR code, 0x10 or above. */
    private final int code;
    /** The ERROR's reason text. */
    private final String reason;

    MonolockServerException(int code, String reason) {
        super("monolock: server error " + Wire.hex(code) + ": " + (reason.isEmpty() ? Wire.codeText(code) : reason)
                + (code == 0x18 ? "; ask an operator to allow this identity the lock in the ACL" : "; asking again gets the same answer"));
        this.code = code;
        this.reason = reason;
    }

    /**
     * The ERROR code, 0x10 or above.
     *
     * @return the code
     */
    public int code() {
        return code;
    }

    /**
     * The ERROR's reason text, for people; branch on {@link #code()}, never on this.
     *
     * @return the server's text, possibly empty
     */
    public String reason() {
        return reason;
    }
}
