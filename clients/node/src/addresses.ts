// The server addresses a Client was given, and the one that worked last. A
// client may be given several (a list, or a DNS name resolving to several):
// each attempt tries every resolved address in the configured order,
// starting from the last that worked, within one connect deadline, so a
// server that refuses (a standby, a stopped one) costs one refused connect,
// not the attempt.

import dns from 'node:dns';
import net from 'node:net';

import { parseAddress } from './validate.js';

/** One address to dial: host is a resolved IP (or the name, for a lookup that was not done); address and servername are as configured. */
export interface Candidate {
  readonly host: string;
  readonly port: number;
  /** The configured "host:port" it came from, for errors. */
  readonly address: string;
  /** The configured host, for TLS (SNI and the certificate's check). */
  readonly servername: string;
}

/** Resolves a host name to all its addresses (dns.lookup with all: true unless a test passes another). */
export type Lookup = (host: string) => Promise<readonly string[]>;

const systemLookup: Lookup = async (host) => (await dns.promises.lookup(host, { all: true })).map((a) => a.address);

export class AddressBook {
  readonly addresses: readonly string[];
  readonly #parsed: readonly { host: string; port: number; address: string }[];
  readonly #lookup: Lookup;
  /** host:port of the candidate that connected last. */
  #worked: string | undefined;

  /** Validates every address ("host:port", "[v6]:port"); throws InvalidArgumentError for one that is not. */
  constructor(addresses: readonly string[], lookup: Lookup = systemLookup) {
    this.addresses = addresses;
    this.#parsed = addresses.map((address) => ({ ...parseAddress(address), address }));
    this.#lookup = lookup;
  }

  /**
   * Every candidate, each once, in the configured order (a name's addresses
   * in the order the resolver gives), rotated to start from the one that
   * worked last; and why the names that did not resolve failed.
   */
  async candidates(): Promise<{ candidates: Candidate[]; failed: string[] }> {
    const all: Candidate[] = [];
    const failed: string[] = [];
    for (const { host, port, address } of this.#parsed) {
      let ips: readonly string[];
      try {
        ips = net.isIP(host) !== 0 ? [host] : await this.#lookup(host);
      } catch (err) {
        failed.push(`${address}: ${(err as Error).message}`);
        continue;
      }
      for (const ip of ips) {
        if (!all.some((c) => c.host === ip && c.port === port)) all.push({ host: ip, port, address, servername: host });
      }
    }
    const i = all.findIndex((c) => key(c) === this.#worked);
    return { candidates: i > 0 ? [...all.slice(i), ...all.slice(0, i)] : all, failed };
  }

  /** The candidate connected: the next attempt starts from it. */
  worked(c: Candidate): void {
    this.#worked = key(c);
  }
}

function key(c: Candidate): string {
  return `${c.host}:${c.port}`;
}
