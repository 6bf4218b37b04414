"""Raw frames of AntidoteDB's client protocol, for what the `antidotedb` client cannot express.

A frame is a 4-byte big-endian length (counting the code byte and the message, not itself), one message-code
byte, then the protobuf message from AntidoteDB's antidote.proto (the client package ships its generated code).
"""

import socket
import struct
import time

from antidotedb.proto import antidote_pb2 as pb

# Message codes (AntidoteDB's antidote_pb_codec).
ERROR_RESP = 0
OPERATION_RESP = 111
READ_OBJECTS = 116
UPDATE_OBJECTS = 118
START_TRANSACTION = 119
ABORT_TRANSACTION = 120
COMMIT_TRANSACTION = 121
STATIC_UPDATE_OBJECTS = 122
STATIC_READ_OBJECTS = 123
START_TRANSACTION_RESP = 124
READ_OBJECTS_RESP = 126
COMMIT_RESP = 127
STATIC_READ_OBJECTS_RESP = 128
CREATE_DC = 129
CREATE_DC_RESP = 130
CONNECT_TO_DCS = 131
CONNECT_TO_DCS_RESP = 132
GET_CONNECTION_DESCRIPTOR = 133
GET_CONNECTION_DESCRIPTOR_RESP = 134

# Error codes in responses.
ERR_UNKNOWN = 0
ERR_TIMEOUT = 1
ERR_NO_PERMISSIONS = 2
ERR_ABORTED = 3

REPLY_TYPES = {
    ERROR_RESP: pb.ApbErrorResp,
    OPERATION_RESP: pb.ApbOperationResp,
    START_TRANSACTION_RESP: pb.ApbStartTransactionResp,
    READ_OBJECTS_RESP: pb.ApbReadObjectsResp,
    COMMIT_RESP: pb.ApbCommitResp,
    STATIC_READ_OBJECTS_RESP: pb.ApbStaticReadObjectsResp,
    CREATE_DC_RESP: pb.ApbCreateDCResp,
    CONNECT_TO_DCS_RESP: pb.ApbConnectToDCsResp,
    GET_CONNECTION_DESCRIPTOR_RESP: pb.ApbGetConnectionDescriptorResp,
}


def frame(code, body=b""):
    """The bytes of one frame."""
    if not isinstance(body, (bytes, bytearray)):
        body = body.SerializeToString()
    return struct.pack(">IB", len(body) + 1, code) + bytes(body)


class Closed(Exception):
    """The server closed the connection."""


class RawConnection:
    """One TCP connection speaking frames, reading replies completely (unlike the client's single `recv`)."""

    def __init__(self, host, port, timeout=15.0):
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def close(self):
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def send_bytes(self, data):
        self.sock.sendall(data)

    def send(self, code, body=b""):
        self.sock.sendall(frame(code, body))

    def _recv_exact(self, n):
        chunks = []
        while n > 0:
            chunk = self.sock.recv(min(n, 1 << 20))
            if not chunk:
                raise Closed(f"connection closed with {n} bytes of a frame missing")
            chunks.append(chunk)
            n -= len(chunk)
        return b"".join(chunks)

    def recv_frame(self):
        """The next frame as (code, body bytes)."""
        length, code = struct.unpack(">IB", self._recv_exact(5))
        return code, self._recv_exact(length - 1)

    def recv(self):
        """The next frame as (code, decoded message or raw bytes for an unknown code)."""
        code, body = self.recv_frame()
        cls = REPLY_TYPES.get(code)
        if cls is None:
            return code, body
        msg = cls()
        msg.ParseFromString(body)
        return code, msg

    def request(self, code, body=b""):
        self.send(code, body)
        return self.recv()

    def closed_by_peer(self, wait=5.0):
        """True when the server has closed the connection (EOF or reset) within `wait` seconds, discarding any
        bytes it still sends."""
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            self.sock.settimeout(max(0.05, deadline - time.monotonic()))
            try:
                data = self.sock.recv(65536)
            except socket.timeout:
                return False
            except (ConnectionResetError, BrokenPipeError):
                return True
            if not data:
                return True
        return False


# Message builders -------------------------------------------------------------------------------------------------


def bound(bucket, key, crdt_type):
    obj = pb.ApbBoundObject()
    obj.bucket = bucket if isinstance(bucket, bytes) else bucket.encode()
    obj.key = key if isinstance(key, bytes) else key.encode()
    obj.type = pb.CRDT_type.Value(crdt_type) if isinstance(crdt_type, str) else crdt_type
    return obj


def static_read(objects, timestamp=None):
    m = pb.ApbStaticReadObjects()
    m.transaction.properties.read_write = 1
    if timestamp is not None:
        m.transaction.timestamp = timestamp
    for o in objects:
        m.objects.add().CopyFrom(o)
    return m


def counter_update(obj, inc):
    u = pb.ApbUpdateOp()
    u.boundobject.CopyFrom(obj)
    u.operation.counterop.inc = inc
    return u


def reg_update(obj, value):
    u = pb.ApbUpdateOp()
    u.boundobject.CopyFrom(obj)
    u.operation.regop.value = value
    return u


def static_update(updates, timestamp=None):
    m = pb.ApbStaticUpdateObjects()
    m.transaction.properties.read_write = 2
    if timestamp is not None:
        m.transaction.timestamp = timestamp
    for u in updates:
        m.updates.add().CopyFrom(u)
    return m


def start(timestamp=None):
    m = pb.ApbStartTransaction()
    m.properties.read_write = 0
    if timestamp is not None:
        m.timestamp = timestamp
    return m


def read(descriptor, objects):
    m = pb.ApbReadObjects()
    m.transaction_descriptor = descriptor
    for o in objects:
        m.boundobjects.add().CopyFrom(o)
    return m


def update(descriptor, updates):
    m = pb.ApbUpdateObjects()
    m.transaction_descriptor = descriptor
    for u in updates:
        m.updates.add().CopyFrom(u)
    return m


def commit(descriptor):
    m = pb.ApbCommitTransaction()
    m.transaction_descriptor = descriptor
    return m


def abort(descriptor):
    m = pb.ApbAbortTransaction()
    m.transaction_descriptor = descriptor
    return m


def assert_usable(conn, bucket=b"conformance-probe"):
    """The connection still answers a request: a static read of a counter comes back as a static-read reply."""
    code, msg = conn.request(STATIC_READ_OBJECTS, static_read([bound(bucket, b"probe", "COUNTER")]))
    assert code == STATIC_READ_OBJECTS_RESP, f"expected a static read reply, got code {code}: {msg}"
    assert msg.objects.success
    return msg


def error_message(msg):
    return msg.errmsg.decode("utf-8", "replace")
