package io.github.monolock;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.fail;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;

/**
 * The step scripts of protocol/testdata/step (docs/protocol.md, "The client
 * step") against {@link SessionStep}: each command is one event at a time
 * given to the nanosecond, its actions printed in the spec's words and
 * compared with the script's, byte for byte. A session the Java step does not
 * pass is listed with its reason in step-known-failures.txt beside this file
 * (FILE:LINE of the session's start or dial): it must still differ, and the
 * test fails once it passes, until the entry is removed.
 */
class StepScriptsTest {
    /** The scripts, through the repository (Maven runs the tests in clients/java). */
    static final Path SCRIPTS = Path.of("..", "..", "protocol", "testdata", "step");
    static final Path KNOWN = Path.of("src", "test", "java", "io", "github", "monolock", "step-known-failures.txt");

    /** One command of a script: the event, its arguments, the expected actions. */
    static final class Command {
        final int line;
        final String cmd;
        final Map<String, List<String>> args;
        final String expected;

        Command(int line, String cmd, Map<String, List<String>> args, String expected) {
            this.line = line;
            this.cmd = cmd;
            this.args = args;
            this.expected = expected;
        }

        String arg(String key) {
            List<String> v = args.get(key);
            if (v == null || v.size() != 1) throw new IllegalArgumentException("line " + line + ": " + cmd + " needs " + key + "=");
            return v.get(0);
        }

        boolean opens() {
            return cmd.equals("dial") || cmd.equals("start") && args.containsKey("lease");
        }
    }

    // --- the datadriven format ------------------------------------------------

    /** Commands and their expected output: {@code cmd key=value key=(a, b)}, a ---- line, the output up to a blank line; # comments between. */
    static List<Command> parse(Path file) throws IOException {
        List<String> lines = Files.readAllLines(file, StandardCharsets.UTF_8);
        List<Command> out = new ArrayList<>();
        for (int i = 0; i < lines.size(); i++) {
            String text = lines.get(i).trim();
            if (text.isEmpty() || text.startsWith("#")) continue;
            int line = i + 1;
            if (i + 1 >= lines.size() || !lines.get(i + 1).equals("----")) {
                throw new IllegalArgumentException(file + ":" + line + ": " + text + " is not followed by ----");
            }
            StringBuilder expected = new StringBuilder();
            for (i += 2; i < lines.size() && !lines.get(i).isEmpty(); i++) expected.append(lines.get(i)).append('\n');
            int space = text.indexOf(' ');
            String cmd = space < 0 ? text : text.substring(0, space);
            out.add(new Command(line, cmd, args(space < 0 ? "" : text.substring(space + 1)), expected.toString()));
        }
        return out;
    }

    private static final Pattern ARG = Pattern.compile("(\\w[\\w-]*)(?:=(\\([^)]*\\)|\\S+))?");

    static Map<String, List<String>> args(String text) {
        Map<String, List<String>> args = new LinkedHashMap<>();
        Matcher m = ARG.matcher(text);
        while (m.find()) {
            String v = m.group(2) == null ? "" : m.group(2);
            List<String> vals = new ArrayList<>();
            if (v.startsWith("(")) {
                for (String s : v.substring(1, v.length() - 1).split(",")) {
                    if (!s.isBlank()) vals.add(s.trim());
                }
            } else if (!v.isEmpty()) {
                vals.add(v);
            }
            args.put(m.group(1), vals);
        }
        return args;
    }

    private static final Pattern PART = Pattern.compile("(\\d+)(?:\\.(\\d+))?(ns|us|µs|μs|ms|s|m|h)");

