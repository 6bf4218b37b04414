package causet.conformance;

import eu.antidotedb.client.Bucket;
import eu.antidotedb.client.CounterKey;
import eu.antidotedb.client.InteractiveTransaction;
import eu.antidotedb.client.Key;
import eu.antidotedb.client.MVRegisterKey;
import eu.antidotedb.client.MapKey;
import eu.antidotedb.client.RegisterKey;
import eu.antidotedb.client.ResponseDecoder;
import eu.antidotedb.client.SetKey;
import eu.antidotedb.client.UpdateOp;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.stream.IntStream;

import static causet.conformance.TypesTest.sorted;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * CRDT semantics as the Java client sees them: sequential effects, resets, map entries, and how each type resolves
 * two transactions that run concurrently (both start before either updates or commits).
 */
@WithCauset
class SemanticsTest {

    /**
     * Runs one interactive transaction per (client, updates) pair, all started before any of them updates or
     * commits, so that none sees another's effects; then commits them in order.
     */
    static void concurrently(Bucket b, List<TestClient> clients, List<List<UpdateOp>> updates) {
        List<InteractiveTransaction> txs = new ArrayList<>();
        try {
            for (TestClient c : clients) {
                txs.add(c.begin());
            }
            for (int i = 0; i < txs.size(); i++) {
                b.updates(txs.get(i), updates.get(i));
            }
            for (InteractiveTransaction tx : txs) {
                tx.commitTransaction();
            }
        } finally {
            for (InteractiveTransaction tx : txs) {
                tx.close();
            }
        }
    }

    // Counters ---------------------------------------------------------------------------------------------------

    @ParameterizedTest
    @ValueSource(strings = {"COUNTER", "FATCOUNTER"})
    void counterIncrementsAndDecrementsAddUp(String type, Env env) {
        TestClient c = env.client();
        Bucket b = env.bucket();
        CounterKey k = type.equals("COUNTER") ? Key.counter("k") : Key.fatCounter("k");
        for (int n : new int[]{5, -3, 10, -1, 0}) {
            c.update(b, k.increment(n));
        }
        c.update(b, k.increment(2), k.increment(2), k.increment(-1));
        try (InteractiveTransaction tx = c.begin()) {
            b.update(tx, k.increment(100));
            b.update(tx, k.increment(-50));
            tx.commitTransaction();
        }
        assertEquals(5 - 3 + 10 - 1 + 3 + 50, c.read(b, k));
    }

    @Test
    void counterLargeIncrementsAndNegativeTotals(Env env) {
        // The client's increment is a long (ApbCounterUpdate.inc is a sint64).
        TestClient c = env.client();
        Bucket b = env.bucket();
        CounterKey k = Key.counter("k");
        c.update(b, k.increment(2_000_000_000L));
        c.update(b, k.increment(-2_000_000_001L));
        assertEquals(-1, c.read(b, k));
        c.update(b, k.increment(5_000_000_000L), k.increment(-5_000_000_000L));
        assertEquals(-1, c.read(b, k));
    }

    @Test
    void counterBeyond32BitsReadsAsAnErrorNotAWrappedValue(Env env) {
        // ApbGetCounterResp.value is a sint32: the server says it cannot send the value rather than truncating it.
        TestClient c = env.client();
        Bucket b = env.bucket();
        CounterKey k = Key.counter("k");
        CounterKey other = Key.counter("other");
        c.update(b, k.increment(Integer.MAX_VALUE), other.increment(1));
        assertEquals(Integer.MAX_VALUE, c.read(b, k));
        c.update(b, k.increment(1));
        Expect.serverError(() -> c.read(b, k), "32");
        assertEquals(1, c.read(b, other));
        c.update(b, k.increment(-2));
        assertEquals(Integer.MAX_VALUE - 1, c.read(b, k));
    }

