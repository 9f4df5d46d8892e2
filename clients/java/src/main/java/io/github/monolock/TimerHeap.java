package io.github.monolock;

import java.util.Arrays;

/**
 * The I/O loop's one timer: a binary min-heap of connections by their next
 * wake-up, each connection knowing its own slot, so re-arming one (every
 * heartbeat) costs O(log n) and allocates nothing. Used by the loop's thread
 * only.
 */
final class TimerHeap {
    private Connection[] heap = new Connection[64];
    private int size;

    int size() {
        return size;
    }

    /** The earliest wake-up, or {@link SessionStep#NEVER} when none is armed. */
    long earliest() {
        return size == 0 ? SessionStep.NEVER : heap[0].wakeAt;
    }

    /** The connection due first; call only when {@link #size()} &gt; 0. */
    Connection peek() {
        return heap[0];
    }

    /** Arms c for at (NEVER disarms it). */
    void set(Connection c, long at) {
        if (at == SessionStep.NEVER) {
            remove(c);
            return;
        }
        if (c.heapIndex < 0) {
            if (size == heap.length) heap = Arrays.copyOf(heap, size * 2);
            c.wakeAt = at;
            c.heapIndex = size;
            heap[size++] = c;
            up(c.heapIndex);
            return;
        }
        long old = c.wakeAt;
        c.wakeAt = at;
        if (at < old) up(c.heapIndex);
        else if (at > old) down(c.heapIndex);
    }

    void remove(Connection c) {
        int i = c.heapIndex;
        if (i < 0) return;
        c.heapIndex = -1;
        c.wakeAt = SessionStep.NEVER;
        Connection last = heap[--size];
        heap[size] = null;
        if (i == size) return;
        heap[i] = last;
        last.heapIndex = i;
        up(i);
        down(last.heapIndex);
    }

    private void up(int i) {
        Connection c = heap[i];
        while (i > 0) {
            int p = (i - 1) >>> 1;
            if (heap[p].wakeAt <= c.wakeAt) break;
            heap[i] = heap[p];
            heap[i].heapIndex = i;
            i = p;
        }
        heap[i] = c;
        c.heapIndex = i;
    }

    private void down(int i) {
        Connection c = heap[i];
        int half = size >>> 1;
        while (i < half) {
            int l = 2 * i + 1;
            int r = l + 1;
            int m = r < size && heap[r].wakeAt < heap[l].wakeAt ? r : l;
            if (c.wakeAt <= heap[m].wakeAt) break;
            heap[i] = heap[m];
            heap[i].heapIndex = i;
            i = m;
        }
        heap[i] = c;
        c.heapIndex = i;
    }
}
