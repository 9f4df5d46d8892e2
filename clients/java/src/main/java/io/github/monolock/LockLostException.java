package io.github.monolock;

/**
 * Ownership of a held lock ended without a release: no answer from the server
 * within 0.8 × lease of the newest answered request, the connection closed or
 * failed, an ERROR from the server, or a frame that breaks the protocol. The
 * guarded work must stop at once; the lock may belong to someone else already.
 * {@link #getCause()} has the detail.
 */
public final class LockLostException extends MonolockException {
    private static final long serialVersionUID = 1L;

    /** Why a held lock was lost. */
    public enum Why {
        /** No answer within 0.8 × lease: the connection stays open until the work stops or the lease has passed since the last request was written. */
        TIMEOUT,
        /** The connection ended or failed. */
        CLOSED,
        /** The server sent an ERROR (0x01 shutting down, 0x02 closed by administrator, …). */
        SERVER,
        /** The server broke the protocol. */
        PROTOCOL
    }

    /** The lock that was lost. */
    private final String lockName;
    /** Why it was lost. */
    private final Why why;
    /** The System.nanoTime() reading at which the client decided the loss. */
    private final long decidedAtNanos;

    LockLostException(String lockName, Why why, MonolockException cause, long decidedAtNanos) {
        super("monolock: lock \"" + lockName + "\" lost: " + cause.getMessage()
                + "; stop the guarded work now, and take the lock again to go on", cause);
        this.lockName = lockName;
        this.why = why;
        this.decidedAtNanos = decidedAtNanos;
    }

    /**
     * The lock that was lost.
     *
     * @return its name
     */
    public String lockName() {
        return lockName;
    }

    /**
     * Why it was lost.
     *
     * @return the kind of loss
     */
    public Why why() {
        return why;
    }

    /**
     * When the client decided the loss: the {@link System#nanoTime()} reading
     * its I/O thread took for the timer or the read that ended ownership,
     * before this exception was made and before any callback of
     * {@link Lease#lost()} ran. The work may learn of the loss later than
     * this on a busy machine; compare with {@code System.nanoTime()} to see
     * how much later.
     *
     * @return a {@code System.nanoTime()} value
     */
    public long decidedAtNanos() {
        return decidedAtNanos;
    }

    /**
     * The ERROR code when the server ended the session with one (0x01, 0x02, …), else -1.
     *
     * @return the code or -1
     */
    public int code() {
        Throwable c = getCause();
        if (c instanceof ServerUnavailableException) return ((ServerUnavailableException) c).code().orElse(-1);
        if (c instanceof MonolockServerException) return ((MonolockServerException) c).code();
        return -1;
    }
}
