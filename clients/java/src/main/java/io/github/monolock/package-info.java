/**
 * The Java client of monolock, a single-node lock server: FIFO queues,
 * leases kept by heartbeats, and fencing tokens that only grow.
 *
 * <p>Start at {@link io.github.monolock.MonolockClient}; a held lock is a
 * {@link io.github.monolock.Lease}, its token a
 * {@link io.github.monolock.FencingToken} (unsigned 64-bit). Every exception is
 * a {@link io.github.monolock.MonolockException}, except
 * {@link java.lang.IllegalArgumentException} for input refused before
 * connecting. No runtime dependencies: TLS is JSSE's.
 */
package io.github.monolock;
