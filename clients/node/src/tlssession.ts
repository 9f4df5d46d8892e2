/**
 * The TLS session of a Client's latest connection, offered to its next one:
 * a fleet that reconnects after a restart or a failover then costs the server
 * an abbreviated handshake instead of a full (mutual-)TLS one, where the
 * server can open the ticket (the same process, or servers that share
 * -tls-ticket-keys). A session the server refuses costs a full handshake and
 * nothing else; node:tls ignores one it cannot parse.
 */
export class TlsSessionCache {
  #latest: Buffer | undefined;

  /** The session to offer, if a connection has left one. */
  get latest(): Buffer | undefined {
    return this.#latest;
  }

  /**
   * Keeps the newest session, from a socket's 'session' event: under TLS 1.3
   * each ticket the server sends after the handshake brings one.
   */
  save(session: Buffer): void {
    this.#latest = session;
  }
}
