/**
 * A ShedLock lock provider on monolock: {@link io.github.monolock.shedlock.MonolockLockProvider}.
 * A dead node's lock is freed after the provider's lease, not after
 * lockAtMostFor, and every lock carries a fencing token.
 */
package io.github.monolock.shedlock;
