package io.github.monolock;

/**
 * The work {@link MonolockClient#run} does while holding a lock.
 *
 * @param <E> the checked exception the work may throw ({@link RuntimeException} when none)
 */
@FunctionalInterface
public interface LeaseWork<E extends Exception> {
    /**
     * Does the guarded work. The thread running it is interrupted the moment
     * the lock is lost; check {@link Lease#isValid()} before each side effect
     * and pass {@link Lease#token()} with every write.
     *
     * @param lease the held lock
     * @throws E what the work throws
     */
    void run(Lease lease) throws E;
}
