"""Interactive transactions: reading their own writes, snapshot reads, atomic visibility, aborts (real ones, sent as
ApbAbortTransaction, since the client's `abort` sends a commit), abandoned transactions, and descriptors."""

import time

import pytest
from antidotedb import AntidoteClient, AntidoteException, Counter, Key, Register, Set
from antidotedb.antidoteclient import InteractiveTransaction
from antidotedb.proto import antidote_pb2 as pb

from helpers import merge_clocks, read, read1, write


def real_abort(client, tx):
    """An ApbAbortTransaction (code 120) for `tx` on the client's own connection, answered by ApbOperationResp."""
    client.sendMessageAbortTransaction(pb.ApbAbortTransaction(transaction_descriptor=tx.txDescriptor))
    return client.recvMessageOperationResp()


def test_transaction_reads_its_own_writes_before_commit(connect, key):
    a, b = connect(), connect()
    c, s, r = key("COUNTER"), key("ORSET"), key("LWWREG")
    tx = a.start_transaction()
    assert tx.update_objects([Counter.IncOp(c, 3), Set.AddOp(s, [b"x", b"y"]), Register.AssignOp(r, b"mine")]) is True
    got = tx.read_objects([c, s, r])
    assert got[0].value() == 3 and sorted(got[1].values()) == [b"x", b"y"] and got[2].value() == b"mine"
    assert tx.update_objects([Counter.IncOp(c, 4), Set.RemoveOp(s, b"x")]) is True
    got = tx.read_objects([c, s])
    assert got[0].value() == 7 and list(got[1].values()) == [b"y"]
    # Nobody else sees them yet.
    others = read(b, c, s, r)
    assert others[0].value() == 0 and list(others[1].values()) == [] and others[2].value() == b""
    assert tx.commit() is True
    got = read(b, c, s, r, clock=a.last_commit)
    assert got[0].value() == 7 and list(got[1].values()) == [b"y"] and got[2].value() == b"mine"


def test_transaction_reads_from_its_snapshot(connect, key):
    a, b = connect(), connect()
    k = key("COUNTER")
    write(a, Counter.IncOp(k, 1))
    tx = b.start_transaction(min_snapshot=a.last_commit)
    assert tx.read_objects(k)[0].value() == 1
    write(a, Counter.IncOp(k, 10))  # commits after tx's snapshot
    assert tx.read_objects(k)[0].value() == 1, "a transaction keeps reading its snapshot"
    assert tx.update_objects(Counter.IncOp(k, 100)) is True
    assert tx.read_objects(k)[0].value() == 101
    assert tx.commit() is True
    assert read1(a, k, clock=merge_clocks(a.last_commit, b.last_commit)).value() == 111


def test_committed_updates_are_visible_atomically(connect, bucket):
    a, b = connect(), connect()
    keys = [Key(bucket, f"k{i}", "COUNTER") for i in range(8)]
    tx = a.start_transaction()
    for k in keys:
        assert tx.update_objects(Counter.IncOp(k, 1)) is True
    # Before the commit, no reader sees any of them; after it, a reader after the commit sees all of them.
    assert [r.value() for r in read(b, *keys)] == [0] * len(keys)
    assert tx.commit() is True
    assert [r.value() for r in read(b, *keys, clock=a.last_commit)] == [1] * len(keys)


def test_aborted_transaction_writes_are_invisible(connect, key):
    a, b = connect(), connect()
    c, s = key("COUNTER"), key("ORSET")
    write(a, Counter.IncOp(c, 1))
    tx = a.start_transaction(min_snapshot=a.last_commit)
    assert tx.update_objects([Counter.IncOp(c, 50), Set.AddOp(s, b"ghost")]) is True
    assert tx.read_objects(c)[0].value() == 51
    resp = real_abort(a, tx)
    assert resp.success is True
    # Later transactions, on this connection and another, see nothing of it.
    got = read(a, c, s)
    assert got[0].value() == 1 and list(got[1].values()) == []
    write(b, Counter.IncOp(c, 1))
    got = read(b, c, s)
    assert got[0].value() == 2 and list(got[1].values()) == []


def test_aborted_transaction_cannot_be_used_afterwards(client, key):
    k = key("COUNTER")
    tx = client.start_transaction()
    assert tx.update_objects(Counter.IncOp(k, 1)) is True
    assert real_abort(client, tx).success is True
    for attempt in (lambda: tx.read_objects(k), lambda: tx.update_objects(Counter.IncOp(k, 1)), tx.commit):
        # AntidoteDB answers a finished transaction with ApbErrorResp or a typed failure; either way no success.
        try:
            result = attempt()
        except AntidoteException:
            continue
        assert not result
    assert read1(client, k).value() == 0


def test_abort_of_a_read_only_transaction(client, key):
    tx = client.start_transaction()
    assert tx.read_objects(key("COUNTER"))[0].value() == 0
    assert real_abort(client, tx).success is True


def test_client_abort_method_sends_a_commit(client, key):
    # The antidotedb client's InteractiveTransaction.abort sends its ApbAbortTransaction with the commit code (121)
    # and reads an ApbCommitResp: against AntidoteDB and Causet alike, the transaction commits. This pins that
    # quirk so that nobody mistakes it for a server bug.
    k = key("COUNTER")
    tx = client.start_transaction()
    assert tx.update_objects(Counter.IncOp(k, 9)) is True
    resp = tx.abort()
    assert resp.success is True and resp.commit_time
    assert read1(client, k, clock=resp.commit_time).value() == 9


def test_abandoned_transaction_of_a_closed_connection_is_invisible(connect, key):
    a, b = connect(), connect()
    k = key("COUNTER")
    tx = a.start_transaction()
    assert tx.update_objects(Counter.IncOp(k, 5)) is True
    a.close()
    write(b, Counter.IncOp(k, 1))
    assert read1(b, k).value() == 1


