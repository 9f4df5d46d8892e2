package io.github.monolock;

import java.io.IOException;
import java.net.StandardSocketOptions;
import java.nio.ByteBuffer;
import java.nio.channels.ClosedSelectorException;
import java.nio.channels.SelectionKey;
import java.nio.channels.Selector;
import java.nio.channels.SocketChannel;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.ThreadFactory;
import java.util.concurrent.atomic.AtomicInteger;
import javax.net.ssl.SSLContext;
import javax.net.ssl.SSLEngine;
import javax.net.ssl.SSLException;
import javax.net.ssl.SSLParameters;

/**
 * The one thread of a client that does all its I/O and keeps all its timers:
 * a {@link Selector} over every connection, and one {@link TimerHeap} whose
 * earliest entry bounds each select. Other threads hand it work through
 * {@link #execute}; every connection's state is touched on this thread only,
 * so none of it needs a lock. Each input to a connection's
 * {@link SessionStep} carries one reading of the monotonic clock, and the
 * actions the step returns are carried out at once.
 */
final class IoLoop implements Runnable {
    private static final AtomicInteger SEQ = new AtomicInteger();
    private static final int READ_BUFFER = 16 * 1024;

    private final Selector selector;
    private final Thread thread;
    private final ConcurrentLinkedQueue<Runnable> tasks = new ConcurrentLinkedQueue<>();
    private final TimerHeap timers = new TimerHeap();
    private final SSLContext ssl;
    private final ByteBuffer readBuffer = ByteBuffer.allocateDirect(READ_BUFFER);
    /** Where a plain connection's frame is copied to be written: no buffer made per heartbeat. */
    private final ByteBuffer writeBuffer = ByteBuffer.allocateDirect(Wire.ACQUIRE_HEADER + Validate.MAX_NAME_BYTES);
    private final java.util.function.Consumer<SelectionKey> onReady = k -> ready((Connection) k.attachment(), k);
    // Shared by every TLS connection: each is used up before the loop turns to another.
    private ByteBuffer tlsApp;
    private ByteBuffer tlsOut;
    private volatile boolean stopping;
    private volatile boolean dead;

    IoLoop(SSLContext ssl, ThreadFactory threads) throws IOException {
        this.ssl = ssl;
        this.selector = Selector.open();
        this.thread = threads != null ? threads.newThread(this) : new Thread(this, "monolock-io-" + SEQ.incrementAndGet());
        thread.setDaemon(true);
        thread.start();
    }

    boolean inLoop() {
        return Thread.currentThread() == thread;
    }

    /** Runs r on the loop's thread, soon. */
    void execute(Runnable r) {
        tasks.add(r);
        if (dead) {
            drainAfterStop(); // no loop any more: run it here
        } else if (!inLoop()) {
            selector.wakeup();
        }
    }

    private synchronized void drainAfterStop() {
        Runnable t;
        while ((t = tasks.poll()) != null) t.run();
    }

    /**
     * Closes every connection (releasing their locks) and ends the thread;
     * returns once it has, or after the wait given, or at once when called on
     * the loop's own thread.
     */
    void shutdown(long waitMillis) {
        stopping = true;
        selector.wakeup();
        if (inLoop()) return;
        try {
            thread.join(waitMillis);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt(); // the loop finishes without us
        }
    }

    @Override
    public void run() {
        try {
            while (!stopping) {
                Runnable t;
                while ((t = tasks.poll()) != null) t.run();
                // After the tasks, which may have armed timers (a new connection's connect timeout).
                long now = System.nanoTime();
                long next = timers.earliest();
                long waitMs = next == SessionStep.NEVER ? 0 : Math.max(1, (next - now + 999_999) / 1_000_000);
                // A task queued by this thread (a close in a callback) woke no one: do not block then.
                if (!tasks.isEmpty() || (next != SessionStep.NEVER && next <= now)) selector.selectNow(onReady);
                else selector.select(onReady, waitMs);
                now = System.nanoTime();
                while (timers.size() > 0 && timers.peek().wakeAt <= now) {
                    Connection c = timers.peek();
                    timers.remove(c);
                    apply(c, c.step.timer(now));
                }
            }
        } catch (IOException | ClosedSelectorException e) {
            // The selector itself failed: nothing can be served any more.
            System.err.println("monolock: the client's I/O loop stopped: " + e);
        } finally {
            for (SelectionKey k : selector.keys()) {
                Connection c = (Connection) k.attachment();
                apply(c, c.step.abandon(System.nanoTime()));
            }
            dead = true;
            drainAfterStop();
            try {
                selector.close();
            } catch (IOException ignored) {
                // Nothing is left to close.
            }
        }
    }

