"""Errors, through the client where it can express them and through raw frames where it cannot. After an error
that leaves the framing intact the connection must go on working, and so after an oversized request, which the
server reads to its end and discards; after one that breaks the framing (an empty frame, or one declaring more than
any request could be) the server answers, closes that connection, and keeps serving others."""

import socket
import struct
import time

import pytest
from antidotedb import AntidoteClient, AntidoteException, Counter, Flag, Key, Map, Register, Set

import wire
from helpers import metric, metrics, read1


@pytest.fixture
def raw(server):
    host, port, _ = server
    conn = wire.RawConnection(host, port)
    yield conn
    conn.close()


def error_reply(conn, code, body=b""):
    rcode, msg = conn.request(code, body)
    assert rcode == wire.ERROR_RESP, f"expected ApbErrorResp, got code {rcode}: {msg}"
    return msg


# Frames the server cannot serve but can skip -----------------------------------------------------------------------


@pytest.mark.parametrize("code", [1, 99, 106, 137, 200, 255])
def test_unknown_message_code_gets_error_resp_and_connection_still_works(raw, code):
    msg = error_reply(raw, code, b"\x0a\x02hi")
    assert msg.errcode == wire.ERR_UNKNOWN
    assert str(code) in wire.error_message(msg)
    wire.assert_usable(raw)


@pytest.mark.parametrize("code", [wire.OPERATION_RESP, wire.START_TRANSACTION_RESP, wire.COMMIT_RESP, 107, 117, 125])
def test_reply_or_nested_only_code_sent_as_request_gets_error_resp(raw, code):
    msg = error_reply(raw, code)
    assert msg.errcode == wire.ERR_UNKNOWN
    assert wire.error_message(msg)
    wire.assert_usable(raw)


@pytest.mark.parametrize(
    "code, body",
    [
        pytest.param(wire.STATIC_READ_OBJECTS, b"\xff\xff\xff\xff", id="static-read-garbage"),
        pytest.param(wire.START_TRANSACTION, b"\x0a\x05ab", id="start-truncated-field"),
        pytest.param(wire.UPDATE_OBJECTS, b"\x0a", id="update-truncated-tag"),
        pytest.param(wire.COMMIT_TRANSACTION, b"\x07", id="commit-bad-wire-type"),
    ],
)
def test_undecodable_body_gets_error_resp_and_connection_still_works(raw, code, body):
    msg = error_reply(raw, code, body)
    assert msg.errcode == wire.ERR_UNKNOWN
    assert wire.error_message(msg)
    wire.assert_usable(raw)


def test_unknown_crdt_type_number_is_refused(raw, bucket):
    # ApbBoundObject{key="k", type=7, bucket} by hand: 7 is not in CRDT_type, so the client's enum cannot set it.
    b = bucket.encode()
    obj = b"\x0a\x01k\x10\x07\x1a" + bytes([len(b)]) + b
    body = b"\x0a\x00" + b"\x12" + bytes([len(obj)]) + obj  # ApbStaticReadObjects{transaction={}, objects=[obj]}
    msg = error_reply(raw, wire.STATIC_READ_OBJECTS, body)
    assert "type" in wire.error_message(msg).lower()
    wire.assert_usable(raw)


def test_update_operation_with_no_operation_is_refused(raw, bucket):
    u = wire.pb.ApbUpdateOp()
    u.boundobject.CopyFrom(wire.bound(bucket, "k", "COUNTER"))
    u.operation.SetInParent()
    msg = error_reply(raw, wire.STATIC_UPDATE_OBJECTS, wire.static_update([u]))
    assert wire.error_message(msg)
    wire.assert_usable(raw)


