package causet.examples;

import eu.antidotedb.client.AntidoteClient;
import eu.antidotedb.client.BatchRead;
import eu.antidotedb.client.BatchReadResult;
import eu.antidotedb.client.Bucket;
import eu.antidotedb.client.CommitInfo;
import eu.antidotedb.client.CounterKey;
import eu.antidotedb.client.InteractiveTransaction;
import eu.antidotedb.client.Key;
import eu.antidotedb.client.SetKey;

import java.net.InetSocketAddress;
import java.util.HexFormat;
import java.util.List;
import java.util.TreeSet;

/** A first transaction against Causet with AntidoteDB's Java client (antidote-java-client 0.1.0). */
public final class FirstTransaction {
    public static void main(String[] args) {
        String host = args.length > 0 ? args[0] : "127.0.0.1";
        int port = args.length > 1 ? Integer.parseInt(args[1]) : 8087; // where `causet start` listens

        // An object is named by bucket, key and CRDT type (the key's type: a counter, an add-wins set of strings).
        Bucket shop = Bucket.bucket("shop");
        CounterKey visits = Key.counter("visits");
        SetKey<String> tags = Key.set("tags");
        List<String> added = List.of("new", "sale");

        AntidoteClient client = new AntidoteClient(new InetSocketAddress(host, port));

        // One interactive transaction: both updates become visible together at commit, or not at all.
        CommitInfo commit;
        try (InteractiveTransaction tx = client.startTransaction()) {
            shop.update(tx, visits.increment(1));
            shop.update(tx, tags.addAll(added));
            commit = tx.commitTransaction();
        }

        // Read both back in a new transaction, in one request (a batch read). This client cannot start a
        // transaction at a clock (commit.getCommitTime()), but a new transaction at the same server sees every
        // commit acknowledged before it started.
        BatchRead batch = client.newBatchRead();
        BatchReadResult<Integer> count = shop.read(batch, visits);
        BatchReadResult<List<String>> members = shop.read(batch, tags);
        try (InteractiveTransaction tx = client.startTransaction()) {
            batch.commit(tx);
            tx.commitTransaction();
        }

        TreeSet<String> read = new TreeSet<>(members.get());
        System.out.printf("java: visits = %d, tags = %s (commit clock %s)%n",
                count.get(), read, HexFormat.of().formatHex(commit.getCommitTime().toByteArray()));

        // The program may run again against the same server: the counter only grows, the set keeps its elements.
        if (count.get() < 1 || !read.containsAll(added)) {
            System.err.println("FirstTransaction: expected visits >= 1 and tags containing " + added);
            System.exit(1);
        }
    }
}
