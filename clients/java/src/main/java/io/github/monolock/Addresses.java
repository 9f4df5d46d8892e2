package io.github.monolock;

import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.UnknownHostException;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;

/**
 * The server addresses a client was given (host:port each, a host that is a
 * name standing for every address it resolves to), and the one whose
 * connection came up last. Each connection attempt tries them in order,
 * starting from the one that worked last, and moves on to the next on a
 * refused or failed connect, all within the attempt's one connect deadline:
 * a client given the primary and its standby follows whichever serves.
 * Thread-safe: the attempts of many threads read it, the I/O thread records
 * what worked.
 */
final class Addresses {
    /** Resolves a host to its addresses (InetAddress.getAllByName unless a test gives another). */
    @FunctionalInterface
    interface Resolver {
        InetAddress[] resolve(String host) throws UnknownHostException;
    }

    /** One address to connect to: the host as given (TLS checks the server's certificate against it) and where it resolved. */
    static final class Candidate {
        final String host;
        final InetSocketAddress address;

        Candidate(String host, InetSocketAddress address) {
            this.host = host;
            this.address = address;
        }

        @Override
        public String toString() {
            String ip = address.getAddress().getHostAddress();
            String hostPort = (ip.contains(":") ? "[" + ip + "]" : ip) + ":" + address.getPort();
            return host.equals(ip) ? hostPort : host + " (" + hostPort + ")";
        }
    }

    private final List<String> given;
    private final List<String> hosts = new ArrayList<>();
    private final List<Integer> ports = new ArrayList<>();
    private final Resolver resolver;
    private volatile InetSocketAddress lastWorked;

    /** @param given host:port or [v6]:port each, at least one; refused here when one is not */
    Addresses(List<String> given, Resolver resolver) {
        if (given == null || given.isEmpty()) {
            throw new IllegalArgumentException("monolock: no server address: give at least one host:port, for example 127.0.0.1:7070");
        }
        for (String a : given) {
            String[] hp = Validate.address(a);
            hosts.add(hp[0]);
            ports.add(Integer.parseInt(hp[1]));
        }
        this.given = Collections.unmodifiableList(new ArrayList<>(given));
        this.resolver = resolver;
    }

    List<String> given() {
        return given;
    }

    /**
     * Every address to try for one attempt, resolved now (so a name moved to
     * a standby is followed): the one that worked last first, then the others
     * in the order given, a name's addresses in the resolver's order.
     *
     * @throws ServerUnavailableException when no host resolves
     */
    List<Candidate> candidates() {
        List<Candidate> out = new ArrayList<>();
        StringBuilder unresolved = new StringBuilder();
        for (int i = 0; i < hosts.size(); i++) {
            try {
                for (InetAddress ip : resolver.resolve(hosts.get(i))) {
                    out.add(new Candidate(hosts.get(i), new InetSocketAddress(ip, ports.get(i))));
                }
            } catch (UnknownHostException e) {
                unresolved.append(unresolved.length() == 0 ? "" : ", ").append(hosts.get(i));
            }
        }
        if (out.isEmpty()) {
            throw new ServerUnavailableException("monolock: cannot resolve " + unresolved + " (from " + describe()
                    + "); check the names or the resolver", null, true);
        }
        InetSocketAddress first = lastWorked;
        for (int i = 0; i < out.size(); i++) {
            if (out.get(i).address.equals(first)) {
                out.add(0, out.remove(i));
                break;
            }
        }
        return out;
    }

    /** A connection to a came up: the next attempt starts there. */
    void worked(InetSocketAddress a) {
        lastWorked = a;
    }

    /** The addresses as given, for messages. */
    String describe() {
        return String.join(", ", given);
    }
}