    // --- connections -------------------------------------------------------

    /** Opens c's connection, trying its addresses in order; on the loop's thread. */
    void open(Connection c) {
        apply(c, c.step.dial(System.nanoTime()));
        if (stopping) {
            apply(c, c.step.abandon(System.nanoTime()));
            return;
        }
        connectNext(c);
    }

    /**
     * Connects to the next of c's addresses; a refused or failed connect
     * moves on to the one after it, within the step's one connect deadline.
     * When none is left, the step hears that the connect failed.
     */
    private void connectNext(Connection c) {
        while (!c.step.isClosed() && c.nextCandidate < c.candidates.size()) {
            c.remote = c.candidates.get(c.nextCandidate++);
            SocketChannel ch = null;
            boolean up;
            try {
                ch = SocketChannel.open();
                c.channel = ch;
                ch.configureBlocking(false);
                ch.setOption(StandardSocketOptions.TCP_NODELAY, true);
                c.key = ch.register(selector, SelectionKey.OP_CONNECT, c);
                up = ch.connect(c.remote.address);
            } catch (IOException e) {
                c.connectFailure = e;
                closeQuietly(ch);
                continue;
            }
            if (up) connectDone(c);
            return; // the selector reports the connect's outcome
        }
        apply(c, c.step.closed(System.nanoTime(), SessionStep.Closed.BROKEN, c.connectFailure));
    }

    private void ready(Connection c, SelectionKey k) {
        if (!k.isValid()) return;
        if (k.isConnectable()) {
            try {
                c.channel.finishConnect();
            } catch (IOException e) {
                c.connectFailure = e;
                closeQuietly(c.channel);
                connectNext(c);
                return;
            }
            connectDone(c);
            return;
        }
        if (k.isWritable()) {
            try {
                flush(c);
            } catch (IOException e) {
                writeFailed(c, e);
                return;
            }
        }
        if (k.isValid() && k.isReadable()) {
            try {
                read(c);
            } catch (IOException e) {
                readFailed(c, e);
            }
        }
    }

    /** A failed read (or TLS handshake): a TLS alert is the server refusing the client, anything else a broken connection. */
    private void readFailed(Connection c, IOException e) {
        SessionStep.Closed how = e instanceof SSLException ? SessionStep.Closed.TLS : SessionStep.Closed.BROKEN;
        apply(c, c.step.closed(System.nanoTime(), how, e));
    }

    /** A failed write: of a frame the step asked for, or of the TLS handshake. */
    private void writeFailed(Connection c, IOException e) {
        if (!c.stepWritePending) {
            readFailed(c, e);
            return;
        }
        c.stepWritePending = false;
        apply(c, c.step.written(System.nanoTime(), SessionStep.WriteError.BROKEN, e));
    }

    private void connectDone(Connection c) {
        c.key.interestOps(SelectionKey.OP_READ);
        if (ssl == null) {
            connected(c);
            return;
        }
        try {
            SSLEngine engine = ssl.createSSLEngine(c.remote.host, c.remote.address.getPort());
            engine.setUseClientMode(true);
            SSLParameters p = engine.getSSLParameters();
            p.setEndpointIdentificationAlgorithm("HTTPS"); // the server's certificate must name the host or IP dialled
            engine.setSSLParameters(p);
            c.tls = new TlsLayer(engine);
            c.tlsStarted = System.currentTimeMillis();
            engine.beginHandshake();
            handshake(c);
        } catch (IOException e) {
            readFailed(c, e);
        }
    }

