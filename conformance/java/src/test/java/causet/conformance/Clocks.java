package causet.conformance;

import com.google.protobuf.ByteString;

import java.nio.ByteBuffer;
import java.util.Arrays;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Causet's clocks and transaction descriptors, opaque to AntidoteDB's clients, decoded as docs/protocol.md
 * documents them, for the tests that must compare or merge them:
 * a clock is {@code 0x01, u16 n, n × u64} (big-endian); a descriptor is
 * {@code 0x11, u16 dc, u32 coordinator, u64 seq, u16 n, n × u64 snapshot}.
 */
public final class Clocks {
    private Clocks() {
    }

    public static long[] decode(ByteString clock) {
        assertNotNull(clock, "no clock");
        ByteBuffer b = clock.asReadOnlyByteBuffer();
        assertTrue(b.remaining() >= 3, "clock too short: " + clock);
        assertEquals(0x01, b.get() & 0xff, "not a Causet clock");
        int n = b.getShort() & 0xffff;
        assertEquals(3 + 8 * n, clock.size(), "clock of " + n + " entries");
        long[] entries = new long[n];
        for (int i = 0; i < n; i++) {
            entries[i] = b.getLong();
        }
        return entries;
    }

    public static ByteString encode(long... entries) {
        ByteBuffer b = ByteBuffer.allocate(3 + 8 * entries.length);
        b.put((byte) 0x01).putShort((short) entries.length);
        for (long e : entries) {
            b.putLong(e);
        }
        return ByteString.copyFrom(b.array());
    }

    /** The entry-wise maximum (nulls ignored): a snapshot after every one of the clocks. */
    public static ByteString merge(ByteString... clocks) {
        long[] max = new long[0];
        for (ByteString c : clocks) {
            if (c == null) {
                continue;
            }
            long[] d = decode(c);
            if (d.length > max.length) {
                max = Arrays.copyOf(max, d.length);
            }
            for (int i = 0; i < d.length; i++) {
                max[i] = Math.max(max[i], d[i]);
            }
        }
        return encode(max);
    }

    /** Whether every entry of {@code a} is at least the same entry of {@code b} (b's extra entries count as 0). */
    public static boolean atLeast(long[] a, long[] b) {
        for (int i = 0; i < b.length; i++) {
            long ai = i < a.length ? a[i] : 0;
            if (Long.compareUnsigned(ai, b[i]) < 0) {
                return false;
            }
        }
        return true;
    }

    /** The snapshot vector inside a Causet transaction descriptor. */
    public static long[] descriptorSnapshot(ByteString descriptor) {
        assertNotNull(descriptor, "no descriptor");
        ByteBuffer b = descriptor.asReadOnlyByteBuffer();
        assertTrue(b.remaining() >= 17, "descriptor too short: " + descriptor);
        assertEquals(0x11, b.get() & 0xff, "not a Causet transaction descriptor");
        b.getShort(); // dc
        b.getInt(); // coordinator
        b.getLong(); // seq
        int n = b.getShort() & 0xffff;
        assertEquals(17 + 8 * n, descriptor.size(), "descriptor with " + n + " snapshot entries");
        long[] entries = new long[n];
        for (int i = 0; i < n; i++) {
            entries[i] = b.getLong();
        }
        return entries;
    }

    /** A hybrid logical clock value plus {@code millis} milliseconds (microseconds in the high 52 bits). */
    public static long plusMillis(long hlc, long millis) {
        return hlc + ((millis * 1000L) << 12);
    }
}
