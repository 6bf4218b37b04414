package causet.conformance;

import com.google.protobuf.ByteString;
import eu.antidotedb.client.Bucket;
import eu.antidotedb.client.CommitInfo;
import eu.antidotedb.client.CounterKey;
import eu.antidotedb.client.InteractiveTransaction;
import eu.antidotedb.client.Key;
import eu.antidotedb.client.RegisterKey;
import eu.antidotedb.client.SetKey;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import java.nio.charset.StandardCharsets;
import java.util.List;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Clocks passed between transactions and between clients (connections) on one DC: a commit time
 * ({@code CommitInfo.getCommitTime()}) given as the start timestamp of a transaction on another client makes the
 * transaction's snapshot include the commit. The Java client has no API to start a transaction at a clock; the
 * suite's {@link SessionClock}, a transformer of the client's own transformer API, sets the timestamp. On one DC a
 * transaction without a clock sees every acknowledged commit too, so besides the values read back these tests
 * check the snapshots themselves (from the descriptor and the static read's commit time) against the clocks given,
 * including clocks ahead of the server's. {@link CausalityAcrossDcsTest} checks clocks where they are needed.
 */
@WithCauset
class CausalityTest {

    @Test
    void commitTimePassedToAnotherClientsInteractiveTransaction(Env env) {
        TestClient a = env.client();
        TestClient other = env.client();
        Bucket b = env.bucket();
        RegisterKey<String> r = Key.register("r");
        CommitInfo info;
        try (InteractiveTransaction tx = a.begin()) {
            b.update(tx, r.assign("from-a"));
            info = tx.commitTransaction();
        }
        long[] committed = Clocks.decode(info.getCommitTime());
        other.clock.setMinSnapshot(info.getCommitTime());
        ExposedTransaction tx = other.beginExposed();
        assertEquals(info.getCommitTime(), other.clock.lastStartTimestampSent(), "the clock went out");
        assertTrue(Clocks.atLeast(Clocks.descriptorSnapshot(tx.descriptor()), committed),
                "the transaction's snapshot includes the commit");
        assertEquals("from-a", b.read(tx, r));
        b.update(tx, r.assign("from-other"));
        CommitInfo second = tx.commitTransaction();
        assertTrue(Clocks.atLeast(Clocks.decode(second.getCommitTime()), committed));
        assertEquals("from-other", a.read(b, r));
    }

    @Test
    void staticCommitTimeForAStaticReadOnAnotherClient(Env env) {
        TestClient a = env.client();
        TestClient other = env.client();
        Bucket b = env.bucket();
        SetKey<String> s = Key.set("s");
        CommitInfo info = a.commitStatic(b, s.addAll("p", "q"));
        other.clock.setMinSnapshot(info.getCommitTime());
        assertEquals(List.of("p", "q"), TypesTest.sorted(other.read(b, s)));
        // The static read's reply carries its snapshot (ApbStaticReadObjectsResp.committime): at or after the clock.
        ByteString snapshot = other.clock.lastCommitTime();
        assertNotNull(snapshot);
        assertTrue(Clocks.atLeast(Clocks.decode(snapshot), Clocks.decode(info.getCommitTime())));
    }

    @Test
    void causalChainAcrossThreeClients(Env env) {
        TestClient a = env.client();
        TestClient b2 = env.client();
        TestClient c = env.client();
        Bucket b = env.bucket();
        CounterKey x = Key.counter("x");
        CounterKey y = Key.counter("y");
        CommitInfo first = a.commitStatic(b, x.increment(1));
        b2.clock.setMinSnapshot(first.getCommitTime());
        CommitInfo second;
        try (InteractiveTransaction tx = b2.begin()) {
            assertEquals(1, b.read(tx, x));
            b.update(tx, y.increment(1));
            second = tx.commitTransaction();
        }
        // c only knows b2's commit time: it must see b2's write and a's, which b2's depends on.
        c.clock.setMinSnapshot(second.getCommitTime());
        assertEquals(List.of(1, 1), b.readAll(c.noTx(), List.of(x, y)));
        long[] seen = Clocks.decode(c.clock.lastCommitTime());
        assertTrue(Clocks.atLeast(seen, Clocks.decode(first.getCommitTime())));
        assertTrue(Clocks.atLeast(seen, Clocks.decode(second.getCommitTime())));
    }

    @Test
    void sessionOfOneClientThroughItsOwnCommitTimes(Env env) {
        // A client that starts each transaction at its last commit time (the session guarantees AntidoteDB's clock
        // gives; the Java client's documentation lists them as not yet implemented in the client).
        TestClient a = env.client();
        Bucket b = env.bucket();
        var mv = Key.multiValueRegister("mv");
        a.update(b, mv.assign("lightkone")); // NoTransaction: the client drops the commit time; SessionClock has it
        ByteString t1 = a.clock.lastCommitTime();
        assertNotNull(t1, "a NoTransaction update's reply carries its commit time");
        a.clock.setMinSnapshot(t1);
        assertEquals(List.of("lightkone"), a.read(b, mv));
        a.update(b, mv.assign("syncfree"));
        ByteString t2 = a.clock.lastCommitTime();
        assertTrue(Clocks.atLeast(Clocks.decode(t2), Clocks.decode(t1)));
        a.clock.setMinSnapshot(t2);
        assertEquals(List.of("syncfree"), a.read(b, mv));
    }

    @Test
    void commitTimesGrowAlongACausalChain(Env env) {
        TestClient a = env.client();
        TestClient other = env.client();
        Bucket b = env.bucket();
        CounterKey k = Key.counter("k");
        long[] first = Clocks.decode(a.commitStatic(b, k.increment(1)).getCommitTime());
        other.clock.setMinSnapshot(Clocks.encode(first));
        long[] second;
        try (InteractiveTransaction tx = other.begin()) {
            b.update(tx, k.increment(1));
            second = Clocks.decode(tx.commitTransaction().getCommitTime());
        }
        assertEquals(first.length, second.length);
        assertTrue(first.length >= 1);
        assertTrue(Clocks.atLeast(second, first));
        assertTrue(!java.util.Arrays.equals(first, second), "a later commit has a later commit time");
    }

    @Test
    void clockAheadOfTheServersIsHonoured(Env env) {
        // A clock slightly ahead of the server's own time (300 ms; another DC's clock may be): the snapshot is at
        // or after it, for an interactive transaction, a static read and a static update.
        TestClient a = env.client();
        Bucket b = env.bucket();
        CounterKey k = Key.counter("k");
        long[] now = Clocks.decode(a.commitStatic(b, k.increment(1)).getCommitTime());
        long[] ahead = now.clone();
        for (int i = 0; i < ahead.length; i++) {
            ahead[i] = Clocks.plusMillis(ahead[i], 300);
        }
        a.clock.setMinSnapshot(Clocks.encode(ahead));
        ExposedTransaction tx = a.beginExposed();
        assertTrue(Clocks.atLeast(Clocks.descriptorSnapshot(tx.descriptor()), ahead), "interactive snapshot");
        assertEquals(1, b.read(tx, k));
        assertTrue(Clocks.atLeast(Clocks.decode(tx.commitTransaction().getCommitTime()), ahead));
        assertEquals(1, a.read(b, k));
        assertTrue(Clocks.atLeast(Clocks.decode(a.clock.lastCommitTime()), ahead), "static read snapshot");
        CommitInfo info = a.commitStatic(b, k.increment(1));
        assertTrue(Clocks.atLeast(Clocks.decode(info.getCommitTime()), ahead), "static update commit time");
    }

    @Test
    void emptyTimestampMeansNoClock(Env env) {
        TestClient a = env.client();
        Bucket b = env.bucket();
        CounterKey k = Key.counter("k");
        a.update(b, k.increment(2));
        a.clock.setMinSnapshot(ByteString.EMPTY);
        assertEquals(2, a.read(b, k));
        a.update(b, k.increment(1));
        try (InteractiveTransaction tx = a.begin()) {
            assertEquals(3, b.read(tx, k));
            tx.commitTransaction();
        }
    }

    @ParameterizedTest
    @ValueSource(strings = {"erlang-atom", "erlang-small-atom-utf8"})
    void erlangIgnoreAsTimestampMeansNoClock(String form, Env env) {
        // AntidoteDB's Erlang client sends term_to_binary(ignore) when it has no clock.
        byte[] ignore = "ignore".getBytes(StandardCharsets.US_ASCII);
        ByteString clock = form.equals("erlang-atom")
                ? ByteString.copyFrom(new byte[]{(byte) 0x83, 'd', 0, 6}).concat(ByteString.copyFrom(ignore))
                : ByteString.copyFrom(new byte[]{(byte) 0x83, 'w', 6}).concat(ByteString.copyFrom(ignore));
        TestClient a = env.client();
        Bucket b = env.bucket();
        CounterKey k = Key.counter("k");
        a.clock.setMinSnapshot(clock);
        a.update(b, k.increment(1));
        assertEquals(1, a.read(b, k));
        try (InteractiveTransaction tx = a.begin()) {
            assertEquals(1, b.read(tx, k));
            tx.commitTransaction();
        }
    }

    @ParameterizedTest
    @ValueSource(strings = {"garbage", "truncated", "wrong-number-of-dcs", "far-future", "descriptor"})
    void invalidClockIsRefusedWithAReasonAndTheConnectionGoesOn(String kind, Env env) {
        TestClient a = env.client();
        Bucket b = env.bucket();
        CounterKey k = Key.counter("k");
        ByteString clock = switch (kind) {
            case "garbage" -> ByteString.copyFrom(new byte[]{0, 'g', 'a', 'r', 'b', 'a', 'g', 'e'});
            case "truncated" -> ByteString.copyFrom(new byte[]{1, 0});
            case "wrong-number-of-dcs" -> Clocks.encode(1, 2, 3);
            case "far-future" -> Clocks.encode(Long.MIN_VALUE | 12345); // 2^63 + 12345
            default -> { // a transaction descriptor where a clock belongs
                ExposedTransaction tx = a.beginExposed();
                yield tx.descriptor();
            }
        };
        a.clock.setMinSnapshot(clock);
        Expect.serverError(a::begin, "clock");
        Expect.serverError(() -> a.read(b, k), "clock");
        Expect.serverError(() -> a.update(b, k.increment(1)), "clock");
        Expect.serverError(() -> a.commitStatic(b, k.increment(1)), "clock");
        // The client's connections are still usable, and nothing was written.
        a.clock.setMinSnapshot(null);
        assertEquals(0, a.read(b, k));
        try (InteractiveTransaction tx = a.begin()) {
            assertEquals(0, b.read(tx, k));
            tx.commitTransaction();
        }
    }

    @Test
    void mergedClockOfTwoClientsSeesBothWrites(Env env) {
        TestClient a = env.client();
        TestClient other = env.client();
        TestClient c = env.client();
        Bucket b = env.bucket();
        CounterKey x = Key.counter("x");
        CounterKey y = Key.counter("y");
        ByteString ta = a.commitStatic(b, x.increment(1)).getCommitTime();
        ByteString tb = other.commitStatic(b, y.increment(1)).getCommitTime();
        ByteString merged = Clocks.merge(ta, tb);
        c.clock.setMinSnapshot(merged);
        try (ExposedTransaction tx = c.beginExposed()) {
            assertTrue(Clocks.atLeast(Clocks.descriptorSnapshot(tx.descriptor()), Clocks.decode(merged)));
            assertEquals(List.of(1, 1), b.readAll(tx, List.of(x, y)));
            tx.commitTransaction();
        }
    }
}
