package causet.conformance;

import eu.antidotedb.client.AntidoteException;
import eu.antidotedb.client.Bucket;
import eu.antidotedb.client.InteractiveTransaction;
import eu.antidotedb.client.Key;
import org.junit.jupiter.api.Test;

import java.util.regex.Matcher;
import java.util.regex.Pattern;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The server as an operator running it for Java clients sees it: the admin port follows the client's work, and a
 * restart (SIGTERM, or SIGKILL) keeps what was committed while clients see errors, not hangs, in between.
 */
@WithCauset
class LifecycleTest {

    static double metric(String text, String name) {
        Matcher m = Pattern.compile("^" + Pattern.quote(name) + "(?:\\{\\})? (\\S+)$", Pattern.MULTILINE).matcher(text);
        assertTrue(m.find(), () -> name + " missing from /metrics");
        return Double.parseDouble(m.group(1));
    }

    @Test
    void healthStatusAndMetricsFollowTheClientsWork(Env env) throws Exception {
        CausetServer srv = env.server();
        assertEquals("ok", srv.httpGet("/health").trim());
        String status = srv.httpGet("/status");
        assertTrue(status.trim().startsWith("{") && status.contains("\"dcs\":1"), status);
        double before = metric(srv.httpGet("/metrics"), "causet_transactions_committed_total");
        TestClient c = env.client();
        Bucket b = env.bucket();
        for (int i = 0; i < 3; i++) {
            c.update(b, Key.counter("k").increment(1));
        }
        try (InteractiveTransaction tx = c.begin()) {
            b.update(tx, Key.counter("k").increment(1));
            tx.commitTransaction();
        }
        double after = metric(srv.httpGet("/metrics"), "causet_transactions_committed_total");
        assertTrue(after >= before + 4, before + " -> " + after);
    }

    @Test
    void sigtermWithOpenWorkExitsCleanlyAndKeepsCommits(Env env) {
        CausetServer srv = env.startServer();
        TestClient c = env.client(srv);
        Bucket b = env.bucket();
        c.update(b, Key.counter("k").increment(5));
        InteractiveTransaction open = c.begin();
        b.update(open, Key.counter("k").increment(100));
        assertEquals(0, srv.stop(), "SIGTERM: exit status 0");
        assertThrows(AntidoteException.class, () -> c.read(b, Key.counter("k")));

        CausetServer again = env.startServer(srv.dataDir(), srv.logFile());
        TestClient fresh = env.client(again);
        assertEquals(5, fresh.read(b, Key.counter("k")), "the commit survived, the open transaction did not");
        fresh.update(b, Key.counter("k").increment(1));
        assertEquals(6, fresh.read(b, Key.counter("k")));
    }

    @Test
    void recoveryAfterSigkill(Env env) throws Exception {
        CausetServer srv = env.startServer();
        TestClient c = env.client(srv);
        Bucket b = env.bucket();
        for (int i = 0; i < 10; i++) {
            c.update(b, Key.counter("k").increment(1), Key.set("s").add("e" + i));
        }
        ProcessHandle.of(srv.pid()).ifPresent(ProcessHandle::destroyForcibly);
        srv.stop();
        CausetServer again = env.startServer(srv.dataDir(), srv.logFile());
        TestClient fresh = env.client(again);
        assertEquals(10, fresh.read(b, Key.counter("k")), "every acknowledged commit (sync = always) survived");
        assertEquals(10, fresh.read(b, Key.set("s")).size());
        assertNotNull(again.httpGet("/status"));
    }
}