# Operations that do not fit their object ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "type_name, make_op",
    [
        ("LWWREG", lambda k: Counter.IncOp(k, 1)),
        ("COUNTER", lambda k: Register.AssignOp(k, b"x")),
        ("ORSET", lambda k: Flag.UpdateOp(k, True)),
        ("FLAG_EW", lambda k: Set.AddOp(k, b"x")),
        ("MVREG", lambda k: Map.UpdateOp(k, [Counter.IncOp(b"c", 1, "COUNTER")])),
        ("GMAP", lambda k: Counter.IncOp(k, 1)),
    ],
)
def test_operation_that_does_not_fit_the_type_is_an_error(client, key, type_name, make_op):
    k = key(type_name)
    with pytest.raises(AntidoteException, match="Antidote error 0: .+"):
        client.start_static_transaction().update_objects(make_op(k))
    tx = client.start_transaction()
    with pytest.raises(AntidoteException, match="Antidote error 0: .+"):
        tx.update_objects(make_op(k))
    # The connection is in step and the transaction still usable.
    assert tx.update_objects(Counter.IncOp(key("COUNTER", "other"), 1)) is True
    assert tx.commit() is True


def test_wrong_op_in_a_batch_applies_none_of_it(client, key):
    good, bad = key("COUNTER", "good"), key("LWWREG", "bad")
    with pytest.raises(AntidoteException):
        client.start_static_transaction().update_objects([Counter.IncOp(good, 1), Counter.IncOp(bad, 1)])
    assert read1(client, good).value() == 0


# Transaction descriptors -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "descriptor",
    [
        pytest.param(b"", id="empty"),
        pytest.param(b"garbage descriptor", id="garbage"),
        pytest.param(b"\x83h\x02a\x01a\x02", id="erlang-term"),
        pytest.param(b"\x11\x00\x00\xff\xff\xff\xff\x00\x00\x00\x00\x00\x00\x00\x07\x00\x00", id="unknown-coordinator"),
        pytest.param(b"\x11\x00\x00\x00\x00\x00\x00\x7f\xff\xff\xff\xff\xff\xff\xff\x00\x00", id="unknown-sequence"),
    ],
)
@pytest.mark.parametrize("request_code", [wire.READ_OBJECTS, wire.UPDATE_OBJECTS, wire.COMMIT_TRANSACTION,
                                          wire.ABORT_TRANSACTION])
def test_unknown_or_garbage_transaction_descriptor_is_an_error_with_a_message(raw, bucket, descriptor, request_code):
    obj = wire.bound(bucket, "k", "COUNTER")
    body = {
        wire.READ_OBJECTS: lambda: wire.read(descriptor, [obj]),
        wire.UPDATE_OBJECTS: lambda: wire.update(descriptor, [wire.counter_update(obj, 1)]),
        wire.COMMIT_TRANSACTION: lambda: wire.commit(descriptor),
        wire.ABORT_TRANSACTION: lambda: wire.abort(descriptor),
    }[request_code]()
    code, msg = raw.request(request_code, body)
    if code == wire.ERROR_RESP:
        text = wire.error_message(msg)
        assert "transaction" in text.lower(), text
    else:
        # A typed failure is also an error reply (AntidoteDB uses it for its four error codes).
        assert not msg.success, msg
    wire.assert_usable(raw)
    assert wire.assert_usable(raw).objects.objects[0].counter.value == 0


def test_descriptor_of_a_committed_transaction_is_refused(raw, bucket):
    obj = wire.bound(bucket, "k", "COUNTER")
    code, started = raw.request(wire.START_TRANSACTION, wire.start())
    assert code == wire.START_TRANSACTION_RESP and started.success
    d = started.transaction_descriptor
    code, msg = raw.request(wire.UPDATE_OBJECTS, wire.update(d, [wire.counter_update(obj, 1)]))
    assert code == wire.OPERATION_RESP and msg.success
    code, msg = raw.request(wire.COMMIT_TRANSACTION, wire.commit(d))
    assert code == wire.COMMIT_RESP and msg.success
    for req_code, body in [
        (wire.UPDATE_OBJECTS, wire.update(d, [wire.counter_update(obj, 1)])),
        (wire.READ_OBJECTS, wire.read(d, [obj])),
        (wire.COMMIT_TRANSACTION, wire.commit(d)),
        (wire.ABORT_TRANSACTION, wire.abort(d)),
    ]:
        code, msg = raw.request(req_code, body)
        assert code == wire.ERROR_RESP or not msg.success, (req_code, code, msg)
        if code == wire.ERROR_RESP:
            assert "transaction" in wire.error_message(msg).lower()
    code, msg = raw.request(wire.STATIC_READ_OBJECTS, wire.static_read([obj]))
    assert msg.objects.objects[0].counter.value == 1


