package io.github.monolock;

import java.io.EOFException;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.SocketChannel;
import javax.net.ssl.SSLEngine;
import javax.net.ssl.SSLEngineResult;
import javax.net.ssl.SSLEngineResult.HandshakeStatus;
import javax.net.ssl.SSLException;
import javax.net.ssl.SSLSession;

/**
 * TLS on a non-blocking channel through an {@link SSLEngine}. The engine is
 * made per connection by the client's SSLContext with the server's host and
 * port, so JSSE's session cache offers the session of an earlier connection
 * to the same server (resumption). Buffers are bounded: the one incoming
 * record buffer is the connection's own (a record may arrive in pieces), of
 * the engine's packet size; the plaintext and the outgoing records go
 * through buffers of the loop, shared by every connection, because each is
 * used up before the loop turns to another connection.
 */
final class TlsLayer {
    private static final ByteBuffer EMPTY = ByteBuffer.allocate(0);

    final SSLEngine engine;
    private ByteBuffer netIn; // write mode: position is the end of the bytes read
    private boolean done;
    private boolean resumed;
    /** Whole records wait in netIn that did not fit the last read's plaintext buffer. */
    private boolean more;

    TlsLayer(SSLEngine engine) {
        this.engine = engine;
        this.netIn = ByteBuffer.allocate(engine.getSession().getPacketBufferSize());
    }

    boolean handshakeDone() {
        return done;
    }

    /** Whether {@link #read} has decrypted records left over without reading the socket again. */
    boolean more() {
        return more;
    }

    boolean resumed() {
        return resumed;
    }

    /** Where the loop puts what {@link #wrap} produces: a buffer the loop sizes from this. */
    int packetSize() {
        return engine.getSession().getPacketBufferSize();
    }

    int appSize() {
        return engine.getSession().getApplicationBufferSize();
    }

    /**
     * Drives the handshake as far as the bytes at hand allow. Records to send
     * go to out (the caller writes them); returns true once it has finished.
     */
    boolean handshake(SocketChannel ch, ByteBuffer out, ByteBuffer app, Long createdBefore) throws IOException {
        while (!done) {
            HandshakeStatus hs = engine.getHandshakeStatus();
            switch (hs) {
                case NEED_TASK:
                    runTasks();
                    break;
                case NEED_WRAP: {
                    SSLEngineResult r = engine.wrap(EMPTY, out);
                    if (r.getStatus() == SSLEngineResult.Status.CLOSED) throw new SSLException("the TLS engine closed during the handshake");
                    if (r.getStatus() == SSLEngineResult.Status.BUFFER_OVERFLOW) {
                        if (out.position() == 0) throw new SSLException("a TLS handshake record larger than the engine's packet size");
                        return false; // the caller writes out first
                    }
                    finishedIf(r, createdBefore);
                    if (out.position() > 0) return false; // let the caller write the flight
                    break;
                }
                case NEED_UNWRAP:
                case NEED_UNWRAP_AGAIN: {
                    netIn.flip();
                    SSLEngineResult r;
                    try {
                        r = engine.unwrap(netIn, app);
                    } finally {
                        netIn.compact();
                    }
                    if (r.getStatus() == SSLEngineResult.Status.CLOSED) throw new EOFException("the server closed the TLS connection during the handshake");
                    if (r.getStatus() == SSLEngineResult.Status.BUFFER_UNDERFLOW) {
                        if (fill(ch) == 0) return false; // wait for more bytes
                        break;
                    }
                    finishedIf(r, createdBefore);
                    break;
                }
                default: // FINISHED, NOT_HANDSHAKING
                    done = true;
            }
        }
        return true;
    }

    private void finishedIf(SSLEngineResult r, Long createdBefore) {
        if (r.getHandshakeStatus() == HandshakeStatus.FINISHED) {
            done = true;
            resumed = createdBefore != null && engine.getSession().getCreationTime() < createdBefore;
            // JSSE (TLS 1.3) links each session issued by a ticket to the
            // session the ticket came from, and keeps the session of a full
            // handshake in the context's cache by its ID for the cache's
            // timeout (a day): every later resumed session of this client
            // then stays reachable from it, one per lock. Taking the full
            // handshake's session out of the cache now, before its ticket
            // arrives (so that nothing derived from it yet is invalidated
            // with it), leaves only the newest ticket's session cached; the
            // ticket still arrives and the next connection resumes with it.
            SSLSession s = engine.getSession();
            if (!resumed && "TLSv1.3".equals(s.getProtocol())) s.invalidate();
        }
    }

    /**
     * Reads what the socket has and decrypts every whole record into app
     * (cleared first, then flipped for reading). Returns -1 at the end of the
     * TCP stream, else the bytes of plaintext (0 for a close_notify alone).
     * Records the engine wants to send back (a KeyUpdate answer)
     * go to out.
     */
    int read(SocketChannel ch, ByteBuffer app, ByteBuffer out) throws IOException {
        int n = more ? 0 : fill(ch);
        more = false;
        app.clear();
        netIn.flip();
        try {
            while (netIn.hasRemaining()) {
                SSLEngineResult r = engine.unwrap(netIn, app);
                if (r.getHandshakeStatus() == HandshakeStatus.NEED_TASK) runTasks();
                if (engine.getHandshakeStatus() == HandshakeStatus.NEED_WRAP) engine.wrap(EMPTY, out);
                if (r.getStatus() == SSLEngineResult.Status.CLOSED) {
                    // close_notify. The server's FIN follows, maybe in another
                    // segment: the end is the TCP end of stream, since a close
                    // between the two would cross that FIN and leave a
                    // TIME_WAIT on both sides.
                    app.flip();
                    if (app.hasRemaining()) return app.remaining();
                    return n < 0 ? -1 : 0;
                }
                if (r.getStatus() == SSLEngineResult.Status.BUFFER_UNDERFLOW) break;
                if (r.getStatus() == SSLEngineResult.Status.BUFFER_OVERFLOW) {
                    more = true; // app is full: the caller takes it and calls again
                    break;
                }
            }
        } finally {
            netIn.compact();
        }
        app.flip();
        if (n < 0 && !app.hasRemaining()) return -1;
        return app.remaining();
    }

    /** Encrypts src into out. */
    void wrap(ByteBuffer src, ByteBuffer out) throws SSLException {
        while (src.hasRemaining()) {
            SSLEngineResult r = engine.wrap(src, out);
            if (r.getStatus() != SSLEngineResult.Status.OK) throw new SSLException("cannot encrypt a frame: " + r.getStatus());
        }
    }

    /** close_notify into out, best effort. */
    void closeOutbound(ByteBuffer out) {
        engine.closeOutbound();
        try {
            engine.wrap(EMPTY, out);
        } catch (SSLException ignored) {
            // The connection closes either way.
        }
    }

    /** Reads into the record buffer; -1 at end of stream; grows it once if the engine asks for larger records. */
    private int fill(SocketChannel ch) throws IOException {
        if (!netIn.hasRemaining()) {
            int want = engine.getSession().getPacketBufferSize();
            if (netIn.capacity() >= want) throw new SSLException("a TLS record larger than the engine's packet size (" + want + " bytes)");
            ByteBuffer b = ByteBuffer.allocate(want);
            netIn.flip();
            b.put(netIn);
            netIn = b;
        }
        int n = ch.read(netIn);
        if (n < 0 && !done) throw new EOFException("the server closed the connection during the TLS handshake");
        return n;
    }

    private void runTasks() {
        Runnable t;
        while ((t = engine.getDelegatedTask()) != null) t.run();
    }
}