    @ParameterizedTest
    @ValueSource(strings = {"COUNTER", "FATCOUNTER"})
    void counterBeyond64BitsIsNeverReadAsAWrappedValue(String type, Env env) {
        TestClient c = env.client();
        Bucket b = env.bucket();
        CounterKey k = type.equals("COUNTER") ? Key.counter("k") : Key.fatCounter("k");
        c.update(b, k.increment(Long.MAX_VALUE));
        c.update(b, k.increment(Long.MAX_VALUE)); // exactly 2^64 - 2
        Expect.serverError(() -> c.read(b, k), "32-bit");
        c.update(b, k.increment(Long.MIN_VALUE), k.increment(Long.MIN_VALUE)); // back to -2
        assertEquals(-2, c.read(b, k));
    }

    @Test
    void fatCounterResetClearsTheIncrementsItSaw(Env env) {
        TestClient c = env.client();
        Bucket b = env.bucket();
        CounterKey k = Key.fatCounter("k");
        c.update(b, k.increment(4), k.increment(6));
        c.update(b, k.reset());
        assertEquals(0, c.read(b, k));
        c.update(b, k.increment(3));
        assertEquals(3, c.read(b, k));
    }

    @Test
    void fatCounterIncrementConcurrentWithResetSurvives(Env env) {
        TestClient a = env.client();
        TestClient c2 = env.client();
        Bucket b = env.bucket();
        CounterKey k = Key.fatCounter("k");
        a.update(b, k.increment(10));
        concurrently(b, List.of(a, c2), List.of(List.of(k.reset()), List.of(k.increment(5))));
        assertEquals(5, a.read(b, k));
    }

    @ParameterizedTest
    @ValueSource(strings = {"COUNTER", "LWWREG"})
    void resetOfATypeWithoutResetIsRefused(String type, Env env) {
        // AntidoteDB's counter_pn and register_lww have no reset; the client offers reset() on every key.
        TestClient c = env.client();
        Bucket b = env.bucket();
        if (type.equals("COUNTER")) {
            c.update(b, Key.counter("k").increment(1));
            Expect.serverError(() -> c.update(b, Key.counter("k").reset()));
            assertEquals(1, c.read(b, Key.counter("k")));
        } else {
            c.update(b, Key.register("k").assign("v"));
            Expect.serverError(() -> c.update(b, Key.register("k").reset()));
            assertEquals("v", c.read(b, Key.register("k")));
        }
    }

    // Sets -------------------------------------------------------------------------------------------------------

    static SetKey<String> setKey(String type) {
        return type.equals("ORSET") ? Key.set("s") : Key.set_removeWins("s");
    }

    @ParameterizedTest
    @ValueSource(strings = {"ORSET", "RWSET"})
    void setAddAndRemove(String type, Env env) {
        TestClient c = env.client();
        Bucket b = env.bucket();
        SetKey<String> k = setKey(type);
        c.update(b, k.addAll("a", "b"));
        c.update(b, k.add("c"));
        c.update(b, k.add("a")); // already there
        assertEquals(List.of("a", "b", "c"), sorted(c.read(b, k)));
        c.update(b, k.remove("b"));
        c.update(b, k.remove("zzz")); // never added
        assertEquals(List.of("a", "c"), sorted(c.read(b, k)));
        c.update(b, k.add("b"));
        assertEquals(List.of("a", "b", "c"), sorted(c.read(b, k)));
        c.update(b, k.removeAll("a", "b", "c"));
        assertEquals(List.of(), c.read(b, k));
    }

    @ParameterizedTest
    @ValueSource(strings = {"ORSET", "RWSET"})
    void setAddThenRemoveInOneRequestAndInOneTransaction(String type, Env env) {
        TestClient c = env.client();
        Bucket b = env.bucket();
        SetKey<String> k = setKey(type);
        c.update(b, k.addAll("x", "y"), k.remove("x"));
        assertEquals(List.of("y"), c.read(b, k));
        try (InteractiveTransaction tx = c.begin()) {
            b.update(tx, k.add("z"));
            b.update(tx, k.remove("y"));
            assertEquals(List.of("z"), b.read(tx, k));
            tx.commitTransaction();
        }
        assertEquals(List.of("z"), c.read(b, k));
    }

