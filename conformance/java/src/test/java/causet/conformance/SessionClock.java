package causet.conformance;

import com.google.protobuf.ByteString;
import eu.antidotedb.antidotepb.AntidotePB;
import eu.antidotedb.client.Connection;
import eu.antidotedb.client.messages.AntidoteResponse;
import eu.antidotedb.client.transformer.Transformer;
import eu.antidotedb.client.transformer.TransformerFactory;
import eu.antidotedb.client.transformer.TransformerWithDownstream;

import java.util.concurrent.atomic.AtomicReference;

/**
 * Clocks for the Java client, through its public transformer API.
 *
 * <p>antidote-java-client 0.1.0 returns commit times ({@code CommitInfo.getCommitTime()}) but has no way to start a
 * transaction at one: its package documentation says of session guarantees "TODO this is not yet implemented on
 * the client", and every transaction it starts has no {@code timestamp}. The client does let an application stack
 * {@link TransformerFactory transformers} on its connections (the constructor
 * {@code AntidoteClient(List<TransformerFactory>, InetSocketAddress...)}); this one
 * <ul>
 *   <li>puts {@link #setMinSnapshot the chosen clock} into the {@code timestamp} of every transaction the client
 *   starts (interactive {@code ApbStartTransaction}, and the {@code transaction} of static reads and updates), and
 *   </li>
 *   <li>records the commit time of every reply that carries one ({@code ApbCommitResp} of a commit or static update,
 *   {@code committime} of a static read), which the client itself drops for {@code NoTransaction} updates and
 *   reads.</li>
 * </ul>
 * Without a chosen clock, requests go out exactly as the client builds them.
 */
public final class SessionClock implements TransformerFactory {
    private final AtomicReference<ByteString> minSnapshot = new AtomicReference<>();
    private final AtomicReference<ByteString> lastCommitTime = new AtomicReference<>();
    private final AtomicReference<ByteString> lastStartTimestampSent = new AtomicReference<>();

    /** The clock the following transactions start at (sent as their timestamp); null: none, as the client does. */
    public void setMinSnapshot(ByteString clock) {
        minSnapshot.set(clock);
    }

    public ByteString minSnapshot() {
        return minSnapshot.get();
    }

    /** The commit time (or static read snapshot) of the last reply that carried one; null before any. */
    public ByteString lastCommitTime() {
        return lastCommitTime.get();
    }

    /** The timestamp of the last transaction start this client sent, or null if it sent none. */
    public ByteString lastStartTimestampSent() {
        return lastStartTimestampSent.get();
    }

    private AntidotePB.ApbStartTransaction withClock(AntidotePB.ApbStartTransaction start) {
        ByteString clock = minSnapshot.get();
        if (clock == null) {
            lastStartTimestampSent.set(start.hasTimestamp() ? start.getTimestamp() : null);
            return start;
        }
        lastStartTimestampSent.set(clock);
        return start.toBuilder().setTimestamp(clock).build();
    }

    private AntidoteResponse record(AntidoteResponse response) {
        if (response == null) {
            return null;
        }
        response.accept(new AntidoteResponse.Handler<Void>() {
            @Override
            public Void handle(AntidotePB.ApbErrorResp op) {
                return null;
            }

            @Override
            public Void handle(AntidotePB.ApbOperationResp op) {
                return null;
            }

            @Override
            public Void handle(AntidotePB.ApbStartTransactionResp op) {
                return null;
            }

            @Override
            public Void handle(AntidotePB.ApbReadObjectsResp op) {
                return null;
            }

            @Override
            public Void handle(AntidotePB.ApbCommitResp op) {
                if (op.getSuccess() && op.hasCommitTime()) {
                    lastCommitTime.set(op.getCommitTime());
                }
                return null;
            }

            @Override
            public Void handle(AntidotePB.ApbStaticReadObjectsResp op) {
                return handle(op.getCommittime());
            }
        });
        return response;
    }

    @Override
    public Transformer newTransformer(Transformer downstream, Connection connection) {
        return new TransformerWithDownstream(downstream) {
            @Override
            public AntidoteResponse handle(AntidotePB.ApbStartTransaction op) {
                return record(super.handle(withClock(op)));
            }

            @Override
            public AntidoteResponse handle(AntidotePB.ApbStaticReadObjects op) {
                return record(super.handle(op.toBuilder().setTransaction(withClock(op.getTransaction())).build()));
            }

            @Override
            public AntidoteResponse handle(AntidotePB.ApbStaticUpdateObjects op) {
                return record(super.handle(op.toBuilder().setTransaction(withClock(op.getTransaction())).build()));
            }

            @Override
            public AntidoteResponse handle(AntidotePB.ApbCommitTransaction op) {
                return record(super.handle(op));
            }
        };
    }
}
