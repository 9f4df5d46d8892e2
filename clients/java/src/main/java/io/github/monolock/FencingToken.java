package io.github.monolock;

import java.math.BigInteger;

/**
 * A fencing token: the unsigned 64-bit number the server hands out with each
 * grant, larger than every token granted before it (across all locks and
 * across restarts). Pass it with every write the lock guards, and have the
 * resource refuse a token smaller than the largest it has accepted.
 *
 * <p>Tokens pass 2<sup>63</sup> on 2038-01-19 (the server puts the unix seconds
 * in their upper 32 bits), so they are compared as <em>unsigned</em> numbers:
 * {@link #compareTo} orders them as the server issued them, and
 * {@link #toString} prints the unsigned decimal ("9223372036854775808", never
 * "-9223372036854775808"). Store them as text, as {@code numeric(20,0)} or
 * {@code BIGINT UNSIGNED}, or as {@link #toBigInteger()}; never as a signed
 * {@code long} compared with {@code <}.
 *
 * <p>Instances are immutable and safe to share between threads.
 */
public final class FencingToken implements Comparable<FencingToken> {
    private final long bits;

    private FencingToken(long bits) {
        this.bits = bits;
    }

    /**
     * The token whose unsigned 64-bit value has these bits (as
     * {@link #toLong()} returns them).
     *
     * @param unsignedBits the token's 64 bits, read as an unsigned number
     * @return the token
     */
    public static FencingToken ofBits(long unsignedBits) {
        return new FencingToken(unsignedBits);
    }

    /**
     * Parses the unsigned decimal form that {@link #toString} prints.
     *
     * @param decimal 0 to 18446744073709551615, digits only
     * @return the token
     * @throws NumberFormatException when the text is not such a number
     */
    public static FencingToken parse(String decimal) {
        if (decimal.isEmpty() || decimal.charAt(0) == '+' || decimal.charAt(0) == '-') {
            throw new NumberFormatException("a fencing token is an unsigned decimal number of 1 to 20 digits, got \"" + decimal + "\"");
        }
        return new FencingToken(Long.parseUnsignedLong(decimal));
    }

    /**
     * The token's 64 bits in a {@code long}, for storing or sending them as
     * they are. <strong>The value is unsigned</strong>: a token of 2<sup>63</sup>
     * or more comes out negative here. Compare with
     * {@link Long#compareUnsigned}, print with {@link Long#toUnsignedString},
     * or use {@link #compareTo}, {@link #toString} and {@link #toBigInteger}
     * instead.
     *
     * @return the unsigned bits of the token
     */
    public long toLong() {
        return bits;
    }

    /**
     * The token as a non-negative {@link BigInteger}, 0 to 2<sup>64</sup> − 1.
     *
     * @return the token's value
     */
    public BigInteger toBigInteger() {
        BigInteger b = BigInteger.valueOf(bits & Long.MAX_VALUE);
        return bits < 0 ? b.setBit(63) : b;
    }

    /**
     * Orders tokens as unsigned 64-bit numbers, which is the order in which the
     * server issued them.
     */
    @Override
    public int compareTo(FencingToken other) {
        return Long.compareUnsigned(bits, other.bits);
    }

    /**
     * Whether this token is newer than the other (unsigned comparison).
     *
     * @param other the token to compare with
     * @return true when this token is larger
     */
    public boolean isAfter(FencingToken other) {
        return compareTo(other) > 0;
    }

    /** The unsigned decimal form, such as {@code 18446744073709551615}. */
    @Override
    public String toString() {
        return Long.toUnsignedString(bits);
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof FencingToken && ((FencingToken) o).bits == bits;
    }

    @Override
    public int hashCode() {
        return Long.hashCode(bits);
    }
}