    /** The connection is up (the handshake done): the next attempt starts from this address; ACQUIRE goes out. */
    private void connected(Connection c) {
        c.addresses.worked(c.remote.address);
        c.step.connectedTo(c.remote.toString());
        apply(c, c.step.start(System.nanoTime()));
    }

    /** Runs the handshake as far as it goes: writes each flight, then reads; ACQUIRE goes out once it is done. */
    private void handshake(Connection c) throws IOException {
        ByteBuffer out = tlsOut(c.tls);
        while (true) {
            out.clear();
            boolean done = c.tls.handshake(c.channel, out, tlsApp(c.tls), c.tlsStarted);
            out.flip();
            boolean flight = out.hasRemaining();
            writeNet(c, out);
            if (done) break;
            // Wait for OP_WRITE (flush continues) or for the server's bytes (read continues).
            if (c.pendingOut != null || !flight) return;
        }
        connected(c);
    }

    private void read(Connection c) throws IOException {
        if (c.tls != null && !c.tls.handshakeDone()) {
            handshake(c);
            return;
        }
        ByteBuffer in;
        int n;
        if (c.tls == null) {
            in = readBuffer;
            in.clear();
            n = c.channel.read(in);
            in.flip();
        } else {
            ByteBuffer out = tlsOut(c.tls);
            out.clear();
            in = tlsApp(c.tls);
            n = c.tls.read(c.channel, in, out);
            out.flip();
            writeNet(c, out);
        }
        long now = System.nanoTime();
        if (n < 0) {
            apply(c, c.step.closed(now, SessionStep.Closed.EOF, null));
            return;
        }
        if (n > 0) apply(c, c.step.frames(in, now));
        if (c.tls != null && c.tls.more() && c.channel.isOpen()) read(c); // records that did not fit the plaintext buffer
    }

    /**
     * Carries out the actions of one step, in their order: the grant, the
     * deadline the work checks, the failure or the loss; then the write
     * (whose return is the next event, written), the close or the timer.
     */
    void apply(Connection c, SessionStep.Actions a) {
        SessionStep s = c.step;
        boolean granted = false;
        boolean failed = false;
        boolean lost = false;
        boolean close = false;
        boolean abort = false;
        byte[] send = null;
        long wake = SessionStep.NEVER;
        for (int i = 0; i < a.size(); i++) {
            switch (a.kind(i)) {
                case GRANTED:
                    granted = true;
                    c.lease = new Lease(c, FencingToken.ofBits(a.value(i)));
                    break;
                case VALID_UNTIL:
                    if (c.lease != null) c.lease.deadline = a.value(i);
                    break;
                case FAILED:
                    failed = true;
                    break;
                case LOST:
                    lost = true;
                    break;
                case SEND:
                    send = a.frame();
                    break;
                case CLOSE:
                    close = true;
                    break;
                case ABORT:
                    close = true;
                    abort = true;
                    break;
                case WAKE:
                    wake = a.value(i);
                    break;
                default:
                    break; // waiting and ack: this client has no observers for them
            }
        }
        // Everything the step returned is read: the steps below refill its actions.
        boolean stop = false;
        if (granted) {
            if (lost) {
                // Frames read with the grant ended it already: the caller gets the loss, no work began.
                c.granted.completeExceptionally(s.lost());
                stop = true;
            } else if (!c.granted.complete(c.lease)) {
                stop = true; // the caller gave up waiting just now
            }
        }
        if (failed) c.granted.completeExceptionally(s.failure());
        if (lost && c.lease != null) c.lease.markLost(s.lost());
        if (close) close(c, abort);
        timers.set(c, close ? SessionStep.NEVER : wake);
        if (send != null) writeFrame(c, send);
        if (stop) apply(c, s.stop(System.nanoTime()));
    }