    @ParameterizedTest
    @ValueSource(strings = {"ORSET", "RWSET"})
    void setResetEmptiesIt(String type, Env env) {
        TestClient c = env.client();
        Bucket b = env.bucket();
        SetKey<String> k = setKey(type);
        c.update(b, k.addAll("x", "y", "z"));
        c.update(b, k.reset());
        assertEquals(List.of(), c.read(b, k));
        c.update(b, k.add("w"));
        assertEquals(List.of("w"), c.read(b, k));
    }

    @ParameterizedTest
    @ValueSource(strings = {"ORSET", "RWSET"})
    void setManyElementsInOneOperation(String type, Env env) {
        TestClient c = env.client();
        Bucket b = env.bucket();
        SetKey<String> k = setKey(type);
        List<String> elements = IntStream.range(0, 200).mapToObj(i -> String.format("e%03d", i)).toList();
        c.update(b, k.addAll(elements));
        c.update(b, k.removeAll(IntStream.range(0, 200).filter(i -> i % 2 == 0).mapToObj(elements::get).toList()));
        assertEquals(IntStream.range(0, 200).filter(i -> i % 2 == 1).mapToObj(elements::get).toList(),
                sorted(c.read(b, k)));
    }

    @Test
    void orSetConcurrentAddAndRemoveAddWins(Env env) {
        TestClient a = env.client();
        TestClient c2 = env.client();
        Bucket b = env.bucket();
        SetKey<String> k = Key.set("s");
        a.update(b, k.addAll("x", "keep"));
        concurrently(b, List.of(a, c2), List.of(List.of(k.remove("x")), List.of(k.add("x"))));
        assertEquals(List.of("keep", "x"), sorted(a.read(b, k)));
    }

    @Test
    void rwSetConcurrentAddAndRemoveRemoveWins(Env env) {
        TestClient a = env.client();
        TestClient c2 = env.client();
        Bucket b = env.bucket();
        SetKey<String> k = Key.set_removeWins("s");
        a.update(b, k.addAll("x", "keep"));
        concurrently(b, List.of(a, c2), List.of(List.of(k.remove("x")), List.of(k.add("x"))));
        assertEquals(List.of("keep"), a.read(b, k));
    }

    // Registers --------------------------------------------------------------------------------------------------

    @Test
    void lwwRegisterLastAssignWins(Env env) {
        TestClient c = env.client();
        Bucket b = env.bucket();
        RegisterKey<String> k = Key.register("r");
        for (String v : List.of("one", "two", "three")) {
            c.update(b, k.assign(v));
        }
        assertEquals("three", c.read(b, k));
        c.update(b, k.assign("four"), k.assign("five"));
        assertEquals("five", c.read(b, k));
        c.update(b, k.assign(""));
        assertEquals("", c.read(b, k));
    }

    @Test
    void lwwRegisterConcurrentAssignsKeepExactlyOne(Env env) {
        TestClient a = env.client();
        TestClient c2 = env.client();
        Bucket b = env.bucket();
        RegisterKey<String> k = Key.register("r");
        concurrently(b, List.of(a, c2), List.of(List.of(k.assign("from-a")), List.of(k.assign("from-b"))));
        String first = a.read(b, k);
        assertTrue(Set.of("from-a", "from-b").contains(first), first);
        assertEquals(first, c2.read(b, k), "every reader sees the same winner");
    }

    @Test
    void mvRegisterSequentialAssignsKeepTheLatest(Env env) {
        TestClient c = env.client();
        Bucket b = env.bucket();
        MVRegisterKey<String> k = Key.multiValueRegister("r");
        c.update(b, k.assign("v1"));
        c.update(b, k.assign("v2"));
        assertEquals(List.of("v2"), c.read(b, k));
    }