# Frames that break the framing -------------------------------------------------------------------------------------


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS")


def test_oversized_request_is_read_answered_with_the_limit_and_the_connection_goes_on(server, causet):
    # 4 MiB over the 16 MiB limit, sent in full as a client would: the server reads and drops it (without keeping
    # it), then says why, naming the option that raises the limit, and serves the next request on the same
    # connection.
    host, port, _ = server
    declared = 20 * 1024 * 1024
    before = rss_kib(causet.pid)
    with wire.RawConnection(host, port, timeout=60) as conn:
        conn.send_bytes(struct.pack(">IB", declared, wire.STATIC_UPDATE_OBJECTS))
        chunk = b"\x00" * (1 << 20)
        left = declared - 1
        while left:
            conn.send_bytes(chunk[: min(left, len(chunk))])
            left -= min(left, len(chunk))
        code, msg = conn.recv()
        assert code == wire.ERROR_RESP
        text = wire.error_message(msg)
        assert str(declared) in text and str(16 * 1024 * 1024) in text and "max_frame_bytes" in text, text
        wire.assert_usable(conn)
    assert rss_kib(causet.pid) - before < 8 * 1024, "the discarded body was kept in memory"


@pytest.mark.parametrize("declared", [0x7FFFFFFF, 0xFFFFFFFF, struct.unpack(">I", b"GET ")[0]])
def test_frame_declaring_more_than_any_request_gets_an_error_and_the_connection_is_closed(server, causet, declared):
    # Beyond 256 MiB the stream is taken for something other than AntidoteDB's protocol (the last case is what an
    # HTTP request's first bytes declare): the server answers without waiting for the body and closes.
    host, port, _ = server
    before = rss_kib(causet.pid)
    with wire.RawConnection(host, port) as conn:
        conn.send_bytes(struct.pack(">IB", declared, wire.STATIC_READ_OBJECTS) + b"\x00" * 64)
        code, msg = conn.recv()
        assert code == wire.ERROR_RESP
        assert "exceeds" in wire.error_message(msg) or "large" in wire.error_message(msg).lower()
        assert conn.closed_by_peer(), "the server keeps a connection whose framing is lost"
    time.sleep(0.2)
    # Nothing near the declared size was allocated, the server is up and serves a new connection.
    assert rss_kib(causet.pid) - before < 8 * 1024
    assert causet.process.poll() is None
    with wire.RawConnection(host, port) as conn:
        wire.assert_usable(conn)


def test_client_sending_a_request_over_the_limit_gets_the_reason_and_keeps_its_connection(start_server, bucket):
    # The published Python client, against a node whose limit is 4 KiB: a 64 KiB register value is refused with the
    # reason, and the same connection then commits a small one.
    node = start_server(extra_args=["--max-frame-bytes", "4096"])
    client = AntidoteClient(node.host, node.port)
    try:
        reg = Key(bucket, "big", "LWWREG")
        with pytest.raises(AntidoteException) as refused:
            client.start_static_transaction().update_objects([Register.AssignOp(reg, b"x" * 65536)])
        assert "4096" in str(refused.value) and "max_frame_bytes" in str(refused.value), str(refused.value)
        assert client.start_static_transaction().update_objects([Register.AssignOp(reg, b"small")]) is True
        assert read1(client, reg).value() == b"small"
    finally:
        client.close()


def test_frame_at_the_size_limit_is_not_refused_for_its_size(server, bucket):
    # A register assignment just under 16 MiB: the frame is accepted (whatever the answer to its contents).
    host, port, _ = server
    value = b"v" * (16 * 1024 * 1024 - 200)
    body = wire.static_update([wire.reg_update(wire.bound(bucket, b"k", "LWWREG"), value)]).SerializeToString()
    assert len(body) + 1 <= 16 * 1024 * 1024
    with wire.RawConnection(host, port, timeout=60) as conn:
        code, msg = conn.request(wire.STATIC_UPDATE_OBJECTS, body)
        if code == wire.ERROR_RESP:
            assert "exceeds" not in wire.error_message(msg)
        wire.assert_usable(conn)


