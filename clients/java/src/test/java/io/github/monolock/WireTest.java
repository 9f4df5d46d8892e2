package io.github.monolock;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import org.junit.jupiter.api.Test;

/** Encoding and decoding against protocol/testdata/golden.txt. */
class WireTest {
    @Test
    void encodesEveryGoldenAcquire() {
        assertArrayEquals(Golden.bytes("acquire"), Wire.acquire(2000, "nightly-import".getBytes(StandardCharsets.UTF_8)));
        assertArrayEquals(Golden.bytes("acquire-name-255"), Wire.acquire(2000, Validate.name("a".repeat(255))));
        assertArrayEquals(Golden.bytes("acquire-name-utf8"), Wire.acquire(30000, Validate.name("straße/日本/🔒")));
        assertArrayEquals(Golden.bytes("acquire-lease-max"), Wire.acquire(0xffff_ffffL, Validate.name("x")));
    }

    @Test
    void decodesEveryGoldenServerFrame() {
        for (String name : Golden.names()) {
            byte[] b = Golden.bytes(name);
            if (b[0] != 0x11 && b[0] != 0x12 && b[0] != 0x13) continue;
            Wire.Decoder d = new Wire.Decoder();
            ByteBuffer in = ByteBuffer.wrap(b);
            assertTrue(d.next(in), name);
            assertFalse(in.hasRemaining(), name + ": the whole frame is taken");
            assertEquals(b[0] & 0xff, d.type, name);
            if (d.type == Wire.TYPE_ERROR) {
                assertEquals(b[1] & 0xff, d.code, name);
                assertEquals(new String(b, 3, b.length - 3, StandardCharsets.UTF_8), d.reason, name);
            }
        }
        Wire.Decoder d = new Wire.Decoder();
        assertTrue(d.next(ByteBuffer.wrap(Golden.bytes("acquired-token-max"))));
        assertEquals("18446744073709551615", FencingToken.ofBits(d.token).toString());
        assertTrue(d.next(ByteBuffer.wrap(Golden.bytes("acquired"))));
        assertEquals(0x0000000100000002L, d.token);
    }

    @Test
    void decodesFramesSplitAtEveryByte() {
        byte[] all = concat(Golden.bytes("waiting"), Golden.bytes("acquired-token-max"), Golden.bytes("error-reason-truncated"), Golden.bytes("error-empty-reason"));
        for (int cut = 0; cut <= all.length; cut++) {
            Wire.Decoder d = new Wire.Decoder();
            StringBuilder seen = new StringBuilder();
            for (ByteBuffer part : new ByteBuffer[] {ByteBuffer.wrap(all, 0, cut), ByteBuffer.wrap(all, cut, all.length - cut)}) {
                while (d.next(part)) seen.append(Integer.toHexString(d.type)).append(d.type == 0x13 ? ":" + d.code + ":" + d.reason.length() : "").append(' ');
            }
            assertEquals("11 12 13:1:254 13:1:0 ", seen.toString(), "cut at " + cut);
            assertEquals(0, d.pendingBytes());
        }
    }

    @Test
    void everyCodeHasItsCanonicalText() {
        assertEquals("server shutting down", Wire.codeText(0x01));
        assertEquals("not authorized for lock", Wire.codeText(0x18));
        assertEquals("unknown error code 0x7f", Wire.codeText(0x7f));
    }

    static byte[] concat(byte[]... parts) {
        ByteBuffer b = ByteBuffer.allocate(java.util.Arrays.stream(parts).mapToInt(p -> p.length).sum());
        for (byte[] p : parts) b.put(p);
        return b.array();
    }
}
