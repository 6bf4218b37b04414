package eu.antidotedb.client;

import com.google.protobuf.ByteString;
import eu.antidotedb.antidotepb.AntidotePB;
import eu.antidotedb.client.transformer.Transformer;
import eu.antidotedb.client.transformer.TransformerFactory;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.Socket;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;

/**
 * The only place where the suite reaches into the client's package-private API, for three things the published
 * client (0.1.0) has no public way to do and a test suite needs:
 * <ul>
 *   <li>a read timeout on the client's sockets (the client blocks forever on a reply that never comes, and a test
 *   must fail instead of hanging);</li>
 *   <li>closing a client's connections (the client has no close(); its pooled sockets would stay open until the JVM
 *   exits);</li>
 *   <li>an operation of one type on an object of another type (the client's typed keys cannot build one), to check
 *   the server's refusal.</li>
 * </ul>
 * None of it changes what the client puts on the wire for the requests it builds itself.
 */
public final class ClientAccess {
    private ClientAccess() {
    }

    /**
     * A transformer factory that sees every connection the client opens: it sets the socket's read timeout and
     * remembers the connection so that {@link #closeAll()} can close it. It does not alter requests or replies.
     */
    public static final class Sockets implements TransformerFactory {
        private final int readTimeoutMillis;
        private final List<Connection> connections = new CopyOnWriteArrayList<>();

        public Sockets(int readTimeoutMillis) {
            this.readTimeoutMillis = readTimeoutMillis;
        }

        @Override
        public Transformer newTransformer(Transformer downstream, Connection connection) {
            try {
                connection.getSocket().setSoTimeout(readTimeoutMillis);
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
            connections.add(connection);
            return downstream;
        }

        /** Connections the client has opened so far (open or closed). */
        public int opened() {
            return connections.size();
        }

        /** Closes every socket the client has opened. */
        public void closeAll() {
            for (Connection c : connections) {
                c.discard();
            }
        }

        /** The local ports of the client's sockets still open. */
        public List<Integer> openLocalPorts() {
            return connections.stream().map(Connection::getSocket).filter(s -> !s.isClosed())
                    .map(Socket::getLocalPort).toList();
        }
    }

    /**
     * An update operation on {@code key}'s object (its bucket, key and type) carrying {@code operation}, whatever
     * the object's type: a way to send an operation that does not fit the type.
     */
    public static UpdateOp rawOperation(Key<?> key, AntidotePB.ApbUpdateOperation.Builder operation) {
        return new UpdateOpDefaultImpl(key, operation);
    }

    /** A counter increment on any key (the client only builds it on counter keys). */
    public static UpdateOp incrementOn(Key<?> key, long amount) {
        return rawOperation(key, AntidotePB.ApbUpdateOperation.newBuilder()
                .setCounterop(AntidotePB.ApbCounterUpdate.newBuilder().setInc(amount)));
    }

    /** A register assignment on any key (the client only builds it on register keys). */
    public static UpdateOp assignOn(Key<?> key, ByteString value) {
        return rawOperation(key, AntidotePB.ApbUpdateOperation.newBuilder()
                .setRegop(AntidotePB.ApbRegUpdate.newBuilder().setValue(value)));
    }

    /** A set add on any key (the client only builds it on set keys). */
    public static UpdateOp addOn(Key<?> key, ByteString element) {
        return rawOperation(key, AntidotePB.ApbUpdateOperation.newBuilder()
                .setSetop(AntidotePB.ApbSetUpdate.newBuilder()
                        .setOptype(AntidotePB.ApbSetUpdate.SetOpType.ADD).addAdds(element)));
    }
}
