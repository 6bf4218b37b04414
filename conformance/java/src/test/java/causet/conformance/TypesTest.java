package causet.conformance;

import com.google.protobuf.ByteString;
import eu.antidotedb.client.AntidoteStaticTransaction;
import eu.antidotedb.client.BatchRead;
import eu.antidotedb.client.BatchReadResult;
import eu.antidotedb.client.Bucket;
import eu.antidotedb.client.CommitInfo;
import eu.antidotedb.client.CounterKey;
import eu.antidotedb.client.InteractiveTransaction;
import eu.antidotedb.client.Key;
import eu.antidotedb.client.MapKey;
import eu.antidotedb.client.UpdateOp;
import eu.antidotedb.client.ValueCoder;
import org.junit.jupiter.api.Disabled;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.function.Consumer;
import java.util.function.Function;
import java.util.stream.Collectors;
import java.util.stream.IntStream;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Every CRDT type the Java client (0.1.0) can name, through each way it has of writing (NoTransaction, a static
 * transaction, an interactive transaction) and of reading (NoTransaction, an interactive transaction, batch reads),
 * with the values read back decoded by the client.
 *
 * <p>The client's types: COUNTER, FATCOUNTER, LWWREG, MVREG, ORSET, RWSET, GMAP, RRMAP, and two that AntidoteDB has
 * since dropped from its protocol, INTEGER (7) and AWMAP (9). It has no flags and no bounded counter (its enum's 13
 * is POLICY, which AntidoteDB now numbers FLAG_EW).
 */
@WithCauset
class TypesTest {

    /** A type the client and Causet share: the key, an update, and what the update reads back as. */
    @SuppressWarnings("unchecked")
    enum Type {
        COUNTER(Key::counter,
                k -> List.of(((eu.antidotedb.client.CounterKey) k).increment(5),
                        ((eu.antidotedb.client.CounterKey) k).increment(-2)),
                v -> assertEquals(3, v)),
        FATCOUNTER(Key::fatCounter,
                k -> List.of(((eu.antidotedb.client.CounterKey) k).increment(7)),
                v -> assertEquals(7, v)),
        ORSET(Key::set,
                k -> List.of(set(k).addAll("a", "b"), set(k).add("c")),
                v -> assertEquals(List.of("a", "b", "c"), sorted(v))),
        RWSET(Key::set_removeWins,
                k -> List.of(set(k).addAll("a", "b"), set(k).add("c")),
                v -> assertEquals(List.of("a", "b", "c"), sorted(v))),
        LWWREG(Key::register,
                k -> List.of(((eu.antidotedb.client.RegisterKey<String>) k).assign("hello")),
                v -> assertEquals("hello", v)),
        MVREG(Key::multiValueRegister,
                k -> List.of(((eu.antidotedb.client.MVRegisterKey<String>) k).assign("hello")),
                v -> assertEquals(List.of("hello"), v)),
        GMAP(Key::map_g,
                k -> List.of(((MapKey) k).update(Key.counter("c").increment(2), Key.register("e").assign("nested"))),
                v -> {
                    MapKey.MapReadResult m = assertInstanceOf(MapKey.MapReadResult.class, v);
                    assertEquals(Set.of(Key.counter("c"), Key.register("e")), m.keySet());
                    assertEquals(2, m.get(Key.counter("c")));
                    assertEquals("nested", m.get(Key.register("e")));
                }),
        RRMAP(Key::map_rr,
                k -> List.of(((MapKey) k).update(Key.fatCounter("c").increment(2), Key.set("e").addAll("x", "y"))),
                v -> {
                    MapKey.MapReadResult m = assertInstanceOf(MapKey.MapReadResult.class, v);
                    assertEquals(Set.of(Key.fatCounter("c"), Key.set("e")), m.keySet());
                    assertEquals(2, m.get(Key.fatCounter("c")));
                    assertEquals(List.of("x", "y"), sorted(m.get(Key.set("e"))));
                });

        final Function<String, Key<?>> key;
        final Function<Key<?>, List<UpdateOp>> ops;
        final Consumer<Object> check;

        Type(Function<String, Key<?>> key, Function<Key<?>, List<UpdateOp>> ops, Consumer<Object> check) {
            this.key = key;
            this.ops = ops;
            this.check = check;
        }

