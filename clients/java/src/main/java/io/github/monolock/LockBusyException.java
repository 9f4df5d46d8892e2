package io.github.monolock;

/**
 * The lock is held by someone else and the caller chose not to wait
 * ({@link MonolockClient#tryLock(String, java.time.Duration)}), or not that
 * long. The attempt has left the queue.
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