def test_zero_length_frame_gets_an_error_and_the_connection_is_closed(server):
    host, port, _ = server
    with wire.RawConnection(host, port) as conn:
        conn.send_bytes(b"\x00\x00\x00\x00")
        code, msg = conn.recv()
        assert code == wire.ERROR_RESP
        assert conn.closed_by_peer()
    with wire.RawConnection(host, port) as conn:
        wire.assert_usable(conn)


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(b"\x00\x00", id="half-a-length"),
        pytest.param(b"\x00\x00\x00\x64", id="length-only"),
        pytest.param(struct.pack(">IB", 100, wire.STATIC_READ_OBJECTS) + b"\x0a\x03", id="partial-body"),
        pytest.param(struct.pack(">IB", 16 * 1024 * 1024, wire.STATIC_UPDATE_OBJECTS) + b"x" * 1000, id="big-partial"),
    ],
)
def test_truncated_frame_then_close_does_not_hurt_the_server(server, causet, data):
    host, port, _ = server
    for _ in range(5):
        s = socket.create_connection((host, port), timeout=5)
        s.sendall(data)
        s.close()
    # Also an abrupt reset (RST) mid-frame.
    s = socket.create_connection((host, port), timeout=5)
    s.sendall(data)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    s.close()
    time.sleep(0.1)
    assert causet.process.poll() is None
    with wire.RawConnection(host, port) as conn:
        wire.assert_usable(conn)


def test_request_then_close_without_reading_the_reply(server, causet, bucket):
    host, port, _ = server
    obj = wire.bound(bucket, "k", "COUNTER")
    for _ in range(5):
        s = socket.create_connection((host, port), timeout=5)
        s.sendall(wire.frame(wire.STATIC_UPDATE_OBJECTS, wire.static_update([wire.counter_update(obj, 1)])))
        s.sendall(wire.frame(wire.START_TRANSACTION, wire.start()))
        s.close()
    time.sleep(0.2)
    assert causet.process.poll() is None
    with wire.RawConnection(host, port) as conn:
        value = wire.assert_usable(conn, bucket).objects.objects[0].counter.value
        assert value == 0  # the probe object, untouched
        code, msg = conn.request(wire.STATIC_READ_OBJECTS, wire.static_read([obj]))
        assert 0 <= msg.objects.objects[0].counter.value <= 5


def test_requests_pipelined_in_one_write_are_answered_in_order(server, bucket):
    host, port, _ = server
    obj = wire.bound(bucket, "k", "COUNTER")
    data = b"".join(
        [
            wire.frame(wire.STATIC_UPDATE_OBJECTS, wire.static_update([wire.counter_update(obj, 1)])),
            wire.frame(200, b""),
            wire.frame(wire.STATIC_UPDATE_OBJECTS, wire.static_update([wire.counter_update(obj, 2)])),
            wire.frame(wire.STATIC_READ_OBJECTS, wire.static_read([obj])),
        ]
    )
    with wire.RawConnection(host, port) as conn:
        conn.send_bytes(data)
        codes = [conn.recv()[0] for _ in range(4)]
        assert codes == [wire.COMMIT_RESP, wire.ERROR_RESP, wire.COMMIT_RESP, wire.STATIC_READ_OBJECTS_RESP]


def test_frame_split_into_single_bytes_is_reassembled(server, bucket):
    host, port, _ = server
    obj = wire.bound(bucket, "k", "COUNTER")
    data = wire.frame(wire.STATIC_UPDATE_OBJECTS, wire.static_update([wire.counter_update(obj, 3)]))
    with wire.RawConnection(host, port) as conn:
        for b in data:
            conn.send_bytes(bytes([b]))
        code, msg = conn.recv()
        assert code == wire.COMMIT_RESP and msg.success


# Cluster management ------------------------------------------------------------------------------------------------


def _create_dc():
    return wire.pb.ApbCreateDC(nodes=["causet@127.0.0.1"])


def _connect_to_no_dcs():
    return wire.pb.ApbConnectToDCs(descriptors=[])


