package io.github.monolock;

/**
 * The lock was still held by someone else when the wait the caller allowed
 * ran out ({@link MonolockClient#lock(String, java.time.Duration,
 * java.time.Duration)}; {@code tryLock} returns an empty Optional instead).
 * The attempt has left the queue.
 */
public final class LockBusyException extends MonolockException {
    private static final long serialVersionUID = 1L;
    /** The lock that was busy. */
    private final String lockName;

    LockBusyException(String lockName, String message) {
        super(message);
        this.lockName = lockName;
    }

    /**
     * The lock that was busy.
     *
     * @return its name
     */
    public String lockName() {
        return lockName;
    }
}