    /** A Go time.Duration string to whole nanoseconds, exactly. */
    static long duration(String text) {
        if (text.equals("0")) return 0;
        boolean negative = text.startsWith("-");
        String t = text.replaceFirst("^[+-]", "");
        Matcher m = PART.matcher(t);
        long total = 0;
        int pos = 0;
        while (m.find() && m.start() == pos) {
            long unit = unit(m.group(3));
            String frac = m.group(2) == null ? "" : m.group(2);
            long fracNanos = frac.isEmpty() ? 0 : Long.parseLong(frac) * unit / pow10(frac.length());
            total += Long.parseLong(m.group(1)) * unit + fracNanos;
            pos = m.end();
        }
        if (pos != t.length() || t.isEmpty()) {
            throw new IllegalArgumentException(text + " is not a duration such as 1.5s, 248ms or 1m0s");
        }
        return negative ? -total : total;
    }

    private static long unit(String u) {
        switch (u) {
            case "ns": return 1;
            case "us": case "µs": case "μs": return 1_000;
            case "ms": return 1_000_000;
            case "s": return 1_000_000_000;
            case "m": return 60_000_000_000L;
            default: return 3_600_000_000_000L;
        }
    }

    private static long pow10(int n) {
        long p = 1;
        for (int i = 0; i < n; i++) p *= 10;
        return p;
    }

    /** Whole nanoseconds as Go's time.Duration prints them. */
    static String format(long ns) {
        String sign = ns < 0 ? "-" : "";
        long u = Math.abs(ns);
        if (u == 0) return "0s";
        if (u < 1_000) return sign + u + "ns";
        if (u < 1_000_000) return sign + fraction(u, 3) + "µs";
        if (u < 1_000_000_000) return sign + fraction(u, 6) + "ms";
        long hours = u / 3_600_000_000_000L;
        long rest = u % 3_600_000_000_000L;
        long minutes = rest / 60_000_000_000L;
        rest %= 60_000_000_000L;
        String out = hours > 0 ? hours + "h" : "";
        if (hours > 0 || minutes > 0) out += minutes + "m";
        return sign + out + fraction(rest, 9) + "s";
    }

    private static String fraction(long v, int digits) {
        long p = pow10(digits);
        String tail = String.format("%0" + digits + "d", v % p).replaceFirst("0+$", "");
        return tail.isEmpty() ? Long.toString(v / p) : v / p + "." + tail;
    }

    // --- the driver's part ----------------------------------------------------

    /** One script's current session, from event to event. */
    static final class Session {
        private SessionStep step;
        private long leaseNanos;
        private long leaseMs;
        private boolean closed = true;

        String run(Command c) {
            if (c.opens()) return open(c);
            if (closed) return "error: " + c.cmd + " after the close: the session takes no more events\n";
            long at = c.args.containsKey("at") ? duration(c.arg("at")) : 0;
            switch (c.cmd) {
                case "start":
                    return print(step.start(at));
                case "frame":
                    return print(step.frames(ByteBuffer.wrap(frames(c)), at));
                case "written":
                    if (!c.args.containsKey("err")) return print(step.written(at, null, null));
                    return print(step.written(at, c.arg("err").equals("deadline") ? SessionStep.WriteError.DEADLINE
                            : SessionStep.WriteError.BROKEN, new IOException("broken pipe")));
                case "closed":
                    switch (c.arg("err")) {
                        case "eof": return print(step.closed(at, SessionStep.Closed.EOF, null));
                        case "tls": return print(step.closed(at, SessionStep.Closed.TLS, new javax.net.ssl.SSLHandshakeException("bad certificate")));
                        default: return print(step.closed(at, SessionStep.Closed.BROKEN, new IOException("connection reset by peer")));
                    }
                case "stop":
                    return print(step.stop(at));
                case "timer":
                    return print(step.timer(at));
                case "expired":
                    return print(step.expired(at));
                default:
                    throw new IllegalArgumentException("line " + c.line + ": unknown event " + c.cmd
                            + ": docs/protocol.md, The client step, lists the events");
            }
        }