    @Test
    void mvRegisterConcurrentAssignsAreAllKeptUntilOverwritten(Env env) {
        TestClient a = env.client();
        TestClient c2 = env.client();
        Bucket b = env.bucket();
        MVRegisterKey<String> k = Key.multiValueRegister("r");
        a.update(b, k.assign("base"));
        concurrently(b, List.of(a, c2), List.of(List.of(k.assign("left")), List.of(k.assign("right"))));
        assertEquals(List.of("left", "right"), sorted(a.read(b, k)));
        // An assign whose snapshot covers both values replaces them.
        a.update(b, k.assign("final"));
        assertEquals(List.of("final"), c2.read(b, k));
    }

    @Test
    void mvRegisterResetEmptiesIt(Env env) {
        TestClient c = env.client();
        Bucket b = env.bucket();
        MVRegisterKey<String> k = Key.multiValueRegister("r");
        c.update(b, k.assign("v"));
        c.update(b, k.reset());
        assertEquals(List.of(), c.read(b, k));
    }

    // Maps -------------------------------------------------------------------------------------------------------

    @Test
    void gMapNestsEveryKindTheClientHas(Env env) {
        TestClient c = env.client();
        Bucket b = env.bucket();
        MapKey k = Key.map_g("m");
        c.update(b, k.update(
                Key.counter("count").increment(2),
                Key.fatCounter("fat").increment(1),
                Key.set("tags").addAll("a", "b"),
                Key.set_removeWins("rw").add("r"),
                Key.register("name").assign("alice"),
                Key.multiValueRegister("mv").assign("m1"),
                Key.map_g("inner").update(Key.counter("deep").increment(7)),
                Key.map_rr("rr").update(Key.register("x").assign("y"))));
        c.update(b, k.update(Key.counter("count").increment(3), Key.set("tags").add("c")));
        MapKey.MapReadResult m = c.read(b, k);
        assertEquals(Set.of(Key.counter("count"), Key.fatCounter("fat"), Key.set("tags"), Key.set_removeWins("rw"),
                Key.register("name"), Key.multiValueRegister("mv"), Key.map_g("inner"), Key.map_rr("rr")), m.keySet());
        assertEquals(5, m.get(Key.counter("count")));
        assertEquals(1, m.get(Key.fatCounter("fat")));
        assertEquals(List.of("a", "b", "c"), sorted(m.get(Key.set("tags"))));
        assertEquals(List.of("r"), m.get(Key.set_removeWins("rw")));
        assertEquals("alice", m.get(Key.register("name")));
        assertEquals(List.of("m1"), m.get(Key.multiValueRegister("mv")));
        assertEquals(7, m.get(Key.map_g("inner")).get(Key.counter("deep")));
        assertEquals("y", m.get(Key.map_rr("rr")).get(Key.register("x")));
        // The client's asJavaMap view.
        Map<String, Integer> counters = c.read(b, Key.map_g("m2")).asJavaMap(ResponseDecoder.counter());
        assertEquals(Map.of(), counters);
    }

    @Test
    void mapReadAsAJavaMap(Env env) {
        TestClient c = env.client();
        Bucket b = env.bucket();
        MapKey k = Key.map_rr("m");
        c.update(b, k.update(Key.fatCounter("a").increment(1), Key.fatCounter("b").increment(2)));
        assertEquals(Map.of("a", 1, "b", 2), c.read(b, k).asJavaMap(ResponseDecoder.counter()));
    }

    @Test
    void mapsNestThirtyTwoDeep(Env env) {
        // docs/protocol.md: maps nest at most 32 deep. The Java client builds and reads 32 levels; a 33rd is
        // refused with a reason, and the connection goes on.
        TestClient c = env.client();
        Bucket b = env.bucket();
        for (int depth : new int[]{32, 33}) {
            UpdateOp op = Key.counter("leaf").increment(depth);
            for (int i = 0; i < depth - 1; i++) {
                op = Key.map_rr("m" + i).update(op);
            }
            MapKey top = Key.map_rr("deep" + depth);
            UpdateOp update = top.update(op);
            if (depth == 32) {
                c.update(b, update);
                MapKey.MapReadResult m = c.read(b, top);
                for (int i = depth - 2; i >= 0; i--) {
                    assertEquals(1, m.size());
                    m = m.get(Key.map_rr("m" + i));
                }
                assertEquals(32, m.get(Key.counter("leaf")));
            } else {
                Expect.serverError(() -> c.update(b, update));
                assertEquals(0, c.read(b, top).size());
            }
        }
    }

