package causet.conformance;

import eu.antidotedb.client.AntidoteStaticTransaction;
import eu.antidotedb.client.BatchRead;
import eu.antidotedb.client.BatchReadResult;
import eu.antidotedb.client.Bucket;
import eu.antidotedb.client.CounterKey;
import eu.antidotedb.client.InteractiveTransaction;
import eu.antidotedb.client.Key;
import eu.antidotedb.client.UpdateOp;
import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.stream.IntStream;

import static org.junit.jupiter.api.Assertions.assertEquals;

/**
 * Many objects in one request: batch updates (a static transaction, a NoTransaction with several updates, an
 * interactive update of many objects) and batch reads (BatchRead and Bucket.readAll, without a transaction and
 * inside one). The client's CountingTransformer confirms each batch went out as one request, and every value comes
 * back in request order.
 */
@WithCauset
class BatchReadTest {
    static final int MANY = 1000;

    static List<CounterKey> counters(int n) {
        return IntStream.range(0, n).mapToObj(i -> Key.counter("c" + i)).toList();
    }

    static List<Integer> expected(int n) {
        return IntStream.range(0, n).map(i -> i % 97 - 48).boxed().toList();
    }

    static UpdateOp[] increments(List<CounterKey> keys) {
        return IntStream.range(0, keys.size()).mapToObj(i -> keys.get(i).increment(i % 97 - 48))
                .toArray(UpdateOp[]::new);
    }

    @Test
    void thousandObjectsWrittenInOneStaticTransactionAndReadInOneBatchRead(Env env) {
        TestClient c = env.client();
        Bucket b = env.bucket();
        List<CounterKey> keys = counters(MANY);
        AntidoteStaticTransaction tx = c.staticTx();
        b.updates(tx, increments(keys));
        tx.commitTransaction();
        assertEquals(1, c.counts.getStaticUpdatesCounter());

        BatchRead batch = c.batch();
        List<BatchReadResult<Integer>> results = new ArrayList<>();
        AtomicInteger ready = new AtomicInteger();
        for (CounterKey k : keys) {
            BatchReadResult<Integer> r = b.read(batch, k);
            r.whenReady(v -> ready.incrementAndGet());
            results.add(r);
        }
        batch.commit(c.noTx());
        assertEquals(1, c.counts.getStaticReadsCounter(), "one ApbStaticReadObjects for the whole batch");
        assertEquals(MANY, ready.get(), "every result was delivered");
        assertEquals(expected(MANY), results.stream().map(BatchReadResult::get).toList());
        // And Bucket.readAll, the shortcut for the same.
        assertEquals(expected(MANY), b.readAll(c.noTx(), keys));
        assertEquals(2, c.counts.getStaticReadsCounter());
    }

    @Test
    void thousandObjectsInOneInteractiveTransaction(Env env) {
        TestClient c = env.client();
        Bucket b = env.bucket();
        List<CounterKey> keys = counters(MANY);
        try (InteractiveTransaction tx = c.begin()) {
            b.updates(tx, increments(keys));
            assertEquals(1, c.counts.getUpdateObjectsCounter(), "one ApbUpdateObjects for every update");
            assertEquals(expected(MANY), b.readAll(tx, keys), "own writes, read in one batch");
            BatchRead batch = c.batch();
            List<BatchReadResult<Integer>> results = keys.stream().map(k -> b.read(batch, k)).toList();
            batch.commit(tx);
            assertEquals(expected(MANY), results.stream().map(BatchReadResult::get).toList());
            assertEquals(2, c.counts.getReadObjectsCounter());
            tx.commitTransaction();
        }
        try (InteractiveTransaction tx = c.begin()) {
            assertEquals(expected(MANY), b.readAll(tx, keys));
            tx.commitTransaction();
        }
    }

    @Test
    void batchOfEveryTypeMixedWithMissingObjectsAndRepeats(Env env) {
        TestClient c = env.client();
        Bucket b = env.bucket();
        List<eu.antidotedb.client.Key<?>> keys = new ArrayList<>();
        List<Object> want = new ArrayList<>();
        List<UpdateOp> ops = new ArrayList<>();
        for (int i = 0; i < 25; i++) {
            ops.add(Key.counter("c" + i).increment(i));
            ops.add(Key.fatCounter("f" + i).increment(i));
            ops.add(Key.set("s" + i).add("e" + i));
            ops.add(Key.set_removeWins("w" + i).add("e" + i));
            ops.add(Key.register("r" + i).assign("v" + i));
            ops.add(Key.multiValueRegister("m" + i).assign("v" + i));
            ops.add(Key.map_g("g" + i).update(Key.counter("n").increment(i)));
            ops.add(Key.map_rr("rr" + i).update(Key.register("n").assign("v" + i)));
        }
        c.update(b, ops.toArray(UpdateOp[]::new));
        for (int i = 0; i < 25; i++) {
            keys.addAll(List.of(Key.counter("c" + i), Key.fatCounter("f" + i), Key.set("s" + i),
                    Key.set_removeWins("w" + i), Key.register("r" + i), Key.multiValueRegister("m" + i),
                    Key.counter("missing" + i), Key.counter("c" + i)));
            want.addAll(List.of(i, i, List.of("e" + i), List.of("e" + i), "v" + i, List.of("v" + i), 0, i));
        }
        List<Object> got = b.readAll(c.noTx(), keys);
        assertEquals(want, got);
        // Maps in one batch, decoded entry by entry.
        BatchRead batch = c.batch();
        List<BatchReadResult<eu.antidotedb.client.MapKey.MapReadResult>> gmaps = new ArrayList<>();
        List<BatchReadResult<eu.antidotedb.client.MapKey.MapReadResult>> rrmaps = new ArrayList<>();
        for (int i = 0; i < 25; i++) {
            gmaps.add(b.read(batch, Key.map_g("g" + i)));
            rrmaps.add(b.read(batch, Key.map_rr("rr" + i)));
        }
        batch.commit(c.noTx());
        for (int i = 0; i < 25; i++) {
            assertEquals(i, gmaps.get(i).get().get(Key.counter("n")));
            assertEquals("v" + i, rrmaps.get(i).get().get(Key.register("n")));
        }
    }

    @Test
    void oneBatchReadAcrossBuckets(Env env) {
        // A batch names each object's bucket: one request may read from many buckets.
        TestClient c = env.client();
        List<Bucket> buckets = IntStream.range(0, 120).mapToObj(i -> env.bucket("b" + i)).toList();
        AntidoteStaticTransaction tx = c.staticTx();
        for (int i = 0; i < buckets.size(); i++) {
            buckets.get(i).update(tx, Key.counter("k").increment(i));
        }
        tx.commitTransaction();
        BatchRead batch = c.batch();
        List<BatchReadResult<Integer>> results = buckets.stream().map(bk -> bk.read(batch, Key.counter("k"))).toList();
        batch.commit(c.noTx());
        assertEquals(IntStream.range(0, 120).boxed().toList(), results.stream().map(BatchReadResult::get).toList());
        assertEquals(1, c.counts.getStaticReadsCounter());
    }
}
