"""Every CRDT type AntidoteDB's client can name, through static and interactive transactions: an update, then a
read that the `antidotedb` client decodes into its typed objects (Counter, Set, Register, MVRegister, Flag, Map).
"""

import pytest
from antidotedb import (
    AntidoteException,
    Counter,
    Flag,
    Key,
    Map,
    MVRegister,
    Register,
    Set,
)

import wire


def _check_counter(expected):
    def check(obj):
        assert type(obj) is Counter
        assert obj.value() == expected

    return check


def _check_set(expected):
    def check(obj):
        assert type(obj) is Set
        assert sorted(obj.values()) == sorted(expected)

    return check


def _check_map(obj):
    # GMAP/RRMAP below hold a nested counter and a nested set or register; the client decodes entries into a
    # dict keyed by the nested key's bytes.
    assert type(obj) is Map
    vals = obj.values()
    assert set(vals) == {b"c", b"e"}
    assert type(vals[b"c"]) is Counter and vals[b"c"].value() == 2


def _check_gmap(obj):
    _check_map(obj)
    e = obj.values()[b"e"]
    assert type(e) is Register and e.value() == b"nested"


def _check_rrmap(obj):
    _check_map(obj)
    e = obj.values()[b"e"]
    assert type(e) is Set and sorted(e.values()) == [b"x", b"y"]


def _check_register(obj):
    assert type(obj) is Register
    assert obj.value() == b"hello"


def _check_mvreg(obj):
    assert type(obj) is MVRegister
    assert list(obj.values()) == [b"hello"]


def _check_flag(obj):
    assert type(obj) is Flag
    assert obj.value() is True


# type name -> (the update of a key, the check of the value read back)
TYPES = {
    "COUNTER": (lambda k: [Counter.IncOp(k, 5), Counter.IncOp(k, -2)], _check_counter(3)),
    "FATCOUNTER": (lambda k: [Counter.IncOp(k, 7)], _check_counter(7)),
    "ORSET": (lambda k: [Set.AddOp(k, [b"a", b"b"]), Set.AddOp(k, b"c")], _check_set([b"a", b"b", b"c"])),
    "RWSET": (lambda k: [Set.AddOp(k, [b"a", b"b"]), Set.AddOp(k, b"c")], _check_set([b"a", b"b", b"c"])),
    "LWWREG": (lambda k: [Register.AssignOp(k, b"hello")], _check_register),
    "MVREG": (lambda k: [MVRegister.AssignOp(k, b"hello")], _check_mvreg),
    "FLAG_EW": (lambda k: [Flag.UpdateOp(k, True)], _check_flag),
    "FLAG_DW": (lambda k: [Flag.UpdateOp(k, True)], _check_flag),
    "GMAP": (
        lambda k: [Map.UpdateOp(k, [Counter.IncOp(b"c", 2, "COUNTER"), Register.AssignOp(b"e", b"nested", "LWWREG")])],
        _check_gmap,
    ),
    "RRMAP": (
        lambda k: [Map.UpdateOp(k, [Counter.IncOp(b"c", 2, "FATCOUNTER"), Set.AddOp(b"e", [b"x", b"y"], "ORSET")])],
        _check_rrmap,
    ),
}

INITIAL = {
    "COUNTER": (Counter, lambda o: o.value() == 0),
    "FATCOUNTER": (Counter, lambda o: o.value() == 0),
    "ORSET": (Set, lambda o: list(o.values()) == []),
    "RWSET": (Set, lambda o: list(o.values()) == []),
    "LWWREG": (Register, lambda o: o.value() == b""),
    "MVREG": (MVRegister, lambda o: list(o.values()) == []),
    "FLAG_EW": (Flag, lambda o: o.value() is False),
    "FLAG_DW": (Flag, lambda o: o.value() is False),
    "GMAP": (Map, lambda o: o.values() == {}),
    "RRMAP": (Map, lambda o: o.values() == {}),
}


@pytest.mark.parametrize("type_name", list(TYPES))
def test_static_transaction_update_then_read(client, key, type_name):
    ops, check = TYPES[type_name]
    k = key(type_name)
    assert client.start_static_transaction().update_objects(ops(k)) is True
    assert client.last_commit, "a static update records its commit time"
    res = client.start_static_transaction(min_snapshot=client.last_commit).read_objects(k)
    assert len(res) == 1
    check(res[0])


@pytest.mark.parametrize("type_name", list(TYPES))
def test_interactive_transaction_update_then_read(client, key, type_name):
    ops, check = TYPES[type_name]
    k = key(type_name)
    tx = client.start_transaction()
    for op in ops(k):
        assert tx.update_objects(op) is True
    check(tx.read_objects(k)[0])
    assert tx.commit() is True
    tx = client.start_transaction(min_snapshot=client.last_commit)
    check(tx.read_objects([k])[0])
    assert tx.commit() is True


@pytest.mark.parametrize("type_name", list(INITIAL))
def test_never_written_object_reads_as_initial_value(client, key, type_name):
    cls, is_initial = INITIAL[type_name]
    k = key(type_name, "never-written")
    static = client.start_static_transaction().read_objects(k)[0]
    tx = client.start_transaction()
    interactive = tx.read_objects(k)[0]
    assert tx.commit() is True
    for obj in (static, interactive):
        assert type(obj) is cls
        assert is_initial(obj), obj


