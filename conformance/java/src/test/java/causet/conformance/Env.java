package causet.conformance;

import eu.antidotedb.client.Bucket;
import org.junit.jupiter.api.extension.ExtensionContext;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CopyOnWriteArrayList;

/**
 * What one test works with: buckets no other test uses, clients of the class's server (closed when the test ends),
 * and extra servers (stopped when the test ends).
 */
public final class Env implements ExtensionContext.Store.CloseableResource {
    private final CausetServer server;
    private final String testName;
    private final String id = UUID.randomUUID().toString().replace("-", "").substring(0, 12);
    private final List<TestClient> clients = new CopyOnWriteArrayList<>();
    private final List<CausetServer> extraServers = new CopyOnWriteArrayList<>();

    Env(CausetServer server, String testName) {
        this.server = server;
        this.testName = testName;
    }

    /** The class's server. */
    public CausetServer server() {
        return server;
    }

    /** The test's own bucket. */
    public Bucket bucket() {
        return Bucket.bucket(bucketName());
    }

    /** The test's own bucket's name: the test method's name and a random suffix. */
    public String bucketName() {
        String name = testName.length() > 40 ? testName.substring(0, 40) : testName;
        return name + "-" + id;
    }

    /** Another bucket of the test's own. */
    public Bucket bucket(String suffix) {
        return Bucket.bucket(bucketName() + "-" + suffix);
    }

    /** A new client of the class's server. */
    public TestClient client() {
        return client(server);
    }

    /** A new client of the given server. */
    public TestClient client(CausetServer s) {
        TestClient c = new TestClient(s.address());
        clients.add(c);
        return c;
    }

    /** A server of the test's own with a fresh data directory. */
    public CausetServer startServer(String... args) {
        CausetServer s = CausetServer.start(testName, List.of(args));
        extraServers.add(s);
        return s;
    }

    /** A server of the test's own on the given data directory (e.g. a stopped server's, to restart it). */
    public CausetServer startServer(Path dataDir, Path logFile, String... args) {
        CausetServer s = CausetServer.start(dataDir, logFile, List.of(args));
        extraServers.add(s);
        return s;
    }

    /** The class's server and the test's own, for failure reports. */
    List<CausetServer> servers() {
        List<CausetServer> all = new ArrayList<>();
        all.add(server);
        all.addAll(extraServers);
        return all;
    }

    @Override
    public void close() {
        for (TestClient c : clients) {
            c.close();
        }
        for (CausetServer s : extraServers) {
            s.stop();
        }
    }
}
