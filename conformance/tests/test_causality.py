"""Causal clocks passed between transactions and clients: a commit time (`last_commit`) given as `min_snapshot` to
a transaction on another connection makes the commit visible to it, along chains of clients too."""

import pytest
from antidotedb import AntidoteException, Counter, MVRegister, Register, Set

import wire
from helpers import decode_clock, encode_clock, merge_clocks, read1, write


def test_commit_time_passed_to_another_client_makes_the_write_visible(connect, key):
    a, b = connect(), connect()
    k = key("LWWREG")
    write(a, Register.AssignOp(k, b"from-a"))
    tx = b.start_transaction(min_snapshot=a.last_commit)
    assert tx.read_objects(k)[0].value() == b"from-a"
    assert tx.commit() is True


def test_interactive_commit_time_for_a_static_read_on_another_client(connect, key):
    a, b = connect(), connect()
    k = key("ORSET")
    tx = a.start_transaction()
    assert tx.update_objects(Set.AddOp(k, [b"p", b"q"])) is True
    assert tx.commit() is True
    st = b.start_static_transaction(min_snapshot=a.last_commit)
    assert sorted(st.read_objects(k)[0].values()) == [b"p", b"q"]


def test_causal_chain_across_three_clients(connect, key):
    a, b, c = connect(), connect(), connect()
    x, y = key("COUNTER", "x"), key("COUNTER", "y")
    write(a, Counter.IncOp(x, 1))
    tx = b.start_transaction(min_snapshot=a.last_commit)
    assert tx.read_objects(x)[0].value() == 1
    assert tx.update_objects(Counter.IncOp(y, 1)) is True
    assert tx.commit() is True
    # c only knows b's commit time; it must see b's write and a's, which b's write depends on.
    got = c.start_static_transaction(min_snapshot=b.last_commit).read_objects([x, y])
    assert [g.value() for g in got] == [1, 1]


def test_session_of_static_transactions_as_in_the_client_tests(client, key):
    # antidote-python-client's test_committime.
    k = key("MVREG")
    assert client.start_static_transaction().update_objects(MVRegister.AssignOp(k, b"lightkone")) is True
    st = client.start_static_transaction(min_snapshot=client.last_commit)
    assert list(st.read_objects(k)[0].values()) == [b"lightkone"]
    assert st.update_objects(MVRegister.AssignOp(k, b"syncfree")) is True
    st = client.start_static_transaction(min_snapshot=client.last_commit)
    assert list(st.read_objects(k)[0].values()) == [b"syncfree"]


def test_static_read_commit_time_carries_the_session_forward(connect, key):
    a, b = connect(), connect()
    k = key("COUNTER")
    write(a, Counter.IncOp(k, 4))
    raw = b.start_static_transaction(min_snapshot=a.last_commit).read_objects_raw(k)
    assert raw.objects.success and raw.objects.objects[0].counter.value == 4
    assert raw.committime.success and raw.committime.commit_time
    # The read's snapshot is after a's commit.
    assert all(r >= w for r, w in zip(decode_clock(raw.committime.commit_time), decode_clock(a.last_commit)))
    assert read1(b, k, clock=raw.committime.commit_time).value() == 4


def test_commit_times_grow_along_a_causal_chain(connect, key):
    a, b = connect(), connect()
    k = key("COUNTER")
    write(a, Counter.IncOp(k, 1))
    first = decode_clock(a.last_commit)
    tx = b.start_transaction(min_snapshot=a.last_commit)
    assert tx.update_objects(Counter.IncOp(k, 1)) is True
    assert tx.commit() is True
    second = decode_clock(b.last_commit)
    assert len(first) == len(second) >= 1
    assert all(s >= f for s, f in zip(second, first)) and second != first


def test_empty_min_snapshot_means_no_clock(client, key):
    k = key("COUNTER")
    write(client, Counter.IncOp(k, 2))
    assert client.start_static_transaction(min_snapshot=b"").read_objects(k)[0].value() == 2
    tx = client.start_transaction(min_snapshot=b"")
    assert tx.commit() is True


def test_erlang_ignore_as_start_timestamp_means_no_clock(server, bucket):
    # AntidoteDB's Erlang client sends term_to_binary(ignore) when it has no clock.
    host, port, _ = server
    obj = wire.bound(bucket, "k", "COUNTER")
    with wire.RawConnection(host, port) as conn:
        for ignore in (b"\x83d\x00\x06ignore", b"\x83w\x06ignore"):
            code, msg = conn.request(wire.STATIC_READ_OBJECTS, wire.static_read([obj], timestamp=ignore))
            assert code == wire.STATIC_READ_OBJECTS_RESP, msg
            code, msg = conn.request(wire.START_TRANSACTION, wire.start(timestamp=ignore))
            assert code == wire.START_TRANSACTION_RESP and msg.success, msg


@pytest.mark.parametrize(
    "clock",
    [
        pytest.param(b"\x00garbage", id="garbage"),
        pytest.param(b"\x01\x00", id="truncated"),
        pytest.param(encode_clock([1, 2, 3]), id="wrong-number-of-dcs"),
        pytest.param(encode_clock([(2**63) | 12345]), id="far-future"),
    ],
)
def test_invalid_min_snapshot_is_refused_with_a_message(client, key, clock):
    k = key("COUNTER")
    with pytest.raises(AntidoteException, match="Antidote error 0: .*clock"):
        client.start_transaction(min_snapshot=clock)
    with pytest.raises(AntidoteException, match="Antidote error 0: .*clock"):
        client.start_static_transaction(min_snapshot=clock).read_objects(k)
    with pytest.raises(AntidoteException, match="Antidote error 0: .*clock"):
        client.start_static_transaction(min_snapshot=clock).update_objects(Counter.IncOp(k, 1))
    # The connection is still usable, and nothing was written.
    assert client.start_static_transaction().read_objects(k)[0].value() == 0


def test_merged_clock_of_two_clients_sees_both_writes(connect, key):
    a, b, c = connect(), connect(), connect()
    x, y = key("COUNTER", "x"), key("COUNTER", "y")
    write(a, Counter.IncOp(x, 1))
    write(b, Counter.IncOp(y, 1))
    got = c.start_static_transaction(min_snapshot=merge_clocks(a.last_commit, b.last_commit)).read_objects([x, y])
    assert [g.value() for g in got] == [1, 1]


def test_transaction_without_a_clock_sees_commits_acknowledged_before_it_started(connect, key):
    # In one DC a snapshot without a client clock is taken at the DC's current time, so it includes every commit
    # acknowledged before the transaction started, whichever connection (and so coordinator) made it.
    clients = [connect() for _ in range(4)]
    k = key("COUNTER")
    for i in range(12):
        writer, reader = clients[i % 4], clients[(i + 1 + i // 4) % 4]
        assert writer.start_static_transaction().update_objects(Counter.IncOp(k, 1)) is True
        assert reader.start_static_transaction().read_objects(k)[0].value() == i + 1