        @SuppressWarnings("unchecked")
        private static eu.antidotedb.client.SetKey<String> set(Key<?> k) {
            return (eu.antidotedb.client.SetKey<String>) k;
        }

        Key<?> key(String name) {
            return key.apply(name);
        }

        /** What a never written object of the type reads as. */
        void checkInitial(Object v) {
            switch (this) {
                case COUNTER, FATCOUNTER -> assertEquals(0, v);
                case ORSET, RWSET, MVREG -> assertEquals(List.of(), v);
                case LWWREG -> assertEquals("", v);
                case GMAP, RRMAP -> assertEquals(0, assertInstanceOf(MapKey.MapReadResult.class, v).size());
            }
        }
    }

    @SuppressWarnings("unchecked")
    static List<String> sorted(Object list) {
        return ((List<String>) list).stream().sorted().collect(Collectors.toList());
    }

    @ParameterizedTest
    @EnumSource(Type.class)
    void staticTransactionUpdateThenRead(Type type, Env env) {
        TestClient c = env.client();
        Bucket b = env.bucket();
        Key<?> k = type.key("k");
        AntidoteStaticTransaction tx = c.staticTx();
        b.updates(tx, type.ops.apply(k));
        CommitInfo info = tx.commitTransaction();
        assertNotNull(info.getCommitTime());
        assertFalse(info.getCommitTime().isEmpty(), "a static transaction's commit carries its commit time");
        Clocks.decode(info.getCommitTime());
        assertEquals(1, c.counts.getStaticUpdatesCounter(), "one static transaction is one request");
        type.check.accept(b.read(c.noTx(), k));
    }

    @ParameterizedTest
    @EnumSource(Type.class)
    void noTransactionUpdateThenRead(Type type, Env env) {
        TestClient c = env.client();
        Bucket b = env.bucket();
        Key<?> k = type.key("k");
        for (UpdateOp op : type.ops.apply(k)) {
            b.update(c.noTx(), op);
        }
        type.check.accept(b.read(c.noTx(), k));
        // Another client (another connection) reads the same.
        type.check.accept(b.read(env.client().noTx(), k));
    }

    @ParameterizedTest
    @EnumSource(Type.class)
    void interactiveTransactionUpdateThenRead(Type type, Env env) {
        TestClient c = env.client();
        Bucket b = env.bucket();
        Key<?> k = type.key("k");
        try (InteractiveTransaction tx = c.begin()) {
            for (UpdateOp op : type.ops.apply(k)) {
                b.update(tx, op);
            }
            type.check.accept(b.read(tx, k));
            CommitInfo info = tx.commitTransaction();
            Clocks.decode(info.getCommitTime());
        }
        try (InteractiveTransaction tx = c.begin()) {
            type.check.accept(b.read(tx, k));
            tx.commitTransaction();
        }
    }

    @ParameterizedTest
    @EnumSource(Type.class)
    void neverWrittenObjectReadsAsInitialValue(Type type, Env env) {
        TestClient c = env.client();
        Bucket b = env.bucket();
        Key<?> k = type.key("never-written");
        type.checkInitial(b.read(c.noTx(), k));
        try (InteractiveTransaction tx = c.begin()) {
            type.checkInitial(b.read(tx, k));
            tx.commitTransaction();
        }
    }

    @Test
    void oneBatchReadReadsEveryTypeInOneRequest(Env env) {
        TestClient c = env.client();
        Bucket b = env.bucket();
        List<UpdateOp> all = new ArrayList<>();
        for (Type t : Type.values()) {
            all.addAll(t.ops.apply(t.key("k")));
        }
        c.commitStatic(b, all.toArray(UpdateOp[]::new));

        // BatchRead in a NoTransaction context: one ApbStaticReadObjects.
        BatchRead batch = c.batch();
        List<BatchReadResult<?>> results = new ArrayList<>();
        for (Type t : Type.values()) {
            results.add(b.read(batch, t.key("k")));
        }
        batch.commit(c.noTx());
        assertEquals(1, c.counts.getStaticReadsCounter(), "a batch read is one request");
        for (Type t : Type.values()) {
            t.check.accept(results.get(t.ordinal()).get());
        }

        // Bucket.readAll in an interactive transaction: one ApbReadObjects.
        try (InteractiveTransaction tx = c.begin()) {
            List<Object> values = b.readAll(tx,
                    List.of(Type.values()).stream().map(t -> t.key("k")).collect(Collectors.toList()));
            assertEquals(1, c.counts.getReadObjectsCounter());
            for (Type t : Type.values()) {
                t.check.accept(values.get(t.ordinal()));
            }
            tx.commitTransaction();
        }
    }