def test_one_transaction_reads_every_type_at_once(client, key):
    keys = [key(t) for t in TYPES]
    updates = [op for t, k in zip(TYPES, keys) for op in TYPES[t][0](k)]
    assert client.start_static_transaction().update_objects(updates) is True
    res = client.start_static_transaction(min_snapshot=client.last_commit).read_objects(keys)
    assert len(res) == len(keys)
    for t, obj in zip(TYPES, res):
        TYPES[t][1](obj)


def test_objects_are_identified_by_bucket_key_and_type(client, bucket):
    # Same key name, different types or buckets: four distinct objects.
    a = Key(bucket, "same", "COUNTER")
    b = Key(bucket, "same", "FATCOUNTER")
    c = Key(bucket + "-other", "same", "COUNTER")
    d = Key(bucket, "other", "COUNTER")
    st = client.start_static_transaction()
    assert st.update_objects([Counter.IncOp(a, 1), Counter.IncOp(b, 10), Counter.IncOp(c, 100)]) is True
    res = client.start_static_transaction(min_snapshot=client.last_commit).read_objects([a, b, c, d])
    assert [r.value() for r in res] == [1, 10, 100, 0]


def test_keys_and_values_are_arbitrary_bytes(client):
    k = Key(b"\x00bucket\xff", b"key\x00\x01\xfe", "LWWREG")
    value = bytes(range(256))
    assert client.start_static_transaction().update_objects(Register.AssignOp(k, value)) is True
    res = client.start_static_transaction(min_snapshot=client.last_commit).read_objects(k)
    assert res[0].value() == value


# BCOUNTER: the client's Counter.IncOp encodes it (counterop), but its decoder has no case for BCOUNTER, so its
# reads go through read_objects_raw and the counter field of ApbReadObjectResp.


def _bcounter_value(client, k):
    raw = client.start_static_transaction(min_snapshot=client.last_commit).read_objects_raw(k)
    assert raw.objects.success
    assert raw.objects.objects[0].HasField("counter")
    return raw.objects.objects[0].counter.value


def test_bcounter_read_is_a_counter_the_client_cannot_decode(client, key):
    k = key("BCOUNTER")
    with pytest.raises(AntidoteException, match="Unknown type"):
        client.start_static_transaction().read_objects(k)
    assert _bcounter_value(client, k) == 0


def test_bcounter_increments_and_decrements_within_rights_through_the_counter_op(client, key):
    k = key("BCOUNTER")
    assert client.start_static_transaction().update_objects(Counter.IncOp(k, 10)) is True
    assert _bcounter_value(client, k) == 10
    tx = client.start_transaction(min_snapshot=client.last_commit)
    assert tx.update_objects(Counter.IncOp(k, -4)) is True
    assert tx.read_objects_raw(k).objects[0].counter.value == 6
    assert tx.commit() is True
    assert _bcounter_value(client, k) == 6


def test_bcounter_decrement_beyond_rights_fails_with_no_permissions(client, key):
    k = key("BCOUNTER")
    assert client.start_static_transaction().update_objects(Counter.IncOp(k, 3)) is True
    # A static update answers ApbCommitResp{success=false, errorcode=no_permissions}: the client returns False.
    ok = client.start_static_transaction(min_snapshot=client.last_commit).update_objects(Counter.IncOp(k, -5))
    assert ok is False
    # In an interactive transaction the update is refused and the transaction goes on unchanged.
    tx = client.start_transaction(min_snapshot=client.last_commit)
    assert tx.update_objects(Counter.IncOp(k, -5)) is False
    assert tx.update_objects(Counter.IncOp(k, -3)) is True
    assert tx.commit() is True
    assert _bcounter_value(client, k) == 0


def test_bcounter_no_permissions_is_error_code_2_on_the_wire(server, bucket):
    host, port, _ = server
    obj = wire.bound(bucket, "b", "BCOUNTER")
    with wire.RawConnection(host, port) as conn:
        code, msg = conn.request(wire.STATIC_UPDATE_OBJECTS, wire.static_update([wire.counter_update(obj, -1)]))
        assert code == wire.COMMIT_RESP
        assert msg.success is False
        assert msg.errorcode == wire.ERR_NO_PERMISSIONS



def test_counter_op_without_amount_increments_by_one(server, bucket):
    # AntidoteDB's codec reads an ApbCounterUpdate with no `inc` as an increment by 1.
    host, port, _ = server
    obj = wire.bound(bucket, "k", "COUNTER")
    u = wire.pb.ApbUpdateOp()
    u.boundobject.CopyFrom(obj)
    u.operation.counterop.SetInParent()
    with wire.RawConnection(host, port) as conn:
        code, msg = conn.request(wire.STATIC_UPDATE_OBJECTS, wire.static_update([u, u]))
        assert code == wire.COMMIT_RESP and msg.success, msg
        code, msg = conn.request(wire.STATIC_READ_OBJECTS, wire.static_read([obj], timestamp=msg.commit_time))
        assert msg.objects.objects[0].counter.value == 2


def test_reading_one_object_twice_in_one_request(client, key):
    k = key("ORSET")
    assert client.start_static_transaction().update_objects(Set.AddOp(k, b"x")) is True
    res = client.start_static_transaction(min_snapshot=client.last_commit).read_objects([k, k])
    assert [list(r.values()) for r in res] == [[b"x"], [b"x"]]