    @Test
    void gMapRemoveIsRefused(Env env) {
        TestClient c = env.client();
        Bucket b = env.bucket();
        MapKey k = Key.map_g("m");
        c.update(b, k.update(Key.counter("c").increment(1)));
        Expect.serverError(() -> c.update(b, k.removeKey(Key.counter("c"))));
        assertEquals(1, c.read(b, k).get(Key.counter("c")));
    }

    @Test
    void mapUpdateNamingOneNestedKeyTwiceIsRefused(Env env) {
        // MapKey.update(...) sends what it is given; the client's operation() builder refuses this itself.
        TestClient c = env.client();
        Bucket b = env.bucket();
        MapKey k = Key.map_g("m");
        Expect.serverError(() -> c.update(b, k.update(Key.counter("c").increment(1), Key.counter("c").increment(2))));
        assertEquals(0, c.read(b, k).size());
        assertThrows(eu.antidotedb.client.AntidoteException.class,
                () -> k.operation().update(Key.counter("c").increment(1)).update(Key.counter("c").increment(2)));
    }

    private static void fillRrMap(TestClient c, Bucket b, MapKey k) {
        c.update(b, k.update(
                Key.fatCounter("hits").increment(4),
                Key.set("tags").addAll("a", "b"),
                Key.multiValueRegister("owner").assign("ann"),
                Key.set_removeWins("rw").add("z")));
    }

    @Test
    void rrMapRemoveResetsTheEntry(Env env) {
        TestClient c = env.client();
        Bucket b = env.bucket();
        MapKey k = Key.map_rr("m");
        fillRrMap(c, b, k);
        assertEquals(Set.of(Key.fatCounter("hits"), Key.set("tags"), Key.multiValueRegister("owner"),
                Key.set_removeWins("rw")), c.read(b, k).keySet());
        c.update(b, k.removeKeys(Key.set("tags"), Key.fatCounter("hits")));
        assertEquals(Set.of(Key.multiValueRegister("owner"), Key.set_removeWins("rw")), c.read(b, k).keySet());
        // Updating a removed key starts again from the type's initial value.
        c.update(b, k.update(Key.set("tags").add("c"), Key.fatCounter("hits").increment(1)));
        MapKey.MapReadResult m = c.read(b, k);
        assertEquals(List.of("c"), m.get(Key.set("tags")));
        assertEquals(1, m.get(Key.fatCounter("hits")));
    }

    @Test
    void rrMapRemoveOfAnAbsentKeyIsANoOp(Env env) {
        TestClient c = env.client();
        Bucket b = env.bucket();
        MapKey k = Key.map_rr("m");
        fillRrMap(c, b, k);
        c.update(b, k.removeKey(Key.set("nothing")));
        assertEquals(4, c.read(b, k).size());
    }

    @Test
    void rrMapEntryResetToBottomDisappears(Env env) {
        TestClient c = env.client();
        Bucket b = env.bucket();
        MapKey k = Key.map_rr("m");
        c.update(b, k.update(Key.set("s").add("x"), Key.fatCounter("n").increment(1)));
        c.update(b, k.update(Key.set("s").remove("x")));
        assertEquals(Set.of(Key.fatCounter("n")), c.read(b, k).keySet());
    }

    @Test
    void rrMapResetRemovesEveryEntry(Env env) {
        TestClient c = env.client();
        Bucket b = env.bucket();
        MapKey k = Key.map_rr("m");
        fillRrMap(c, b, k);
        c.update(b, k.reset());
        assertEquals(0, c.read(b, k).size());
    }