def test_commit_twice_is_an_error(client, key):
    k = key("COUNTER")
    tx = client.start_transaction()
    assert tx.update_objects(Counter.IncOp(k, 1)) is True
    assert tx.commit() is True
    with pytest.raises(AntidoteException, match="Antidote error 0"):
        tx.commit()
    assert read1(client, k).value() == 1


def test_using_a_transaction_after_commit_is_an_error(client, key):
    k = key("COUNTER")
    tx = client.start_transaction()
    assert tx.update_objects(Counter.IncOp(k, 1)) is True
    assert tx.commit() is True
    with pytest.raises(AntidoteException, match="Antidote error 0: .*transaction"):
        tx.update_objects(Counter.IncOp(k, 1))
    with pytest.raises(AntidoteException, match="Antidote error 0: .*transaction"):
        tx.read_objects(k)
    # The connection is still in step: a new transaction works.
    assert read1(client, k).value() == 1


def test_several_open_transactions_on_one_connection(client, key):
    k1, k2 = key("COUNTER", "one"), key("COUNTER", "two")
    t1 = client.start_transaction()
    t2 = client.start_transaction()
    assert t1.update_objects(Counter.IncOp(k1, 1)) is True
    assert t2.update_objects(Counter.IncOp(k2, 2)) is True
    assert t1.read_objects(k2)[0].value() == 0
    assert t2.read_objects(k1)[0].value() == 0
    assert t1.commit() is True
    c1 = client.last_commit
    assert t2.commit() is True
    got = read(client, k1, k2, clock=merge_clocks(c1, client.last_commit))
    assert [g.value() for g in got] == [1, 2]


def test_descriptor_is_usable_from_another_connection(connect, key):
    # AntidoteDB's descriptor names the transaction's coordinator, so any connection to the node may use it.
    a, b = connect(), connect()
    k = key("COUNTER")
    tx_a = a.start_transaction()
    assert tx_a.update_objects(Counter.IncOp(k, 2)) is True
    tx_b = InteractiveTransaction(b, tx_a.txDescriptor)
    assert tx_b.read_objects(k)[0].value() == 2
    assert tx_b.update_objects(Counter.IncOp(k, 3)) is True
    assert tx_a.commit() is True
    assert read1(a, k).value() == 5


def test_empty_transaction_commits(client):
    tx = client.start_transaction()
    assert tx.commit() is True
    assert client.last_commit


def test_static_update_with_no_operations_commits(client):
    assert client.start_static_transaction().update_objects([]) is True


def test_static_read_of_no_objects(client):
    assert client.start_static_transaction().read_objects([]) == []


def test_later_transaction_without_a_clock_sees_earlier_commit(client, key):
    # antidote-python-client's own tests read, without passing a clock, what the same client committed just before;
    # on one DC that holds in AntidoteDB (a snapshot takes the DC's current time).
    k = key("LWWREG")
    tx = client.start_transaction()
    assert tx.update_objects(Register.AssignOp(k, b"v1")) is True
    assert tx.commit() is True
    assert client.start_static_transaction().read_objects(k)[0].value() == b"v1"
    assert client.start_static_transaction().update_objects(Register.AssignOp(k, b"v2")) is True
    tx = client.start_transaction()
    assert tx.read_objects(k)[0].value() == b"v2"
    assert tx.commit() is True


def test_idle_transaction_is_aborted_after_the_idle_timeout(start_server):
    # Abandoned transactions must not hold resources forever (AntidoteDB leaks their coordinators, issue #348).
    srv = start_server(extra_args=["--tx-idle-timeout-ms", "300"])
    a = AntidoteClient(srv.host, srv.port)
    try:
        k = Key("idle", "k", "COUNTER")
        tx = a.start_transaction()
        assert tx.update_objects(Counter.IncOp(k, 1)) is True
        time.sleep(1.0)
        # The transaction is gone: AntidoteDB's typed failure, error code 3 (aborted): the client returns False.
        assert tx.update_objects(Counter.IncOp(k, 1)) is False
        assert tx.commit() is False
        assert read1(a, k).value() == 0
        # A transaction that keeps working is not affected.
        tx = a.start_transaction()
        for _ in range(4):
            time.sleep(0.15)
            assert tx.update_objects(Counter.IncOp(k, 1)) is True
        assert tx.commit() is True
        assert read1(a, k).value() == 4
    finally:
        a.close()


def test_certified_transactions_abort_on_concurrent_write_conflicts(start_server):
    # With --certify-writes (AntidoteDB's txn_cert), the second of two concurrent writers of one object aborts.
    srv = start_server(extra_args=["--certify-writes"])
    a, b = AntidoteClient(srv.host, srv.port), AntidoteClient(srv.host, srv.port)
    try:
        k, other = Key("cert", "k", "COUNTER"), Key("cert", "other", "COUNTER")
        t1, t2 = a.start_transaction(), b.start_transaction()
        assert t1.update_objects(Counter.IncOp(k, 1)) is True
        assert t2.update_objects([Counter.IncOp(k, 10), Counter.IncOp(other, 10)]) is True
        assert t1.commit() is True
        assert t2.commit() is False, "a concurrent write to the same object must fail certification"
        got = read(a, k, other, clock=a.last_commit)
        assert [g.value() for g in got] == [1, 0], "the aborted transaction left nothing behind"
        # Concurrent writers of different objects both commit.
        t1, t2 = a.start_transaction(), b.start_transaction()
        assert t1.update_objects(Counter.IncOp(k, 1)) is True
        assert t2.update_objects(Counter.IncOp(other, 1)) is True
        assert t1.commit() is True and t2.commit() is True
    finally:
        a.close()
        b.close()
