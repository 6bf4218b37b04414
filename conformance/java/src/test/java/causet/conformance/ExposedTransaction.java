package causet.conformance;

import com.google.protobuf.ByteString;
import eu.antidotedb.client.AntidoteClient;
import eu.antidotedb.client.InteractiveTransaction;

/**
 * The client's {@link InteractiveTransaction}, with its transaction descriptor visible and replaceable through the
 * protected members the class offers to subclasses. The client only ever sends its own transaction's descriptor and
 * refuses to send anything once the transaction is committed or aborted (it checks its own state first); with
 * this, a test can send a request under another transaction's descriptor, for example one that has already
 * committed, to see what the server answers.
 */
public final class ExposedTransaction extends InteractiveTransaction {
    public ExposedTransaction(AntidoteClient client) {
        super(client);
    }

    /** The descriptor the server returned for this transaction (null once committed). */
    public ByteString descriptor() {
        return getDescriptor();
    }

    /** Sends this object's later requests (reads, updates, commit, abort) under {@code other} instead. */
    public void adopt(ByteString other) {
        descriptor = other;
        transactionStatus = TransactionStatus.STARTED;
    }
}