        private String open(Command c) {
            closed = true;
            leaseNanos = duration(c.arg("lease"));
            try {
                leaseMs = Validate.leaseMs(Duration.ofNanos(leaseNanos));
            } catch (IllegalArgumentException e) {
                return "failed invalid-input retry=no\n";
            }
            long wait = c.args.containsKey("wait") ? duration(c.arg("wait")) : SessionStep.WAIT_FOREVER;
            long connect = c.args.containsKey("connect-timeout") ? duration(c.arg("connect-timeout")) : 10_000_000_000L;
            step = new SessionStep("127.0.0.1:7070", "x", new byte[] {'x'}, leaseNanos, leaseMs, wait, connect);
            closed = false;
            long at = c.args.containsKey("at") ? duration(c.arg("at")) : 0;
            return print(c.cmd.equals("dial") ? step.dial(at) : step.start(at));
        }

        private static byte[] frames(Command c) {
            List<String> tokens = new ArrayList<>(c.args.getOrDefault("token", List.of()));
            List<String> codes = new ArrayList<>(c.args.getOrDefault("code", List.of()));
            ByteBuffer b = ByteBuffer.allocate(64 * 9);
            for (String type : c.args.get("type")) {
                switch (type) {
                    case "WAITING":
                        b.put((byte) Wire.TYPE_WAITING);
                        break;
                    case "ACQUIRED":
                        b.put((byte) Wire.TYPE_ACQUIRED).putLong(Long.parseUnsignedLong(tokens.remove(0)));
                        break;
                    case "ERROR":
                        b.put((byte) Wire.TYPE_ERROR).put((byte) Integer.parseInt(codes.remove(0).substring(2), 16)).put((byte) 0);
                        break;
                    default:
                        b.put((byte) Integer.parseInt(type.substring(2), 16));
                }
            }
            byte[] out = new byte[b.position()];
            b.flip().get(out);
            return out;
        }

        /** One step's actions in the spec's words, one a line. */
        private String print(SessionStep.Actions a) {
            StringBuilder b = new StringBuilder();
            for (int i = 0; i < a.size(); i++) {
                switch (a.kind(i)) {
                    case WAITING: b.append("waiting"); break;
                    case GRANTED: b.append("granted token=").append(Long.toUnsignedString(a.value(i))); break;
                    case VALID_UNTIL: b.append("valid-until ").append(format(a.value(i))); break;
                    case ACK:
                        b.append("ack rtt=").append(format(a.value(i))).append(" srtt=").append(format(a.srtt(i)))
                                .append(" interval=").append(format(a.interval(i)));
                        break;
                    case FAILED: b.append("failed ").append(reason()).append(" retry=").append(retry(step.failure())); break;
                    case LOST: b.append("lost ").append(reason()); break;
                    case SEND: b.append("send ").append(frameName(a.frame())); break;
                    case CLOSE: b.append("close"); closed = true; break;
                    case ABORT: b.append("abort"); closed = true; break;
                    case WAKE: b.append("wake ").append(a.value(i) == SessionStep.NEVER ? "off" : format(a.value(i))); break;
                    default: throw new IllegalStateException("an action the runner does not know: " + a.kind(i));
                }
                b.append('\n');
            }
            return b.toString();
        }

        private String frameName(byte[] f) {
            switch (f[0]) {
                case Wire.TYPE_ACQUIRE: return "ACQUIRE lease-ms=" + leaseMs;
                case Wire.TYPE_HEARTBEAT: return "HEARTBEAT";
                case Wire.TYPE_RELEASE: return "RELEASE";
                default: return Wire.hex(f[0] & 0xff);
            }
        }

        private String reason() {
            SessionStep.Reason r = step.reason();
            if (r != SessionStep.Reason.SERVER) return r.word;
            int code = step.lost() != null ? step.lost().code()
                    : step.failure() instanceof MonolockServerException ? ((MonolockServerException) step.failure()).code()
                    : ((ServerUnavailableException) step.failure()).code().orElse(-1);
            return "server code=" + Wire.hex(code);
        }

        /** What MonolockClient.run does after the failure. */
        private String retry(MonolockException failure) {
            switch (Backoff.after(failure)) {
                case BACKOFF: return "backoff";
                case SHUTDOWN_WAIT: return "random-wait max=" + format(Backoff.shutdownJitterMax(leaseNanos));
                default: return "no";
            }
        }
    }

