package io.github.monolock;

/**
 * The base of every exception this client throws, for one catch clause. Each
 * message says what went wrong and what to do.
 */
public class MonolockException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    MonolockException(String message) {
        super(message);
    }

    MonolockException(String message, Throwable cause) {
        super(message, cause);
    }
}
