package io.github.monolock;

import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.nio.channels.SelectionKey;
import java.nio.channels.SocketChannel;
import java.util.concurrent.CompletableFuture;

/**
 * One connection's state as the I/O loop keeps it: the socket, the session's
 * rules, its slot in the timer, and the futures that report to the caller.
 * Touched by the loop's thread only, except the futures.
 */
final class Connection {
    final IoLoop loop;
    final InetSocketAddress remote;
    final SessionStep step;
    final CompletableFuture<Lease> granted = new CompletableFuture<>();

    SocketChannel channel;
    SelectionKey key;
    /** null for plain TCP. */
    TlsLayer tls;
    /** Bytes a write left unsent (rare: a frame is a few bytes); null when none. */
    ByteBuffer pendingOut;
    Lease lease;
    /** When the TLS handshake began (wall clock, ms): a session created before it was resumed. */
    Long tlsStarted;

    // The timer's bookkeeping (TimerHeap).
    int heapIndex = -1;
    long wakeAt = SessionStep.NEVER;

    Connection(IoLoop loop, InetSocketAddress remote, SessionStep step) {
        this.loop = loop;
        this.remote = remote;
        this.step = step;
    }
}
