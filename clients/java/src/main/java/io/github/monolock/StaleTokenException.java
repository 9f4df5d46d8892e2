package io.github.monolock;

import java.sql.SQLException;

/**
 * {@link Fences#admit} refused the token: a larger one was admitted for the
 * resource already, so the lock has been handed on and this holder's write
 * must not land. The transaction has been rolled back. It is an
 * {@link SQLException}, so the caller's usual JDBC error handling sees it.
 */
public final class StaleTokenException extends SQLException {
    private static final long serialVersionUID = 1L;
    /** The resource whose fence refused the token. */
    private final String resource;
    /** The refused token, in unsigned decimal. */
    private final String token;

    StaleTokenException(String resource, FencingToken token) {
        super("monolock fence: stale token " + token + " for \"" + resource + "\": a larger token was admitted,"
                + " so the lock was handed on; the transaction is rolled back, and this holder must stop");
        this.resource = resource;
        this.token = token.toString();
    }

    /**
     * The resource whose fence refused the token.
     *
     * @return the resource, usually the lock's name
     */
    public String resource() {
        return resource;
    }

    /**
     * The refused token.
     *
     * @return the token
     */
    public FencingToken token() {
        return FencingToken.parse(token);
    }
}