    @Test
    void rrMapNestedMapRemove(Env env) {
        TestClient c = env.client();
        Bucket b = env.bucket();
        MapKey k = Key.map_rr("m");
        c.update(b, k.update(Key.map_rr("inner").update(Key.set("s").add("x")), Key.fatCounter("f").increment(1)));
        assertEquals(List.of("x"), c.read(b, k).get(Key.map_rr("inner")).get(Key.set("s")));
        c.update(b, k.removeKey(Key.map_rr("inner")));
        assertEquals(Set.of(Key.fatCounter("f")), c.read(b, k).keySet());
    }

    @Test
    void rrMapUpdateConcurrentWithRemoveSurvives(Env env) {
        TestClient a = env.client();
        TestClient c2 = env.client();
        Bucket b = env.bucket();
        MapKey k = Key.map_rr("m");
        a.update(b, k.update(Key.fatCounter("c").increment(10), Key.set("s").add("old")));
        concurrently(b, List.of(a, c2), List.of(
                List.of(k.removeKeys(Key.fatCounter("c"), Key.set("s"))),
                List.of(k.update(Key.fatCounter("c").increment(5)))));
        MapKey.MapReadResult m = a.read(b, k);
        // The remove resets what it saw (10 and "old"); the concurrent increment survives.
        assertEquals(Set.of(Key.fatCounter("c")), m.keySet());
        assertEquals(5, m.get(Key.fatCounter("c")));
    }

    @Test
    void rrMapBatchOfUpdatesAndRemovesInOneOperation(Env env) {
        // The client's MapKey.operation() builder puts updates and removed keys in one ApbMapUpdate: AntidoteDB's
        // map batch (a remove then an update on the same object).
        TestClient c = env.client();
        Bucket b = env.bucket();
        MapKey k = Key.map_rr("m");
        c.update(b, k.update(Key.fatCounter("a").increment(5), Key.fatCounter("b").increment(7)));
        c.update(b, k.operation().update(Key.fatCounter("c").increment(1)).removeKey(Key.fatCounter("a")));
        assertEquals(Map.of("b", 7, "c", 1), c.read(b, k).asJavaMap(ResponseDecoder.counter()));
        try (InteractiveTransaction tx = c.begin()) {
            b.update(tx, k.operation().removeKeys(Key.fatCounter("b"), Key.fatCounter("c"))
                    .update(Key.fatCounter("d").increment(2)));
            assertEquals(Map.of("d", 2), b.read(tx, k).asJavaMap(ResponseDecoder.counter()));
            tx.commitTransaction();
        }
        assertEquals(Map.of("d", 2), c.read(b, k).asJavaMap(ResponseDecoder.counter()));
    }

    @Test
    void rrMapWithNestedCounterAndRegisterAsInTheClientsDocumentation(Env env) {
        // The client's documentation's map example, on a remove-resets map (its map_aw is not in the protocol).
        TestClient c = env.client();
        Bucket b = env.bucket();
        MapKey testmap = Key.map_rr("testmap2");
        var tx = c.staticTx();
        b.update(tx, testmap.update(Key.counter("a").increment(5), Key.register("b").assign("Hello")));
        tx.commitTransaction();
        MapKey.MapReadResult m = c.read(b, testmap);
        assertEquals(5, m.get(Key.counter("a")));
        assertEquals("Hello", m.get(Key.register("b")));
        // Removing an entry whose type has no reset (counter_pn, register_lww) leaves it as it is, as in
        // AntidoteDB (docs/protocol.md); removing a fat counter entry resets it away.
        c.update(b, testmap.update(Key.fatCounter("f").increment(1)));
        c.update(b, testmap.removeKeys(Key.register("b"), Key.counter("a"), Key.fatCounter("f")));
        m = c.read(b, testmap);
        assertEquals(Set.of(Key.counter("a"), Key.register("b")), m.keySet());
        assertEquals(5, m.get(Key.counter("a")));
        assertEquals("Hello", m.get(Key.register("b")));
    }
}
