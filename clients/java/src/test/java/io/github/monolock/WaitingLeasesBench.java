package io.github.monolock;

import com.sun.management.OperatingSystemMXBean;
import java.lang.management.ManagementFactory;
import java.lang.management.MemoryMXBean;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;

/**
 * The Java client's footprint against the real server (make java-bench):
 * threads and heap with N leases waiting in one JVM, and the CPU of one
 * acquire/release cycle (connect, ACQUIRE, ACQUIRED, close), in the client
 * and in the server. One run; not a test.
 *
 * <p>Arguments: {@code -server PATH -waiters N -cycles M}.
 */
public final class WaitingLeasesBench {
    private WaitingLeasesBench() {}

    public static void main(String[] args) throws Exception {
        String bin = null;
        int waiters = 10_000;
        int cycles = 2_000;
        for (int i = 0; i + 1 < args.length; i += 2) {
            switch (args[i]) {
                case "-server": bin = args[i + 1]; break;
                case "-waiters": waiters = Integer.parseInt(args[i + 1]); break;
                case "-cycles": cycles = Integer.parseInt(args[i + 1]); break;
                default: throw new IllegalArgumentException("unknown flag " + args[i] + "; want -server PATH -waiters N -cycles M");
            }
        }
        if (bin == null) throw new IllegalArgumentException("-server PATH: the monolock binary (make build: bin/monolock)");
        MemoryMXBean mem = ManagementFactory.getMemoryMXBean();
        OperatingSystemMXBean os = (OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean();
        Duration lease = Duration.ofSeconds(10); // waiters heartbeat every 2.5 s
        try (RealServer server = RealServer.of(bin); MonolockClient client = server.client()) {
            Lease holder = client.lock("bench", lease);
            server.waiters("bench"); // the JDK HttpClient that polls the admin API starts its threads now, before the count
            long heap0 = liveHeap(mem);
            long rss0 = rss();
            int threads0 = ManagementFactory.getThreadMXBean().getThreadCount();
            java.util.Set<String> names0 = threadNames();
            List<CompletableFuture<Lease>> queued = new ArrayList<>(waiters);
            for (int i = 0; i < waiters; i++) queued.add(client.lockAsync("bench", lease));
            server.awaitWaiters("bench", waiters);
            long heap1 = liveHeap(mem);
            long rss1 = rss();
            int threads1 = ManagementFactory.getThreadMXBean().getThreadCount();
            long io = Thread.getAllStackTraces().keySet().stream().filter(t -> t.getName().startsWith("monolock-io")).count();
            java.util.Set<String> added = threadNames();
            added.removeAll(names0);
            long stillWaiting = queued.stream().filter(f -> !f.isDone()).count();
            System.out.printf("waiting leases           %d (all queued at the server: %s; lease %s)%n", waiters, stillWaiting == waiters, lease);
            System.out.printf("client threads           %d (monolock-io); every thread of the JVM: %d before the waiters, %d with them (new: %s)%n", io, threads0, threads1, added);
            System.out.printf("heap per waiting lease   %.0f B live after a full GC (%.1f MiB for %d)%n",
                    (heap1 - heap0) / (double) waiters, (heap1 - heap0) / 1048576.0, waiters);
            System.out.printf("RSS per waiting lease    %.0f B (heap, sockets and the JVM's own growth)%n", (rss1 - rss0) / (double) waiters);
            for (CompletableFuture<Lease> f : queued) f.cancel(false);
            server.awaitWaiters("bench", 0);
            holder.close();

            for (int i = 0; i < 200; i++) client.lock("cycle", lease).close(); // warm-up
            long cpu0 = os.getProcessCpuTime();
            long srv0 = serverCpuNanos(server.process.pid());
            long t0 = System.nanoTime();
            for (int i = 0; i < cycles; i++) client.lock("cycle", lease).close();
            long wall = System.nanoTime() - t0;
            long cpu = os.getProcessCpuTime() - cpu0;
            long srv = serverCpuNanos(server.process.pid()) - srv0;
            System.out.printf("acquire/release cycle    %d cycles, one after another: client CPU %.1f µs a cycle, server CPU %.1f µs, wall %.1f µs%n",
                    cycles, cpu / 1000.0 / cycles, srv / 1000.0 / cycles, wall / 1000.0 / cycles);
        }
    }

    private static java.util.Set<String> threadNames() {
        java.util.Set<String> s = new java.util.TreeSet<>();
        for (Thread t : Thread.getAllStackTraces().keySet()) s.add(t.getName());
        return s;
    }

    private static long liveHeap(MemoryMXBean mem) throws InterruptedException {
        for (int i = 0; i < 3; i++) {
            mem.gc();
            Thread.sleep(100);
        }
        return mem.getHeapMemoryUsage().getUsed();
    }

    private static long rss() throws Exception {
        for (String l : Files.readAllLines(Path.of("/proc/self/status"))) {
            if (l.startsWith("VmRSS:")) return Long.parseLong(l.replaceAll("[^0-9]", "")) * 1024;
        }
        return 0;
    }

    /** utime + stime of a process, from /proc (clock ticks of 10 ms). */
    private static long serverCpuNanos(long pid) throws Exception {
        String stat = Files.readString(Path.of("/proc/" + pid + "/stat"));
        String[] f = stat.substring(stat.lastIndexOf(')') + 2).split(" ");
        return (Long.parseLong(f[11]) + Long.parseLong(f[12])) * 10_000_000L;
    }
}
