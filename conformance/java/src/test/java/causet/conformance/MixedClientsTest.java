package causet.conformance;

import eu.antidotedb.antidotepb.AntidotePB;
import eu.antidotedb.client.AntidoteException;
import eu.antidotedb.client.Bucket;
import eu.antidotedb.client.InteractiveTransaction;
import eu.antidotedb.client.Key;
import eu.antidotedb.client.MapKey;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import java.util.List;
import java.util.Set;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * What the Java client (0.1.0, an older version of AntidoteDB's protocol) makes of data that clients of the current
 * protocol store: flags and bounded counters inside a map it reads. These are limits of the client, the same against
 * AntidoteDB; the tests pin them so that they are known (and noticed if the client changes), and check that the
 * server and the connection go on.
 */
@WithCauset
class MixedClientsTest {

    private static void store(Env env, String map, List<AntidotePB.ApbMapNestedUpdate> entries) throws Exception {
        try (RawWire raw = new RawWire(env.server().address())) {
            RawWire.Reply reply = raw.request(RawWire.STATIC_UPDATE_OBJECTS,
                    RawWire.rrMapUpdate(env.bucketName(), map, entries));
            assertEquals(RawWire.COMMIT_RESP, reply.code(), "the newer client's update commits");
            assertTrue(AntidotePB.ApbCommitResp.parseFrom(reply.body()).getSuccess());
        }
    }

    @Test
    void mapEntriesOfTheClientsOwnTypesWrittenRawReadNormally(Env env) throws Exception {
        // The control: the raw helper writes what the client reads.
        store(env, "m", List.of(RawWire.entry(
                AntidotePB.ApbMapKey.newBuilder().setKey(com.google.protobuf.ByteString.copyFromUtf8("n"))
                        .setType(AntidotePB.CRDT_type.FATCOUNTER).build(),
                RawWire.counterOp(3))));
        TestClient c = env.client();
        MapKey.MapReadResult m = c.read(env.bucket(), Key.map_rr("m"));
        assertEquals(Set.of(Key.fatCounter("n")), m.keySet());
        assertEquals(3, m.get(Key.fatCounter("n")));
    }

    @Test
    void mapWithAFlagEwEntryIsUnreadableForTheClient(Env env) throws Exception {
        // FLAG_EW is 13, which the client's enum calls POLICY; its map decoder refuses POLICY keys.
        store(env, "m", List.of(
                RawWire.entry(RawWire.mapKey("flag", RawWire.FLAG_EW), RawWire.flagOp(true)),
                RawWire.entry(RawWire.mapKey("n", AntidotePB.CRDT_type.FATCOUNTER_VALUE), RawWire.counterOp(1))));
        TestClient c = env.client();
        Bucket b = env.bucket();
        RuntimeException e = assertThrows(RuntimeException.class, () -> c.read(b, Key.map_rr("m")));
        assertTrue(String.valueOf(e.getMessage()).contains("policy CRDT not yet supported"), e.toString());
        // In a transaction too; its connection is in step afterwards.
        try (InteractiveTransaction tx = c.begin()) {
            assertThrows(RuntimeException.class, () -> b.read(tx, Key.map_rr("m")));
            b.update(tx, Key.counter("k").increment(1));
            assertEquals(1, b.read(tx, Key.counter("k")));
            tx.commitTransaction();
        }
        assertEquals(1, c.read(b, Key.counter("k")));
    }

    @ParameterizedTest
    @ValueSource(ints = {RawWire.FLAG_DW, RawWire.BCOUNTER})
    void mapWithAFlagDwOrBoundedCounterEntryIsUnparseableForTheClient(int type, Env env) throws Exception {
        // 14 and 15 are not in the client's enum: in proto2 an unknown value of the required ApbMapKey.type leaves
        // the field unset, so the whole reply fails to parse (InvalidProtocolBufferException, an IOException that
        // the client wraps in an AntidoteException).
        AntidotePB.ApbUpdateOperation op = type == RawWire.BCOUNTER ? RawWire.counterOp(5) : RawWire.flagOp(true);
        store(env, "m", List.of(RawWire.entry(RawWire.mapKey("x", type), op)));
        TestClient c = env.client();
        Bucket b = env.bucket();
        AntidoteException e = assertThrows(AntidoteException.class, () -> c.read(b, Key.map_rr("m")));
        assertInstanceOf(com.google.protobuf.InvalidProtocolBufferException.class, e.getCause(), e.toString());
        // The reply was read whole before it was parsed: a transaction's connection is in step afterwards.
        try (InteractiveTransaction tx = c.begin()) {
            assertThrows(AntidoteException.class, () -> b.read(tx, Key.map_rr("m")));
            b.update(tx, Key.counter("k").increment(1));
            assertEquals(1, b.read(tx, Key.counter("k")));
            tx.commitTransaction();
        }
        assertEquals(1, c.read(b, Key.counter("k")));
    }
}
