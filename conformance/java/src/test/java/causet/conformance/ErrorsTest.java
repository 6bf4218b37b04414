package causet.conformance;

import com.google.protobuf.ByteString;
import eu.antidotedb.client.AntidoteException;
import eu.antidotedb.client.Bucket;
import eu.antidotedb.client.ClientAccess;
import eu.antidotedb.client.InteractiveTransaction;
import eu.antidotedb.client.Key;
import eu.antidotedb.client.UpdateOp;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import java.net.InetSocketAddress;
import java.util.List;
import java.util.function.Function;
import java.util.stream.IntStream;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Error cases as the Java client meets them: the client must surface an error, and the server (and, where the
 * framing is intact, the same connection) must go on serving. Use after commit/abort, bad descriptors and bad
 * clocks are in {@link TransactionsTest} and {@link CausalityTest}; the types the client has and the protocol no
 * longer does in {@link TypesTest}.
 */
@WithCauset
class ErrorsTest {

    /** Operations that do not fit their object's type, built through the client's own classes. */
    enum WrongOp {
        INCREMENT_ON_LWWREG(b -> ClientAccess.incrementOn(Key.register("k"), 1)),
        ASSIGN_ON_COUNTER(b -> ClientAccess.assignOn(Key.counter("k"), ByteString.copyFromUtf8("x"))),
        ADD_ON_MVREG(b -> ClientAccess.addOn(Key.multiValueRegister("k"), ByteString.copyFromUtf8("x"))),
        INCREMENT_ON_GMAP(b -> ClientAccess.incrementOn(Key.map_g("k"), 1)),
        ASSIGN_ON_ORSET(b -> ClientAccess.assignOn(Key.set("k"), ByteString.copyFromUtf8("x"))),
        NESTED_ADD_ON_FATCOUNTER(b -> Key.map_rr("m").update(
                ClientAccess.addOn(Key.fatCounter("n"), ByteString.copyFromUtf8("x")))),
        MAP_UPDATE_ON_RWSET(b -> ClientAccess.rawOperation(Key.set_removeWins("k"),
                eu.antidotedb.antidotepb.AntidotePB.ApbUpdateOperation.newBuilder().setMapop(
                        eu.antidotedb.antidotepb.AntidotePB.ApbMapUpdate.newBuilder())));

        final Function<Bucket, UpdateOp> op;

        WrongOp(Function<Bucket, UpdateOp> op) {
            this.op = op;
        }
    }

    @ParameterizedTest
    @org.junit.jupiter.params.provider.EnumSource(WrongOp.class)
    void operationThatDoesNotFitTheTypeIsAnErrorAndTheTransactionGoesOn(WrongOp wrong, Env env) {
        TestClient c = env.client();
        Bucket b = env.bucket();
        Expect.serverError(() -> c.update(b, wrong.op.apply(b)));
        Expect.serverError(() -> c.commitStatic(b, wrong.op.apply(b)));
        try (InteractiveTransaction tx = c.begin()) {
            Expect.serverError(() -> b.update(tx, wrong.op.apply(b)));
            // The connection is in step and the transaction still usable.
            b.update(tx, Key.counter("other").increment(1));
            assertEquals(1, b.read(tx, Key.counter("other")));
            tx.commitTransaction();
        }
        assertEquals(1, c.read(b, Key.counter("other")));
    }

    @Test
    void wrongOperationInABatchAppliesNoneOfIt(Env env) {
        TestClient c = env.client();
        Bucket b = env.bucket();
        UpdateOp bad = ClientAccess.incrementOn(Key.register("bad"), 1);
        Expect.serverError(() -> c.update(b, Key.counter("good").increment(1), bad));
        Expect.serverError(() -> c.commitStatic(b, Key.counter("good").increment(1), Key.set("s").add("x"), bad));
        assertEquals(List.of(0, List.of()), b.readAll(c.noTx(), List.of(Key.counter("good"), Key.set("s"))));
        try (InteractiveTransaction tx = c.begin()) {
            Expect.serverError(() -> b.updates(tx, Key.counter("good").increment(1), bad));
            assertEquals(0, b.read(tx, Key.counter("good")), "a refused request changes nothing, even in the tx");
            tx.commitTransaction();
        }
        assertEquals(0, c.read(b, Key.counter("good")));
    }

    @Test
    @SuppressWarnings("unchecked") // the client's IntegerKey extends the raw Key type
    void errorRepliesKeepTheConnectionInStep(Env env) {
        // Refused and accepted requests alternate on one connection (an interactive transaction keeps its own):
        // each gets its own reply.
        TestClient c = env.client();
        Bucket b = env.bucket();
        try (InteractiveTransaction tx = c.begin()) {
            for (int i = 0; i < 10; i++) {
                Expect.serverError(() -> b.update(tx, Key.counter("k").reset()));
                Expect.serverError(() -> b.read(tx, Key.integer("i")));
                b.update(tx, Key.counter("k").increment(1));
                assertEquals(i + 1, b.read(tx, Key.counter("k")));
            }
            tx.commitTransaction();
        }
        // The same without a transaction, over the client's pooled connections.
        for (int i = 0; i < 10; i++) {
            Expect.serverError(() -> c.update(b, Key.counter("k").reset()));
            Expect.serverError(() -> b.read(c.noTx(), Key.integer("i")));
            c.update(b, Key.counter("k").increment(1));
            assertEquals(11 + i, c.read(b, Key.counter("k")));
        }
    }

