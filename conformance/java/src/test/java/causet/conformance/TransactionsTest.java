package causet.conformance;

import com.google.protobuf.ByteString;
import eu.antidotedb.client.AntidoteException;
import eu.antidotedb.client.AntidoteStaticTransaction;
import eu.antidotedb.client.Bucket;
import eu.antidotedb.client.CommitInfo;
import eu.antidotedb.client.CounterKey;
import eu.antidotedb.client.InteractiveTransaction;
import eu.antidotedb.client.Key;
import eu.antidotedb.client.RegisterKey;
import eu.antidotedb.client.SetKey;
import org.junit.jupiter.api.Test;

import java.util.List;
import java.util.stream.IntStream;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Interactive and static transactions: reading one's own writes, snapshot isolation, atomic visibility, aborts
 * (the Java client's abortTransaction() and close() send a real ApbAbortTransaction), use after commit or abort,
 * descriptors, idle timeouts and write-write certification.
 */
@WithCauset
class TransactionsTest {

    @Test
    void transactionReadsItsOwnWritesBeforeCommitAndNobodyElseDoes(Env env) {
        TestClient a = env.client();
        TestClient other = env.client();
        Bucket b = env.bucket();
        CounterKey c = Key.counter("c");
        SetKey<String> s = Key.set("s");
        RegisterKey<String> r = Key.register("r");
        try (InteractiveTransaction tx = a.begin()) {
            b.updates(tx, c.increment(3), s.addAll("x", "y"), r.assign("mine"));
            assertEquals(List.of(3, List.of("x", "y"), "mine"), b.readAll(tx, List.of(c, s, r)));
            b.updates(tx, c.increment(4), s.remove("x"));
            assertEquals(7, b.read(tx, c));
            assertEquals(List.of("y"), b.read(tx, s));
            // Nobody else sees them yet: not a read without transaction, not another transaction.
            assertEquals(List.of(0, List.of(), ""), b.readAll(other.noTx(), List.of(c, s, r)));
            try (InteractiveTransaction tx2 = other.begin()) {
                assertEquals(0, b.read(tx2, c));
                tx2.commitTransaction();
            }
            tx.commitTransaction();
        }
        assertEquals(List.of(7, List.of("y"), "mine"), b.readAll(other.noTx(), List.of(c, s, r)));
    }

    @Test
    void transactionReadsFromItsSnapshot(Env env) {
        TestClient a = env.client();
        TestClient other = env.client();
        Bucket b = env.bucket();
        CounterKey k = Key.counter("k");
        a.update(b, k.increment(1));
        try (InteractiveTransaction tx = other.begin()) {
            assertEquals(1, b.read(tx, k));
            a.update(b, k.increment(10)); // commits after tx's snapshot
            assertEquals(1, b.read(tx, k), "a transaction keeps reading its snapshot");
            b.update(tx, k.increment(100));
            assertEquals(101, b.read(tx, k));
            tx.commitTransaction();
        }
        assertEquals(111, a.read(b, k));
    }

    @Test
    void snapshotIsolationBetweenConcurrentTransactions(Env env) {
        // Two transactions that start before either commits see neither's writes, before or after the other
        // commits; a transaction that starts after both sees both.
        TestClient a = env.client();
        TestClient c2 = env.client();
        Bucket b = env.bucket();
        RegisterKey<String> x = Key.register("x");
        RegisterKey<String> y = Key.register("y");
        try (InteractiveTransaction t1 = a.begin(); InteractiveTransaction t2 = c2.begin()) {
            b.update(t1, x.assign("t1"));
            b.update(t2, y.assign("t2"));
            assertEquals(List.of("t1", ""), b.readAll(t1, List.of(x, y)));
            assertEquals(List.of("", "t2"), b.readAll(t2, List.of(x, y)));
            t1.commitTransaction();
            assertEquals(List.of("", "t2"), b.readAll(t2, List.of(x, y)), "t1's commit is not in t2's snapshot");
            t2.commitTransaction();
        }
        try (InteractiveTransaction t3 = a.begin()) {
            assertEquals(List.of("t1", "t2"), b.readAll(t3, List.of(x, y)));
            t3.commitTransaction();
        }
    }

    @Test
    void committedUpdatesAreVisibleAtomically(Env env) {
        TestClient a = env.client();
        TestClient reader = env.client();
        Bucket b = env.bucket();
        List<CounterKey> keys = IntStream.range(0, 8).mapToObj(i -> Key.counter("k" + i)).toList();
        try (InteractiveTransaction tx = a.begin()) {
            for (CounterKey k : keys) {
                b.update(tx, k.increment(1));
            }
            assertEquals(List.of(0, 0, 0, 0, 0, 0, 0, 0), b.readAll(reader.noTx(), keys));
            tx.commitTransaction();
        }
        assertEquals(List.of(1, 1, 1, 1, 1, 1, 1, 1), b.readAll(reader.noTx(), keys));
    }

    @Test
    void staticTransactionAppliesAllOfItsUpdatesAtomically(Env env) {
        TestClient a = env.client();
        Bucket b = env.bucket();
        AntidoteStaticTransaction tx = a.staticTx();
        b.update(tx, Key.counter("c").increment(2));
        b.updates(tx, Key.set("s").add("e"), Key.register("r").assign("v"));
        // Nothing is sent before the commit.
        assertEquals(0, a.counts.getStaticUpdatesCounter());
        assertEquals(List.of(0, List.of(), ""), b.readAll(a.noTx(),
                List.of(Key.counter("c"), Key.set("s"), Key.register("r"))));
        tx.commitTransaction();
        assertEquals(1, a.counts.getStaticUpdatesCounter());
        assertEquals(List.of(2, List.of("e"), "v"), b.readAll(a.noTx(),
                List.of(Key.counter("c"), Key.set("s"), Key.register("r"))));
        assertThrows(AntidoteException.class, tx::commitTransaction, "the client refuses a second commit itself");
    }

    @Test
    void abortedTransactionWritesAreInvisible(Env env) {
        TestClient a = env.client();
        TestClient other = env.client();
        Bucket b = env.bucket();
        CounterKey c = Key.counter("c");
        SetKey<String> s = Key.set("s");
        a.update(b, c.increment(1));
        InteractiveTransaction tx = a.begin();
        b.updates(tx, c.increment(50), s.add("ghost"));
        assertEquals(51, b.read(tx, c));
        tx.abortTransaction(); // ApbAbortTransaction (code 120), answered by ApbOperationResp
        assertEquals(1, a.counts.getAbortTransactionCounter());
        assertEquals(List.of(1, List.of()), b.readAll(a.noTx(), List.of(c, s)));
        other.update(b, c.increment(1));
        assertEquals(List.of(2, List.of()), b.readAll(other.noTx(), List.of(c, s)));
    }

    @Test
    void closingATransactionWithoutCommitAbortsIt(Env env) {
        // The client's documented pattern: try-with-resources; a transaction left without commit is aborted.
        TestClient a = env.client();
        Bucket b = env.bucket();
        CounterKey c = Key.counter("c");
        try (InteractiveTransaction tx = a.begin()) {
            b.update(tx, c.increment(7));
            assertEquals(7, b.read(tx, c));
        }
        assertEquals(1, a.counts.getAbortTransactionCounter());
        assertEquals(0, a.read(b, c));
    }

    @Test
    void abortOfAReadOnlyTransaction(Env env) {
        TestClient a = env.client();
        Bucket b = env.bucket();
        InteractiveTransaction tx = a.begin();
        assertEquals(0, b.read(tx, Key.counter("c")));
        tx.abortTransaction();
        assertEquals(0, a.read(b, Key.counter("c")));
    }

    @Test
    void theClientRefusesToUseAFinishedTransactionItself(Env env) {
        // The client checks its own state before sending: nothing reaches the server. (The server's answers to
        // such requests are checked below with the descriptor sent anyway.)
        TestClient a = env.client();
        Bucket b = env.bucket();
        CounterKey k = Key.counter("k");
        InteractiveTransaction committed = a.begin();
        b.update(committed, k.increment(1));
        committed.commitTransaction();
        InteractiveTransaction aborted = a.begin();
        aborted.abortTransaction();
        for (InteractiveTransaction tx : List.of(committed, aborted)) {
            assertThrows(AntidoteException.class, () -> b.update(tx, k.increment(1)));
            assertThrows(AntidoteException.class, () -> b.read(tx, k));
            assertThrows(AntidoteException.class, tx::commitTransaction);
            assertThrows(AntidoteException.class, tx::abortTransaction);
        }
        assertEquals(1, a.read(b, k));
    }

    @Test
    void usingACommittedTransactionsDescriptorIsAnErrorAndTheConnectionGoesOn(Env env) {
        TestClient a = env.client();
        Bucket b = env.bucket();
        CounterKey k = Key.counter("k");
        ExposedTransaction tx = a.beginExposed();
        ByteString committed = tx.descriptor();
        b.update(tx, k.increment(1));
        tx.commitTransaction();

        ExposedTransaction late = a.beginExposed();
        ByteString own = late.descriptor();
        late.adopt(committed);
        Expect.serverError(() -> b.update(late, k.increment(1)), "transaction");
        Expect.serverError(() -> b.read(late, k), "transaction");
        Expect.serverError(late::commitTransaction, "transaction");
        late.adopt(committed);
        Expect.serverError(late::abortTransaction, "transaction");
        // The connection is still in step: the late transaction's own descriptor works on it.
        late.adopt(own);
        assertEquals(1, b.read(late, k));
        b.update(late, k.increment(10));
        late.commitTransaction();
        assertEquals(11, a.read(b, k));
    }

    @Test
    void usingAnAbortedTransactionsDescriptorIsAnError(Env env) {
        TestClient a = env.client();
        Bucket b = env.bucket();
        CounterKey k = Key.counter("k");
        ExposedTransaction tx = a.beginExposed();
        ByteString aborted = tx.descriptor();
        b.update(tx, k.increment(1));
        tx.abortTransaction();

        ExposedTransaction late = a.beginExposed();
        late.adopt(aborted);
        RuntimeException update = Expect.anyError(() -> b.update(late, k.increment(1)));
        RuntimeException commit = Expect.anyError(late::commitTransaction);
        // AntidoteDB's two shapes of error are both errors; which one names the reason.
        for (RuntimeException e : List.of(update, commit)) {
            assertTrue(e instanceof AntidoteException || e.getMessage().contains("errmsg"), e.toString());
        }
        assertEquals(0, a.read(b, k));
    }

    @Test
    void garbageDescriptorIsAnError(Env env) {
        TestClient a = env.client();
        Bucket b = env.bucket();
        ExposedTransaction tx = a.beginExposed();
        tx.adopt(ByteString.copyFromUtf8("garbage descriptor"));
        Expect.serverError(() -> b.read(tx, Key.counter("k")), "transaction");
        Expect.serverError(() -> b.update(tx, Key.counter("k").increment(1)), "transaction");
        assertEquals(0, a.read(b, Key.counter("k")));
    }

    @Test
    void severalOpenTransactionsOfOneClient(Env env) {
        // Each open transaction holds one of the client's pooled connections.
        TestClient a = env.client();
        Bucket b = env.bucket();
        CounterKey k1 = Key.counter("one");
        CounterKey k2 = Key.counter("two");
        InteractiveTransaction t1 = a.begin();
        InteractiveTransaction t2 = a.begin();
        b.update(t1, k1.increment(1));
        b.update(t2, k2.increment(2));
        assertEquals(0, b.read(t1, k2));
        assertEquals(0, b.read(t2, k1));
        t1.commitTransaction();
        t2.commitTransaction();
        assertEquals(List.of(1, 2), b.readAll(a.noTx(), List.of(k1, k2)));
        assertTrue(a.sockets.opened() >= 2);
    }

    @Test
    void descriptorIsUsableFromAnotherConnection(Env env) {
        // AntidoteDB's descriptor names the transaction's coordinator, so any connection to the node may use it.
        TestClient a = env.client();
        TestClient other = env.client();
        Bucket b = env.bucket();
        CounterKey k = Key.counter("k");
        ExposedTransaction txA = a.beginExposed();
        b.update(txA, k.increment(2));
        ExposedTransaction txB = other.beginExposed();
        txB.adopt(txA.descriptor());
        assertEquals(2, b.read(txB, k));
        b.update(txB, k.increment(3));
        txA.commitTransaction();
        assertEquals(5, a.read(b, k));
    }

    @Test
    void emptyTransactionsCommit(Env env) {
        TestClient a = env.client();
        InteractiveTransaction tx = a.begin();
        CommitInfo info = tx.commitTransaction();
        Clocks.decode(info.getCommitTime());
        CommitInfo staticInfo = a.staticTx().commitTransaction(); // an ApbStaticUpdateObjects with no updates
        Clocks.decode(staticInfo.getCommitTime());
        assertEquals(1, a.counts.getStaticUpdatesCounter());
    }

    @Test
    void laterTransactionWithoutAClockSeesEarlierCommits(Env env) {
        // The Java client never sends a clock: it relies on a DC taking a snapshot that includes every commit
        // acknowledged before the transaction started, whichever connection made it.
        List<TestClient> clients = List.of(env.client(), env.client(), env.client(), env.client());
        Bucket b = env.bucket();
        CounterKey k = Key.counter("k");
        RegisterKey<String> r = Key.register("r");
        for (int i = 0; i < 12; i++) {
            TestClient writer = clients.get(i % 4);
            TestClient reader = clients.get((i + 1 + i / 4) % 4);
            if (i % 3 == 0) {
                try (InteractiveTransaction tx = writer.begin()) {
                    b.updates(tx, k.increment(1), r.assign("v" + i));
                    tx.commitTransaction();
                }
            } else {
                writer.commitStatic(b, k.increment(1), r.assign("v" + i));
            }
            if (i % 2 == 0) {
                assertEquals(List.of(i + 1, "v" + i), b.readAll(reader.noTx(), List.of(k, r)));
            } else {
                try (InteractiveTransaction tx = reader.begin()) {
                    assertEquals(List.of(i + 1, "v" + i), b.readAll(tx, List.of(k, r)));
                    tx.commitTransaction();
                }
            }
        }
    }

    @Test
    void commitTimesOfOneClientGrow(Env env) {
        TestClient a = env.client();
        Bucket b = env.bucket();
        long[] previous = null;
        for (int i = 0; i < 5; i++) {
            CommitInfo info;
            if (i % 2 == 0) {
                info = a.commitStatic(b, Key.counter("k").increment(1));
            } else {
                try (InteractiveTransaction tx = a.begin()) {
                    b.update(tx, Key.counter("k").increment(1));
                    info = tx.commitTransaction();
                }
            }
            long[] now = Clocks.decode(info.getCommitTime());
            if (previous != null) {
                assertTrue(Clocks.atLeast(now, previous), "commit times go forward");
                assertFalse(java.util.Arrays.equals(previous, now), "two commits, two commit times");
            }
            previous = now;
        }
    }

    @Test
    void idleTransactionIsAbortedAfterTheIdleTimeout(Env env) {
        // Abandoned transactions must not hold resources forever. The server answers the late requests with
        // AntidoteDB's typed failure, error code 3 (aborted); the client throws AntidoteException naming it.
        CausetServer srv = env.startServer("--tx-idle-timeout-ms", "300");
        TestClient a = env.client(srv);
        Bucket b = env.bucket();
        CounterKey k = Key.counter("k");
        InteractiveTransaction tx = a.begin();
        b.update(tx, k.increment(1));
        CausetServer.sleep(1000);
        Expect.typedFailure(() -> b.update(tx, k.increment(1)), 3);
        Expect.typedFailure(tx::commitTransaction, 3);
        assertEquals(0, a.read(b, k));
        // A transaction that keeps working is not affected.
        try (InteractiveTransaction busy = a.begin()) {
            for (int i = 0; i < 4; i++) {
                CausetServer.sleep(150);
                b.update(busy, k.increment(1));
            }
            busy.commitTransaction();
        }
        assertEquals(4, a.read(b, k));
        // The client's close() of a transaction the server already aborted sends ApbAbortTransaction; the client
        // reads the reply without looking at its success flag, so only an ApbErrorResp would throw here.
        InteractiveTransaction late = a.begin();
        b.update(late, k.increment(1));
        CausetServer.sleep(1000);
        late.close();
        assertEquals(4, a.read(b, k));
    }

    @Test
    void transactionOfAClosedConnectionIsAbortedAndInvisible(Env env) {
        TestClient a = env.client();
        TestClient other = env.client();
        Bucket b = env.bucket();
        CounterKey k = Key.counter("k");
        InteractiveTransaction tx = a.begin();
        b.update(tx, k.increment(5));
        a.close(); // the client's sockets close under the open transaction
        other.update(b, k.increment(1));
        assertEquals(1, other.read(b, k));
        assertThrows(AntidoteException.class, tx::commitTransaction, "the client reports the closed connection");
        assertEquals(1, other.read(b, k));
    }

    @Test
    void certifiedTransactionsAbortOnConcurrentWriteConflicts(Env env) {
        // With --certify-writes (AntidoteDB's txn_cert) the second of two concurrent writers of one object aborts:
        // ApbCommitResp success = false, error code 3, which the client throws as AntidoteException.
        CausetServer srv = env.startServer("--certify-writes");
        TestClient a = env.client(srv);
        TestClient c2 = env.client(srv);
        Bucket b = env.bucket();
        CounterKey k = Key.counter("k");
        CounterKey other = Key.counter("other");
        InteractiveTransaction t1 = a.begin();
        InteractiveTransaction t2 = c2.begin();
        b.update(t1, k.increment(1));
        b.updates(t2, k.increment(10), other.increment(10));
        t1.commitTransaction();
        Expect.typedFailure(t2::commitTransaction, 3);
        // A quirk of the client (not of the server): after a failed commit its close() tries to abort with the
        // descriptor it already cleared. In try-with-resources this NullPointerException is only suppressed.
        assertThrows(NullPointerException.class, t2::close);
        assertEquals(List.of(1, 0), b.readAll(a.noTx(), List.of(k, other)), "the aborted transaction left nothing");
        // Concurrent writers of different objects both commit.
        InteractiveTransaction t3 = a.begin();
        InteractiveTransaction t4 = c2.begin();
        b.update(t3, k.increment(1));
        b.update(t4, other.increment(1));
        t3.commitTransaction();
        t4.commitTransaction();
        assertEquals(List.of(2, 1), b.readAll(a.noTx(), List.of(k, other)));
        // A static update is its own transaction, certified too, and not in conflict with anything here.
        a.update(b, k.increment(1));
        assertEquals(3, a.read(b, k));
    }
}