def _connect_to_causet_dc():
    # A descriptor in Causet's documented layout: 0x22, dc u16, dcs u16, partitions u32, count u16, then
    # (len u16, UTF-8 address) each.
    address = b"127.0.0.1:8086"
    body = b"\x22" + struct.pack(">HHIH", 1, 2, 8, 1) + struct.pack(">H", len(address)) + address
    return wire.pb.ApbConnectToDCs(descriptors=[body])


def _connect_to_antidote_dc():
    # What an AntidoteDB DC hands out: an Erlang term (term_to_binary of its descriptor record).
    return wire.pb.ApbConnectToDCs(descriptors=[b"\x83h\x02d\x00\x0edc_descriptorsj"])


def _get_connection_descriptor():
    return wire.pb.ApbGetConnectionDescriptor()


@pytest.mark.parametrize(
    "code, make, typed_reply, expected",
    [
        # A DC of this one node: accepted.
        (wire.CREATE_DC, _create_dc, wire.CREATE_DC_RESP, None),
        # Connecting to no other DC: nothing to do.
        (wire.CONNECT_TO_DCS, _connect_to_no_dcs, wire.CONNECT_TO_DCS_RESP, None),
        # This server runs one DC (dcs = 1): connecting or describing it is refused with the reason.
        (wire.CONNECT_TO_DCS, _connect_to_causet_dc, wire.CONNECT_TO_DCS_RESP, "single DC"),
        (wire.CONNECT_TO_DCS, _connect_to_antidote_dc, wire.CONNECT_TO_DCS_RESP, "invalid DC descriptor"),
        (wire.GET_CONNECTION_DESCRIPTOR, _get_connection_descriptor, wire.GET_CONNECTION_DESCRIPTOR_RESP, "single DC"),
    ],
)
def test_cluster_management_on_a_single_dc_node_answers_clearly(raw, code, make, typed_reply, expected):
    rcode, msg = raw.request(code, make())
    if expected is None:
        assert rcode == typed_reply, f"reply code {rcode}"
        assert msg.success is True
    else:
        assert rcode == wire.ERROR_RESP, f"reply code {rcode}"
        assert expected in wire.error_message(msg), wire.error_message(msg)
    wire.assert_usable(raw)


def test_a_dc_of_another_node_count_than_configured_is_refused_clearly(raw):
    # The server under test is a DC of one node: a DC of two is refused with the reason (nodes are configured).
    rcode, msg = raw.request(wire.CREATE_DC, wire.pb.ApbCreateDC(nodes=["a@127.0.0.1", "b@127.0.0.1"]))
    assert rcode == wire.ERROR_RESP
    text = wire.error_message(msg)
    assert "a DC of 2 nodes was asked for, but this DC is configured with 1" in text
    assert "`nodes`" in text
    wire.assert_usable(raw)


def test_connection_over_the_limit_gets_an_error_and_is_closed(start_server):
    srv = start_server(extra_args=["--max-connections", "2"])
    # The fixture's readiness probe held a slot until the server saw it close: start once none is open.
    deadline = time.monotonic() + 5
    while metric(metrics(srv.admin_url), "causet_connections") != 0:
        assert time.monotonic() < deadline, "the readiness probe's connection was never released"
        time.sleep(0.02)
    first, second = wire.RawConnection(srv.host, srv.port), wire.RawConnection(srv.host, srv.port)
    wire.assert_usable(first)
    wire.assert_usable(second)
    with wire.RawConnection(srv.host, srv.port) as third:
        code, msg = third.recv()
        assert code == wire.ERROR_RESP
        assert "too many connections" in wire.error_message(msg)
        assert third.closed_by_peer()
    # A freed slot is usable again.
    second.close()
    deadline = time.monotonic() + 5
    while True:
        with wire.RawConnection(srv.host, srv.port) as again:
            try:
                wire.assert_usable(again)
                break
            except (AssertionError, wire.Closed):
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
    wire.assert_usable(first)
    first.close()


def test_connection_limit_is_not_hit_by_closed_connections(server):
    host, port, _ = server
    for _ in range(50):
        with wire.RawConnection(host, port) as conn:
            wire.assert_usable(conn)