    @Test
    void connectingToAClosedPortIsAnError(Env env) {
        int closed = CausetServer.freePort();
        TestClient c = new TestClient(new InetSocketAddress(CausetServer.HOST, closed));
        try {
            Bucket b = env.bucket();
            AntidoteException read = assertThrows(AntidoteException.class, () -> c.read(b, Key.counter("k")));
            assertTrue(read.getMessage().contains(String.valueOf(closed)), read.getMessage());
            assertThrows(AntidoteException.class, () -> c.update(b, Key.counter("k").increment(1)));
            assertThrows(AntidoteException.class, c::begin);
        } finally {
            c.close();
        }
        // The server (another port) is not affected.
        TestClient ok = env.client();
        ok.update(env.bucket(), Key.counter("k").increment(1));
        assertEquals(1, ok.read(env.bucket(), Key.counter("k")));
    }

    @Test
    void serverThatStopsUnderAClientIsAnErrorForTheClient(Env env) {
        CausetServer srv = env.startServer();
        TestClient c = env.client(srv);
        Bucket b = env.bucket();
        c.update(b, Key.counter("k").increment(1));
        InteractiveTransaction open = c.begin();
        assertEquals(0, srv.stop(), "SIGTERM with an open transaction: a clean exit");
        RuntimeException e = assertThrows(RuntimeException.class, () -> c.read(b, Key.counter("k")));
        assertInstanceOf(AntidoteException.class, e, "a closed connection is an AntidoteException: " + e);
        assertThrows(AntidoteException.class, () -> b.read(open, Key.counter("k")));
        // The class's server is not affected.
        TestClient ok = env.client();
        assertEquals(0, ok.read(b, Key.counter("k")));
    }

    @Test
    void requestOverTheFrameLimitGetsTheReasonAndTheConnectionGoesOn(Env env) {
        // The server reads the oversized request to its end, drops it, and says why (the size, the limit and the
        // option that raises it); the client's connection stays in step.
        CausetServer srv = env.startServer("--max-frame-bytes", "100000");
        TestClient c = env.client(srv);
        Bucket b = env.bucket();
        List<String> elements = IntStream.range(0, 4000).mapToObj(i -> String.format("element-%060d", i)).toList();
        String message = Expect.serverError(() -> c.update(b, Key.set("s").addAll(elements)), "max-frame-bytes");
        assertTrue(message.contains("100000"), message);
        c.update(b, Key.set("s").addAll(elements.subList(0, 100)));
        assertEquals(100, c.read(b, Key.set("s")).size());
        // In an interactive transaction, on the transaction's own connection.
        try (InteractiveTransaction tx = c.begin()) {
            Expect.serverError(() -> b.update(tx, Key.set("t").addAll(elements)), "max-frame-bytes");
            b.update(tx, Key.set("t").addAll(elements.subList(0, 10)));
            assertEquals(10, b.read(tx, Key.set("t")).size());
            tx.commitTransaction();
        }
        assertEquals(10, c.read(b, Key.set("t")).size());
    }

    @Test
    void connectionOverTheLimitGetsAnErrorAndTheServerGoesOn(Env env) {
        CausetServer srv = env.startServer("--max-connections", "2");
        Bucket b = env.bucket();
        TestClient first = env.client(srv);
        TestClient second = env.client(srv);
        first.update(b, Key.counter("k").increment(1));
        second.update(b, Key.counter("k").increment(1));
        TestClient third = env.client(srv);
        RuntimeException e = Expect.anyError(() -> third.read(b, Key.counter("k")));
        if (e.getMessage() != null && e.getMessage().contains("errmsg")) {
            assertTrue(e.getMessage().toLowerCase().contains("too many connections"), e.getMessage());
        }
        // Once a connection closes, a new client gets its place.
        first.close();
        long deadline = System.nanoTime() + 10_000_000_000L;
        while (true) {
            TestClient fourth = env.client(srv);
            try {
                assertEquals(2, fourth.read(b, Key.counter("k")));
                break;
            } catch (RuntimeException retry) {
                fourth.close();
                assertTrue(System.nanoTime() < deadline, "no connection was accepted after one closed: " + retry);
                CausetServer.sleep(100);
            }
        }
        assertEquals(2, second.read(b, Key.counter("k")));
    }

    @ParameterizedTest
    @ValueSource(ints = {1, 2, 5})
    void concurrentFailuresOnSeveralConnectionsDoNotDisturbEachOther(int connections, Env env) throws Exception {
        TestClient c = env.client();
        Bucket b = env.bucket();
        List<Thread> threads = IntStream.range(0, connections).mapToObj(i -> new Thread(() -> {
            for (int n = 0; n < 20; n++) {
                Expect.serverError(() -> c.update(b, Key.register("r" + i).reset()));
                c.update(b, Key.counter("k").increment(1));
            }
        })).toList();
        List<Throwable> errors = new java.util.concurrent.CopyOnWriteArrayList<>();
        threads.forEach(t -> t.setUncaughtExceptionHandler((th, ex) -> errors.add(ex)));
        threads.forEach(Thread::start);
        for (Thread t : threads) {
            t.join(30_000);
            assertTrue(!t.isAlive(), "a client thread hung");
        }
        assertTrue(errors.isEmpty(), errors.toString());
        assertEquals(20 * connections, c.read(b, Key.counter("k")));
    }
}
