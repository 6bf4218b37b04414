package causet.conformance;

import eu.antidotedb.client.Bucket;
import eu.antidotedb.client.InteractiveTransaction;
import eu.antidotedb.client.Key;
import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.TimeUnit;
import java.util.stream.IntStream;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Several clients at once, in threads: no increment or element is lost, whether each thread has its own client or
 * all share one (the client's connection pool then opens a connection per concurrent request).
 */
@WithCauset
class ConcurrencyTest {
    static final int THREADS = 8;
    static final int ROUNDS = 25;

    interface Body {
        void run(TestClient client, int index) throws Exception;
    }

    /** Runs body in THREADS threads that start together; clientFor gives each thread's client. */
    static void runThreads(java.util.function.IntFunction<TestClient> clientFor, Body body) throws Exception {
        CyclicBarrier barrier = new CyclicBarrier(THREADS);
        List<Throwable> errors = new CopyOnWriteArrayList<>();
        List<Thread> threads = new ArrayList<>();
        for (int i = 0; i < THREADS; i++) {
            int index = i;
            TestClient client = clientFor.apply(i);
            threads.add(new Thread(() -> {
                try {
                    barrier.await(30, TimeUnit.SECONDS);
                    body.run(client, index);
                } catch (Throwable t) {
                    errors.add(t);
                }
            }, "client-" + i));
        }
        threads.forEach(Thread::start);
        for (Thread t : threads) {
            t.join(45_000);
            assertFalse(t.isAlive(), "a client thread hung");
        }
        assertTrue(errors.isEmpty(), () -> "client threads failed: " + errors);
    }

    @Test
    void concurrentStaticIncrementsAddUp(Env env) throws Exception {
        Bucket b = env.bucket();
        var k = Key.counter("k");
        runThreads(i -> env.client(), (c, i) -> {
            for (int n = 0; n < ROUNDS; n++) {
                c.update(b, k.increment(i + 1));
            }
        });
        assertEquals(ROUNDS * IntStream.rangeClosed(1, THREADS).sum(), env.client().read(b, k));
    }

    @Test
    void concurrentInteractiveIncrementsAddUp(Env env) throws Exception {
        Bucket b = env.bucket();
        var k = Key.fatCounter("k");
        runThreads(i -> env.client(), (c, i) -> {
            for (int n = 0; n < ROUNDS / 2; n++) {
                try (InteractiveTransaction tx = c.begin()) {
                    assertTrue(b.read(tx, k) >= 0);
                    b.update(tx, k.increment(2));
                    b.update(tx, k.increment(-1));
                    tx.commitTransaction();
                }
            }
        });
        assertEquals(THREADS * (ROUNDS / 2), env.client().read(b, k));
    }

    @Test
    void concurrentSetAddsAreAllKept(Env env) throws Exception {
        Bucket b = env.bucket();
        var k = Key.set("s");
        runThreads(i -> env.client(), (c, i) -> {
            for (int n = 0; n < ROUNDS / 2; n++) {
                c.commitStatic(b, k.add(i + "-" + n));
            }
        });
        List<String> want = IntStream.range(0, THREADS).boxed()
                .flatMap(i -> IntStream.range(0, ROUNDS / 2).mapToObj(n -> i + "-" + n)).sorted().toList();
        assertEquals(want, TypesTest.sorted(env.client().read(b, k)));
    }

    @Test
    void threadsSharingOneClientAndItsConnectionPool(Env env) throws Exception {
        Bucket b = env.bucket();
        var k = Key.counter("k");
        var s = Key.set_removeWins("s");
        TestClient shared = env.client();
        runThreads(i -> shared, (c, i) -> {
            for (int n = 0; n < ROUNDS; n++) {
                if (n % 5 == 0) {
                    try (InteractiveTransaction tx = c.begin()) {
                        b.updates(tx, k.increment(1), s.add(i + "-" + n));
                        tx.commitTransaction();
                    }
                } else {
                    c.update(b, k.increment(1), s.add(i + "-" + n));
                }
                assertTrue(c.read(b, k) >= 1);
            }
        });
        assertEquals(THREADS * ROUNDS, shared.read(b, k));
        assertEquals(THREADS * ROUNDS, shared.read(b, s).size());
        assertTrue(shared.sockets.opened() > 1, "the pool opened several connections");
    }

    @Test
    void manyClientsAtOnce(Env env) {
        Bucket b = env.bucket();
        var k = Key.counter("k");
        List<TestClient> clients = IntStream.range(0, 64).mapToObj(i -> env.client()).toList();
        for (TestClient c : clients) {
            c.update(b, k.increment(1));
        }
        for (int i = 0; i < clients.size(); i += 8) {
            assertEquals(64, clients.get(i).read(b, k));
        }
    }
}
