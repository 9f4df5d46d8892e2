package io.github.monolock.shedlock;

import io.github.monolock.FencingToken;
import io.github.monolock.Lease;
import io.github.monolock.MonolockClient;
import java.time.Duration;
import java.util.Optional;

/**
 * How the provider takes a lock: the client's try-lock in production, a fake in
 * the tests of the provider's timers.
 */
interface Locks {
    /**
     * The lock, held now, or empty when another holder has it: an attempt
     * that would queue is given up and its connection closed at once.
     */
    Optional<Held> tryLock(String name, Duration lease) throws InterruptedException;

    /** One held lock: one connection to the server. */
    interface Held {
        FencingToken token();

        /** Whether ownership is confirmed at this instant (see {@link Lease#isValid()}). */
        boolean isValid();

        /** Releases the lock by closing the connection; idempotent, returns once closed. */
        void close();
    }

    /** The real thing: {@link MonolockClient#tryLock(String, Duration)}. */
    static Locks of(MonolockClient client) {
        return (name, lease) -> client.tryLock(name, lease).map(LeaseHeld::new);
    }

    /** A {@link Lease} as a {@link Held}. */
    record LeaseHeld(Lease lease) implements Held {
        @Override
        public FencingToken token() {
            return lease.token();
        }

        @Override
        public boolean isValid() {
            return lease.isValid();
        }

        @Override
        public void close() {
            lease.close();
        }
    }
}