    // --- the test -------------------------------------------------------------

    /** FILE:LINE → reason. */
    static Map<String, String> known() throws IOException {
        Map<String, String> known = new TreeMap<>();
        int n = 0;
        for (String raw : Files.readAllLines(KNOWN, StandardCharsets.UTF_8)) {
            n++;
            String text = raw.trim();
            if (text.isEmpty() || text.startsWith("#")) continue;
            int space = text.indexOf(' ');
            String where = space < 0 ? text : text.substring(0, space);
            if (space < 0 || !where.matches("[^:]+\\.txt:[0-9]+") || text.substring(space).isBlank()) {
                throw new IllegalArgumentException(KNOWN + ":" + n + ": want FILE:LINE and a reason, got " + text);
            }
            known.put(where, text.substring(space + 1).trim());
        }
        return known;
    }

    /** Each session's FILE:LINE and how its commands differ (empty: it passes). */
    static Map<String, List<String>> runFile(Path file) throws IOException {
        Map<String, List<String>> sessions = new LinkedHashMap<>();
        Session s = new Session();
        String current = null;
        for (Command c : parse(file)) {
            if (c.opens()) {
                current = file.getFileName() + ":" + c.line;
                sessions.put(current, new ArrayList<>());
            }
            if (current == null) throw new IllegalArgumentException(file + ":" + c.line + ": " + c.cmd + " before any session");
            String got;
            try {
                got = s.run(c);
            } catch (RuntimeException e) {
                got = "exception: " + e + "\n";
            }
            if (!got.equals(c.expected)) {
                sessions.get(current).add("line " + c.line + " " + c.cmd + ": want\n" + c.expected + "got\n" + got);
            }
        }
        return sessions;
    }

    @Test
    void durationsAreGosFormat() {
        long[] ns = {0, 1, 800_004, 249_999_998, 1_099_999_999, 60_000_000_000L, 3_435_973_836_000_000L};
        String[] text = {"0s", "1ns", "800.004µs", "249.999998ms", "1.099999999s", "1m0s", "954h26m13.836s"};
        for (int i = 0; i < ns.length; i++) {
            assertEquals(ns[i], duration(text[i]), text[i]);
            assertEquals(text[i], format(ns[i]));
        }
    }

    @Test
    void everySessionOfEveryScript() throws IOException {
        Map<String, String> known = known();
        List<Path> files;
        try (Stream<Path> list = Files.list(SCRIPTS)) {
            files = list.filter(p -> p.toString().endsWith(".txt")).sorted().toList();
        }
        assertFalse(files.isEmpty(), "no step scripts in " + SCRIPTS.toAbsolutePath());
        int total = 0;
        int passed = 0;
        int listed = 0;
        List<String> problems = new ArrayList<>();
        List<String> seen = new ArrayList<>();
        for (Path file : files) {
            for (Map.Entry<String, List<String>> e : runFile(file).entrySet()) {
                total++;
                seen.add(e.getKey());
                boolean differs = !e.getValue().isEmpty();
                if (known.containsKey(e.getKey())) {
                    listed++;
                    if (!differs) {
                        problems.add(e.getKey() + " is listed in " + KNOWN + ", but the Java step now passes the session: remove the entry");
                    }
                } else if (differs) {
                    problems.add(e.getKey() + ": the Java step differs from the script:\n" + String.join("\n", e.getValue()));
                } else {
                    passed++;
                }
            }
        }
        for (String k : known.keySet()) {
            if (!seen.contains(k)) problems.add(k + " is listed in " + KNOWN + ", but no session starts there (a dial, or a start with lease=)");
        }
        System.out.println("step scripts (Java): " + total + " sessions, " + files.size() + " files, " + passed + " pass, "
                + listed + " known");
        if (!problems.isEmpty()) fail(String.join("\n", problems));
    }
}