    /** Writes a frame the step asked for, and tells the step when the write has returned. */
    private void writeFrame(Connection c, byte[] frame) {
        try {
            writeBuffer.clear();
            writeBuffer.put(frame).flip();
            write(c, writeBuffer);
        } catch (IOException e) {
            apply(c, c.step.written(System.nanoTime(), SessionStep.WriteError.BROKEN, e));
            return;
        }
        if (c.pendingOut != null) {
            c.stepWritePending = true; // written once flush has sent the rest
            return;
        }
        apply(c, c.step.written(System.nanoTime(), null, null));
    }

    /**
     * Closes c's connection: normally once the server has closed (it sent the
     * first FIN and keeps the TIME_WAIT), or abortively, SO_LINGER {on, 0},
     * an RST that leaves no TIME_WAIT, when the client gives up on the server.
     */
    private void close(Connection c, boolean abort) {
        if (c.channel != null && c.channel.isOpen()) {
            if (abort) {
                try {
                    c.channel.setOption(StandardSocketOptions.SO_LINGER, 0);
                } catch (IOException | UnsupportedOperationException ignored) {
                    // The close is an ordinary one then.
                }
            } else if (c.tls != null && c.tls.handshakeDone()) {
                ByteBuffer out = tlsOut(c.tls);
                out.clear();
                c.tls.closeOutbound(out);
                out.flip();
                try {
                    if (c.pendingOut == null) c.channel.write(out);
                } catch (IOException ignored) {
                    // Closing anyway.
                }
            }
            try {
                c.channel.close(); // cancels the key; an orderly FIN
            } catch (IOException ignored) {
                // The descriptor is released either way.
            }
        }
        c.pendingOut = null;
        if (c.lease != null) c.lease.closed.complete(null);
        if (!c.granted.isDone()) c.granted.cancel(false);
    }

    // --- writes ------------------------------------------------------------

    private void write(Connection c, ByteBuffer frame) throws IOException {
        if (c.tls == null) {
            writeNet(c, frame);
            return;
        }
        ByteBuffer out = tlsOut(c.tls);
        out.clear();
        c.tls.wrap(frame, out);
        out.flip();
        writeNet(c, out);
    }

    /** Writes what the socket takes and keeps the rest for OP_WRITE; bytes queued before go first. */
    private void writeNet(Connection c, ByteBuffer b) throws IOException {
        if (!b.hasRemaining()) return;
        if (c.pendingOut == null) {
            c.channel.write(b);
            if (!b.hasRemaining()) return;
            c.pendingOut = ByteBuffer.allocate(b.remaining()).put(b).flip();
        } else {
            ByteBuffer joined = ByteBuffer.allocate(c.pendingOut.remaining() + b.remaining());
            c.pendingOut = joined.put(c.pendingOut).put(b).flip();
        }
        c.key.interestOps(SelectionKey.OP_READ | SelectionKey.OP_WRITE);
    }

    private void flush(Connection c) throws IOException {
        if (c.pendingOut != null) {
            c.channel.write(c.pendingOut);
            if (c.pendingOut.hasRemaining()) return;
            c.pendingOut = null;
        }
        c.key.interestOps(SelectionKey.OP_READ);
        if (c.stepWritePending) {
            c.stepWritePending = false;
            apply(c, c.step.written(System.nanoTime(), null, null));
            return;
        }
        if (c.tls != null && !c.tls.handshakeDone()) handshake(c);
    }

    private ByteBuffer tlsOut(TlsLayer t) {
        if (tlsOut == null || tlsOut.capacity() < t.packetSize()) tlsOut = ByteBuffer.allocate(t.packetSize());
        return tlsOut;
    }

    private ByteBuffer tlsApp(TlsLayer t) {
        if (tlsApp == null || tlsApp.capacity() < t.appSize()) tlsApp = ByteBuffer.allocate(t.appSize() + 64);
        return tlsApp;
    }

    private static void closeQuietly(SocketChannel ch) {
        if (ch == null) return;
        try {
            ch.close();
        } catch (IOException ignored) {
            // The descriptor is released either way.
        }
    }
}
