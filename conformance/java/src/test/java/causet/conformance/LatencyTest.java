package causet.conformance;

import eu.antidotedb.client.Bucket;
import eu.antidotedb.client.InteractiveTransaction;
import eu.antidotedb.client.Key;
import org.junit.jupiter.api.Test;

import java.util.Arrays;

import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Requests of the Java client are not delayed by TCP acknowledgement timing. The client writes each request's
 * header and message through one BufferedOutputStream flush (one write for small requests) on a socket with Nagle's
 * algorithm on; a server that delayed its ACKs or its replies would show as ~40 ms per request.
 */
@WithCauset
class LatencyTest {

    interface Action {
        void run();
    }

    static double medianMillis(Action action) {
        double[] samples = new double[15];
        for (int i = 0; i < samples.length; i++) {
            long t0 = System.nanoTime();
            action.run();
            samples[i] = (System.nanoTime() - t0) / 1e6;
        }
        Arrays.sort(samples);
        return samples[samples.length / 2];
    }

    @Test
    void requestsOfTheJavaClientAreNotDelayed(Env env) {
        TestClient c = env.client();
        Bucket b = env.bucket();
        var k = Key.counter("k");
        c.update(b, k.increment(1)); // warm up the connection and the JIT
        for (int i = 0; i < 20; i++) {
            c.read(b, k);
        }
        double read = medianMillis(() -> c.read(b, k));
        double update = medianMillis(() -> c.update(b, k.increment(1)));
        double interactive = medianMillis(() -> {
            try (InteractiveTransaction tx = c.begin()) {
                b.read(tx, k);
                b.update(tx, k.increment(1));
                tx.commitTransaction();
            }
        });
        assertTrue(read < 20, "static read median " + read + " ms");
        assertTrue(update < 20, "static update median " + update + " ms");
        assertTrue(interactive < 60, "interactive transaction (4 requests) median " + interactive + " ms");
    }
}
