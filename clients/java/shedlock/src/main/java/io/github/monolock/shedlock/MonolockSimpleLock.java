package io.github.monolock.shedlock;

import io.github.monolock.FencingToken;
import java.util.Optional;
import net.javacrumbs.shedlock.core.AbstractSimpleLock;
import net.javacrumbs.shedlock.core.LockConfiguration;
import net.javacrumbs.shedlock.core.SimpleLock;

/**
 * A lock taken by {@link MonolockLockProvider}: one connection to the server,
 * with the fencing token of its grant. An extension returns a new
 * {@code MonolockSimpleLock} on the same connection, with the same token.
 */
public final class MonolockSimpleLock extends AbstractSimpleLock {
    private final Hold hold;

    MonolockSimpleLock(LockConfiguration configuration, Hold hold) {
        super(configuration);
        this.hold = hold;
    }

    /**
     * The fencing token of the grant: pass it with every write the task makes
     * (for example to {@code Fences.admit}), so that a store refuses the writes
     * of a holder that has been superseded.
     *
     * @return the token, the same for this lock and all its extensions
     */
    public FencingToken token() {
        return hold.token();
    }

    /**
     * Whether the lock is held at this instant: not unlocked past its
     * lockAtLeastFor, not closed at lockAtMostFor, and ownership confirmed by
     * the server within 0.8 × the lease. Once false, it stays false.
     *
     * @return whether the task may still act as the holder
     */
    public boolean isValid() {
        return hold.isValid();
    }

    /** Keeps the connection until lockAtLeastUntil, or closes it now when that has passed. */
    @Override
    protected void doUnlock() {
        hold.unlock(lockConfiguration.getLockAtLeastUntil());
    }

    /**
     * Moves lockAtMostUntil and lockAtLeastUntil to those of the new
     * configuration, on the same connection; empty, with the connection
     * closed, once the lock is no longer valid.
     */
    @Override
    protected Optional<SimpleLock> doExtend(LockConfiguration newConfiguration) {
        if (!hold.extend(newConfiguration.getLockAtMostUntil())) return Optional.empty();
        return Optional.of(new MonolockSimpleLock(newConfiguration, hold));
    }
}
