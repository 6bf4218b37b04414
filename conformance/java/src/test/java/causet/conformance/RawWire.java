package causet.conformance;

import com.google.protobuf.ByteString;
import com.google.protobuf.MessageLite;
import com.google.protobuf.UnknownFieldSet;
import eu.antidotedb.antidotepb.AntidotePB;

import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.Socket;

/**
 * Raw frames of AntidoteDB's protocol ({@code u32 length, u8 code, message}), for requests the Java client cannot
 * build: writes of types its protocol version does not have (flags, bounded counters), as a newer client would
 * send them. Messages are built with the client's generated classes; fields its .proto file lacks go in as
 * protobuf unknown fields, byte for byte what AntidoteDB's current .proto encodes.
 */
final class RawWire implements AutoCloseable {
    static final int STATIC_UPDATE_OBJECTS = 122;
    static final int COMMIT_RESP = 127;
    static final int ERROR_RESP = 0;

    // AntidoteDB's current CRDT_type numbers the client's enum lacks or names otherwise.
    static final int FLAG_EW = 13; // POLICY in the client's enum
    static final int FLAG_DW = 14;
    static final int BCOUNTER = 15;

    private final Socket socket;
    private final DataInputStream in;
    private final DataOutputStream out;

    RawWire(InetSocketAddress address) throws IOException {
        socket = new Socket();
        socket.connect(address, 5000);
        socket.setSoTimeout(30_000);
        in = new DataInputStream(socket.getInputStream());
        out = new DataOutputStream(socket.getOutputStream());
    }

    /** Sends one request frame and returns the reply's code and message bytes. */
    Reply request(int code, MessageLite message) throws IOException {
        byte[] body = message.toByteArray();
        out.writeInt(body.length + 1);
        out.writeByte(code);
        out.write(body);
        out.flush();
        int length = in.readInt();
        int replyCode = in.readUnsignedByte();
        byte[] reply = new byte[length - 1];
        in.readFully(reply);
        return new Reply(replyCode, reply);
    }

    record Reply(int code, byte[] body) {
    }

    /** An ApbMapKey of any CRDT_type number (the client's enum lacks 14 and 15). */
    static AntidotePB.ApbMapKey mapKey(String key, int type) {
        return AntidotePB.ApbMapKey.newBuilder()
                .setKey(ByteString.copyFromUtf8(key))
                .setUnknownFields(UnknownFieldSet.newBuilder()
                        .addField(2, UnknownFieldSet.Field.newBuilder().addVarint(type).build()).build())
                .buildPartial();
    }

    /** ApbUpdateOperation{flagop = ApbFlagUpdate{value}}: field 7 of AntidoteDB's current .proto. */
    static AntidotePB.ApbUpdateOperation flagOp(boolean value) {
        ByteString flagUpdate = ByteString.copyFrom(new byte[]{0x08, (byte) (value ? 1 : 0)});
        return AntidotePB.ApbUpdateOperation.newBuilder()
                .setUnknownFields(UnknownFieldSet.newBuilder()
                        .addField(7, UnknownFieldSet.Field.newBuilder().addLengthDelimited(flagUpdate).build())
                        .build())
                .buildPartial();
    }

    /** ApbUpdateOperation{counterop = ApbCounterUpdate{inc}}. */
    static AntidotePB.ApbUpdateOperation counterOp(long inc) {
        return AntidotePB.ApbUpdateOperation.newBuilder()
                .setCounterop(AntidotePB.ApbCounterUpdate.newBuilder().setInc(inc)).build();
    }

    /** A static update of one RRMAP whose entries are (key, type, operation). */
    static AntidotePB.ApbStaticUpdateObjects rrMapUpdate(String bucket, String key,
                                                          java.util.List<AntidotePB.ApbMapNestedUpdate> entries) {
        // buildPartial() at every level: a key whose type the client's enum lacks is, to the client's classes, a
        // message missing its required type (the number travels as an unknown field).
        AntidotePB.ApbMapUpdate.Builder map = AntidotePB.ApbMapUpdate.newBuilder();
        entries.forEach(map::addUpdates);
        AntidotePB.ApbUpdateOp op = AntidotePB.ApbUpdateOp.newBuilder()
                .setBoundobject(AntidotePB.ApbBoundObject.newBuilder()
                        .setBucket(ByteString.copyFromUtf8(bucket))
                        .setKey(ByteString.copyFromUtf8(key))
                        .setType(AntidotePB.CRDT_type.RRMAP)
                        .build())
                .setOperation(AntidotePB.ApbUpdateOperation.newBuilder().setMapop(map.buildPartial()).buildPartial())
                .buildPartial();
        return AntidotePB.ApbStaticUpdateObjects.newBuilder()
                .setTransaction(AntidotePB.ApbStartTransaction.newBuilder())
                .addUpdates(op)
                .buildPartial();
    }

    static AntidotePB.ApbMapNestedUpdate entry(AntidotePB.ApbMapKey key, AntidotePB.ApbUpdateOperation op) {
        return AntidotePB.ApbMapNestedUpdate.newBuilder().setKey(key).setUpdate(op).buildPartial();
    }

    @Override
    public void close() throws IOException {
        socket.close();
    }
}
