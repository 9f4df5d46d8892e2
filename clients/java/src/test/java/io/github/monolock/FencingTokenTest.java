package io.github.monolock;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.math.BigInteger;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import org.junit.jupiter.api.Test;

/** Tokens pass 2^63 on 2038-01-19: they order and print as unsigned. */
class FencingTokenTest {
    private static final FencingToken MAX_SIGNED = FencingToken.ofBits(Long.MAX_VALUE); // 2^63 − 1
    private static final FencingToken TWO_63 = FencingToken.ofBits(Long.MIN_VALUE);     // 2^63
    private static final FencingToken MAX = FencingToken.ofBits(-1L);                    // 2^64 − 1

    @Test
    void comparesAsUnsigned() {
        assertTrue(MAX_SIGNED.compareTo(TWO_63) < 0);
        assertTrue(TWO_63.compareTo(MAX) < 0);
        assertTrue(MAX.isAfter(TWO_63));
        List<FencingToken> l = new ArrayList<>(List.of(MAX, TWO_63, FencingToken.ofBits(1), MAX_SIGNED));
        Collections.sort(l);
        assertEquals(List.of(FencingToken.ofBits(1), MAX_SIGNED, TWO_63, MAX), l);
    }

    @Test
    void printsAndParsesTheUnsignedDecimal() {
        assertEquals("9223372036854775807", MAX_SIGNED.toString());
        assertEquals("9223372036854775808", TWO_63.toString());
        assertEquals("18446744073709551615", MAX.toString());
        assertEquals(MAX, FencingToken.parse("18446744073709551615"));
        assertEquals(new BigInteger("18446744073709551615"), MAX.toBigInteger());
        assertEquals(BigInteger.ONE.shiftLeft(63), TWO_63.toBigInteger());
        assertEquals(-1L, MAX.toLong(), "toLong is the unsigned bits");
        assertThrows(NumberFormatException.class, () -> FencingToken.parse("-1"));
        assertThrows(NumberFormatException.class, () -> FencingToken.parse("18446744073709551616"));
        assertThrows(NumberFormatException.class, () -> FencingToken.parse(""));
    }

    @Test
    void equalsAndHash() {
        assertEquals(FencingToken.ofBits(5), FencingToken.parse("5"));
        assertEquals(FencingToken.ofBits(5).hashCode(), FencingToken.parse("5").hashCode());
    }
}