    @Test
    void objectsAreIdentifiedByBucketKeyAndType(Env env) {
        TestClient c = env.client();
        Bucket b = env.bucket();
        Bucket other = env.bucket("other");
        c.update(b, Key.counter("same").increment(1), Key.fatCounter("same").increment(10));
        c.update(other, Key.counter("same").increment(100));
        assertEquals(List.of(1, 10, 0), b.readAll(c.noTx(),
                List.of(Key.counter("same"), Key.fatCounter("same"), Key.counter("other"))));
        assertEquals(100, c.read(other, Key.counter("same")));
    }

    @Test
    void bucketsKeysAndValuesAreArbitraryBytes(Env env) {
        TestClient c = env.client();
        Bucket b = Bucket.bucket(ByteString.copyFrom(new byte[]{0, 'b', (byte) 0xff}).concat(
                ByteString.copyFromUtf8(env.bucketName())));
        byte[] all = new byte[256];
        for (int i = 0; i < 256; i++) {
            all[i] = (byte) i;
        }
        ByteString value = ByteString.copyFrom(all);
        ByteString keyBytes = ByteString.copyFrom(new byte[]{'k', 0, 1, (byte) 0xfe});
        var reg = Key.register(keyBytes, ValueCoder.bytestringEncoder);
        var set = Key.set(keyBytes, ValueCoder.bytestringEncoder);
        c.update(b, reg.assign(value), set.addAll(value, ByteString.EMPTY, ByteString.copyFrom(new byte[]{0})));
        assertArrayEquals(all, c.read(b, reg).toByteArray());
        List<ByteString> elements = c.read(b, set);
        assertEquals(Set.of(value, ByteString.EMPTY, ByteString.copyFrom(new byte[]{0})), Set.copyOf(elements));
        assertEquals(3, elements.size());
    }

    @Test
    void emptyNamesRepeatedElementsAndUnicode(Env env) {
        TestClient c = env.client();
        Bucket empty = Bucket.bucket("");
        CounterKey unnamed = Key.counter("");
        int before = c.read(empty, unnamed); // the empty bucket is shared by every run of the test: compare
        c.update(empty, unnamed.increment(3));
        assertEquals(before + 3, c.read(empty, unnamed));
        Bucket b = env.bucket();
        c.update(b, Key.set("d").addAll("a", "a", "b"));
        assertEquals(List.of("a", "b"), sorted(c.read(b, Key.set("d"))));
        String text = "h\u00e9llo \u2713 \ud834\udd1e \u0000 end";
        c.update(b, Key.register("u").assign(text), Key.set("u").add(text));
        assertEquals(text, c.read(b, Key.register("u")));
        assertEquals(List.of(text), c.read(b, Key.set("u")));
    }

    @Test
    void valuesInTheClientsOwnCoders(Env env) {
        // ValueCoder.stringCoder, as in the client's documentation: a set of integers stored as their decimal text.
        TestClient c = env.client();
        Bucket b = env.bucket();
        ValueCoder<Integer> intCoder = ValueCoder.stringCoder(Object::toString, Integer::valueOf);
        var numbers = Key.set("numbers", intCoder);
        var mv = Key.multiValueRegister("mv", intCoder);
        c.update(b, numbers.addAll(3, 1, 2), mv.assign(42));
        assertEquals(List.of(1, 2, 3), c.read(b, numbers).stream().sorted().toList());
        assertEquals(List.of(42), c.read(b, mv));
    }

    @Test
    void readingOneObjectTwiceInOneRequest(Env env) {
        TestClient c = env.client();
        Bucket b = env.bucket();
        c.update(b, Key.set("s").add("x"));
        assertEquals(List.of(List.of("x"), List.of("x")), b.readAll(c.noTx(), List.of(Key.set("s"), Key.set("s"))));
    }

