package causet.conformance;

import eu.antidotedb.client.AntidoteClient;
import eu.antidotedb.client.AntidoteStaticTransaction;
import eu.antidotedb.client.BatchRead;
import eu.antidotedb.client.Bucket;
import eu.antidotedb.client.ClientAccess;
import eu.antidotedb.client.CommitInfo;
import eu.antidotedb.client.InteractiveTransaction;
import eu.antidotedb.client.Key;
import eu.antidotedb.client.NoTransaction;
import eu.antidotedb.client.UpdateOp;
import eu.antidotedb.client.transformer.CountingTransformer;

import java.net.InetSocketAddress;
import java.util.List;

/**
 * One {@link AntidoteClient} of the published Java client, connected to a server, with
 * <ul>
 *   <li>a {@link SessionClock} (start transactions at a given clock, see what commit times came back),</li>
 *   <li>the client's own {@link CountingTransformer} (how many requests of each kind were sent), and</li>
 *   <li>a 30 s read timeout on its sockets and a {@link #close()} that closes them.</li>
 * </ul>
 * The helpers below are the client's own calls, named for brevity; nothing is sent differently.
 *
 * <p>Two traits of the client to keep in mind: each AntidoteClient opens one connection at once and more as
 * concurrent requests need them (up to 50), and its pool's health-check thread takes a pooled connection for a
 * moment right after the client starts (and every 3 minutes), setting that socket's timeout back to "none" — so a
 * request at that moment may open a second connection, and the JUnit timeouts (junit-platform.properties) remain
 * the bound that always holds. Tests that must stay on one connection use an interactive transaction, which keeps
 * its connection from start to commit.
 */
public final class TestClient implements AutoCloseable {
    static final int READ_TIMEOUT_MILLIS = 30_000;

    public final AntidoteClient antidote;
    public final SessionClock clock = new SessionClock();
    public final CountingTransformer counts = new CountingTransformer();
    public final ClientAccess.Sockets sockets = new ClientAccess.Sockets(READ_TIMEOUT_MILLIS);

    public TestClient(InetSocketAddress address) {
        // The last transformer is applied first: the clock rewrites a request before it is counted and sent.
        antidote = new AntidoteClient(List.of(sockets, counts, clock), address);
    }

    public NoTransaction noTx() {
        return antidote.noTransaction();
    }

    public InteractiveTransaction begin() {
        return antidote.startTransaction();
    }

    public ExposedTransaction beginExposed() {
        return new ExposedTransaction(antidote);
    }

    public AntidoteStaticTransaction staticTx() {
        return antidote.createStaticTransaction();
    }

    public BatchRead batch() {
        return antidote.newBatchRead();
    }

    /** A read without a transaction (one ApbStaticReadObjects). */
    public <T> T read(Bucket bucket, Key<T> key) {
        return bucket.read(antidote.noTransaction(), key);
    }

    /** Updates without a transaction (one ApbStaticUpdateObjects). */
    public void update(Bucket bucket, UpdateOp... ops) {
        bucket.updates(antidote.noTransaction(), ops);
    }

    /** Updates in one static transaction; its commit info. */
    public CommitInfo commitStatic(Bucket bucket, UpdateOp... ops) {
        AntidoteStaticTransaction tx = antidote.createStaticTransaction();
        bucket.updates(tx, ops);
        return tx.commitTransaction();
    }

    @Override
    public void close() {
        sockets.closeAll();
    }
}
