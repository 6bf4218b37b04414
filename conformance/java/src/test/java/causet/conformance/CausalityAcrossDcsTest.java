package causet.conformance;

import com.google.protobuf.ByteString;
import eu.antidotedb.client.Bucket;
import eu.antidotedb.client.CommitInfo;
import eu.antidotedb.client.CounterKey;
import eu.antidotedb.client.InteractiveTransaction;
import eu.antidotedb.client.Key;
import eu.antidotedb.client.RegisterKey;
import org.junit.jupiter.api.Test;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Clocks where they matter: two DCs (two servers on loopback, each the other's peer) with an emulated one-way
 * replication delay of {@value #DELAY_MS} ms. A write acknowledged by DC 0 reaches DC 1 only after the delay; a
 * client of DC 1 given the write's commit time must see it at once (its transaction waits for the write), and
 * one without it does not yet.
 */
@WithCauset
class CausalityAcrossDcsTest {
    static final int DELAY_MS = 400;

    /** Starts DC 0 and DC 1 of a two-DC cluster; both stop when the test ends. */
    static CausetServer[] startTwoDcs(Env env) {
        int[] repl = {CausetServer.freePort(), CausetServer.freePort()};
        Path dir = CausetServer.newWorkDir("two-dcs");
        CausetServer[] dcs = new CausetServer[2];
        for (int dc = 0; dc < 2; dc++) {
            int peer = 1 - dc;
            Path config = dir.resolve("dc" + dc + ".toml");
            String toml = "dc = " + dc + "\n"
                    + "dcs = 2\n"
                    + "replication_bind = \"127.0.0.1:" + repl[dc] + "\"\n"
                    + "[[peers]]\n"
                    + "dc = " + peer + "\n"
                    + "addr = \"127.0.0.1:" + repl[peer] + "\"\n"
                    + "delay_ms = " + DELAY_MS + "\n";
            try {
                Files.writeString(config, toml);
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
            dcs[dc] = env.startServer(dir.resolve("data" + dc), dir.resolve("dc" + dc + ".log"),
                    "--config", config.toString());
        }
        return dcs;
    }

    @Test
    void commitTimeFromOneDcMakesTheWriteVisibleAtTheOther(Env env) {
        CausetServer[] dcs = startTwoDcs(env);
        TestClient atDc0 = env.client(dcs[0]);
        TestClient atDc1 = env.client(dcs[1]);
        Bucket b = env.bucket();
        RegisterKey<String> r = Key.register("r");
        RegisterKey<String> control = Key.register("control");
        // Warm up both links (and the clients' connections) so that the DCs' stable snapshots move.
        atDc0.update(b, Key.counter("warm").increment(1));
        atDc1.update(b, Key.counter("warm").increment(1));

        // Without a clock, DC 1 does not see a write DC 0 just acknowledged (it is still in flight).
        atDc0.update(b, control.assign("v"));
        long start = System.nanoTime();
        String early = atDc1.read(b, control);
        long elapsedMs = (System.nanoTime() - start) / 1_000_000;
        if (elapsedMs < DELAY_MS / 2) {
            assertEquals("", early, "a write in flight for " + DELAY_MS + " ms was visible after " + elapsedMs + " ms");
        }

        // With the commit time, an interactive transaction at DC 1 sees it.
        CommitInfo info;
        try (InteractiveTransaction tx = atDc0.begin()) {
            b.update(tx, r.assign("from-dc0"));
            info = tx.commitTransaction();
        }
        atDc1.clock.setMinSnapshot(info.getCommitTime());
        try (ExposedTransaction tx = atDc1.beginExposed()) {
            assertTrue(Clocks.atLeast(Clocks.descriptorSnapshot(tx.descriptor()), Clocks.decode(info.getCommitTime())));
            assertEquals("from-dc0", b.read(tx, r));
            tx.commitTransaction();
        }
    }

    @Test
    void staticUpdateCommitTimeForAStaticReadAtTheOtherDc(Env env) {
        CausetServer[] dcs = startTwoDcs(env);
        TestClient atDc0 = env.client(dcs[0]);
        TestClient atDc1 = env.client(dcs[1]);
        Bucket b = env.bucket();
        CounterKey k = Key.counter("k");
        // A NoTransaction update: the client drops its commit time; the session clock has it.
        atDc0.update(b, k.increment(5));
        ByteString t = atDc0.clock.lastCommitTime();
        atDc1.clock.setMinSnapshot(t);
        assertEquals(5, atDc1.read(b, k));
        assertTrue(Clocks.atLeast(Clocks.decode(atDc1.clock.lastCommitTime()), Clocks.decode(t)));
    }

    @Test
    void causalChainThereAndBack(Env env) {
        // DC 0 writes x; DC 1, at x's commit time, reads x and writes y; DC 0, at y's commit time, sees both,
        // including y, which is still in flight from DC 1 when DC 0 is asked.
        CausetServer[] dcs = startTwoDcs(env);
        TestClient atDc0 = env.client(dcs[0]);
        TestClient atDc1 = env.client(dcs[1]);
        TestClient thirdAtDc0 = env.client(dcs[0]);
        Bucket b = env.bucket();
        CounterKey x = Key.counter("x");
        CounterKey y = Key.counter("y");
        CommitInfo first = atDc0.commitStatic(b, x.increment(1));
        atDc1.clock.setMinSnapshot(first.getCommitTime());
        CommitInfo second;
        try (InteractiveTransaction tx = atDc1.begin()) {
            assertEquals(1, b.read(tx, x));
            b.update(tx, y.increment(1));
            second = tx.commitTransaction();
        }
        thirdAtDc0.clock.setMinSnapshot(second.getCommitTime());
        assertEquals(List.of(1, 1), b.readAll(thirdAtDc0.noTx(), List.of(x, y)));
        // Without a clock, eventually too (replication goes on by itself).
        TestClient plain = env.client(dcs[0]);
        long deadline = System.nanoTime() + 20_000_000_000L;
        while (!List.of(1, 1).equals(b.readAll(plain.noTx(), List.of(x, y)))) {
            assertTrue(System.nanoTime() < deadline, "DC 0 never saw DC 1's write");
            CausetServer.sleep(50);
        }
    }
}