    @Test
    void largeValuesAndLargeReplies(Env env) {
        TestClient c = env.client();
        Bucket b = env.bucket();
        String big = "v".repeat(1 << 20);
        List<String> elements = IntStream.range(0, 5000).mapToObj(i -> String.format("element-%05d", i)).toList();
        c.update(b, Key.register("big").assign(big), Key.set("many").addAll(elements));
        assertEquals(big, c.read(b, Key.register("big")));
        assertEquals(elements, sorted(c.read(b, Key.set("many"))));
    }

    // INTEGER and AWMAP: the client has them, AntidoteDB's protocol no longer does, and Causet refuses them. ------

    @Test
    @SuppressWarnings("unchecked") // the client's IntegerKey extends the raw Key type
    void integerTypeIsRefusedWithAReasonAndTheConnectionGoesOn(Env env) {
        TestClient c = env.client();
        Bucket b = env.bucket();
        Expect.serverError(() -> c.update(b, Key.integer("i").increment(1)), "type 7");
        Expect.serverError(() -> b.read(c.noTx(), Key.integer("i")), "type 7");
        try (InteractiveTransaction tx = c.begin()) {
            Expect.serverError(() -> b.update(tx, Key.integer("i").assign(5)), "type 7");
            Expect.serverError(() -> b.read(tx, Key.integer("i")), "type 7");
            // The transaction and its connection are still usable.
            b.update(tx, Key.counter("c").increment(1));
            tx.commitTransaction();
        }
        // Nested in a map: refused too, and nothing of the update is applied.
        Expect.serverError(() -> c.update(b, Key.map_rr("m").update(Key.integer("i").increment(1),
                Key.fatCounter("n").increment(1))), "type 7");
        assertEquals(0, c.read(b, Key.map_rr("m")).size());
        assertEquals(1, c.read(b, Key.counter("c")));
    }

    @Test
    void addWinsMapTypeIsRefusedWithAReasonAndTheConnectionGoesOn(Env env) {
        TestClient c = env.client();
        Bucket b = env.bucket();
        Expect.serverError(() -> c.update(b, Key.map_aw("m").update(Key.counter("c").increment(1))), "type 9");
        Expect.serverError(() -> b.read(c.noTx(), Key.map_aw("m")), "type 9");
        c.update(b, Key.counter("c").increment(2));
        assertEquals(2, c.read(b, Key.counter("c")));
    }

    @Test
    @Disabled("incompatibility (protocol version, not a Causet bug): the client's INTEGER (CRDT_type 7, integerop = "
            + "ApbUpdateOperation field 4, int = ApbReadObjectResp field 5) was removed from AntidoteDB's protocol; "
            + "Causet answers ApbErrorResp \"unknown CRDT type 7\"")
    @SuppressWarnings("unchecked") // the client's IntegerKey extends the raw Key type
    void integerIncrementsAndAssignmentsAsTheClientExpects(Env env) {
        TestClient c = env.client();
        Bucket b = env.bucket();
        var i = Key.integer("i");
        c.update(b, i.increment(5));
        c.update(b, i.assign(10));
        c.update(b, i.increment(1));
        assertEquals(11L, b.read(c.noTx(), i));
    }

    @Test
    @Disabled("incompatibility (protocol version, not a Causet bug): the client's AWMAP (CRDT_type 9, add-wins map) "
            + "was removed from AntidoteDB's protocol; Causet answers ApbErrorResp \"unknown CRDT type 9\"")
    void addWinsMapAsTheClientExpects(Env env) {
        TestClient c = env.client();
        Bucket b = env.bucket();
        MapKey m = Key.map_aw("m");
        c.update(b, m.update(Key.counter("a").increment(5), Key.register("b").assign("Hello")));
        c.update(b, m.removeKey(Key.counter("a")));
        MapKey.MapReadResult r = c.read(b, m);
        assertEquals(Set.of(Key.register("b")), r.keySet());
        assertEquals("Hello", r.get(Key.register("b")));
        assertTrue(r.containsKey(Key.register("b")));
    }
}
