package io.github.monolock;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.SelectionKey;
import java.nio.channels.SocketChannel;
import java.util.List;
import java.util.concurrent.CompletableFuture;

/**
 * One connection's state as the I/O loop keeps it: the addresses to try, the
 * socket, the session's rules, its slot in the timer, and the futures that
 * report to the caller. Touched by the loop's thread only, except the futures.
 */
final class Connection {
    final IoLoop loop;
    final SessionStep step;
    final CompletableFuture<Lease> granted = new CompletableFuture<>();
    /** Where the client records the address whose connection came up. */
    final Addresses addresses;
    /** The addresses of this attempt, in the order they are tried. */
    final List<Addresses.Candidate> candidates;
    /** The index of the next candidate to try. */
    int nextCandidate;
    /** The candidate being connected to, or connected. */
    Addresses.Candidate remote;
    /** Why the last candidate's connect failed. */
    IOException connectFailure;

    SocketChannel channel;
    SelectionKey key;
    /** null for plain TCP. */
    TlsLayer tls;
    /** Bytes a write left unsent (rare: a frame is a few bytes); null when none. */
    ByteBuffer pendingOut;
    /** A frame the step asked for is in pendingOut: the step hears written once it is out. */
    boolean stepWritePending;
    Lease lease;
    /** When the TLS handshake began (wall clock, ms): a session created before it was resumed. */
    Long tlsStarted;

    // The timer's bookkeeping (TimerHeap).
    int heapIndex = -1;
    long wakeAt = SessionStep.NEVER;

    Connection(IoLoop loop, Addresses addresses, List<Addresses.Candidate> candidates, SessionStep step) {
        this.loop = loop;
        this.addresses = addresses;
        this.candidates = candidates;
        this.step = step;
    }
}
