"""CRDT semantics as AntidoteDB's clients see them: sequential effects, resets, and the conflict resolution of each
type when two transactions run concurrently (both start before either commits)."""

import pytest
from antidotedb import AntidoteException, Counter, Flag, Key, Map, MVRegister, Register, Set

import wire
from helpers import concurrent, merge_clocks, read1, write

# Counters ---------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("type_name", ["COUNTER", "FATCOUNTER"])
def test_counter_increments_and_decrements_add_up(client, key, type_name):
    k = key(type_name)
    for n in [5, -3, 10, -1, 0]:
        write(client, Counter.IncOp(k, n))
    write(client, [Counter.IncOp(k, 2), Counter.IncOp(k, 2), Counter.IncOp(k, -1)])
    tx = client.start_transaction(min_snapshot=client.last_commit)
    assert tx.update_objects(Counter.IncOp(k, 100)) is True
    assert tx.update_objects(Counter.IncOp(k, -50)) is True
    assert tx.commit() is True
    assert read1(client, k).value() == 5 - 3 + 10 - 1 + 3 + 50


def test_counter_large_values_and_negative_totals(client, key):
    k = key("COUNTER")
    write(client, Counter.IncOp(k, 2_000_000_000))
    write(client, Counter.IncOp(k, -2_000_000_001))
    assert read1(client, k).value() == -1


def test_counter_beyond_32_bits_reads_as_an_error_not_a_wrapped_value(client, key):
    # ApbGetCounterResp.value is a sint32: a counter outside its range cannot be read, and the server says so
    # rather than sending a truncated number. The connection stays in step.
    k, other = key("COUNTER"), key("COUNTER", "other")
    write(client, [Counter.IncOp(k, 2**31 - 1), Counter.IncOp(other, 1)])
    assert read1(client, k).value() == 2**31 - 1
    write(client, Counter.IncOp(k, 1))
    with pytest.raises(AntidoteException, match="Antidote error 0: .*32"):
        client.start_static_transaction(min_snapshot=client.last_commit).read_objects(k)
    assert read1(client, other).value() == 1
    write(client, Counter.IncOp(k, -2))
    assert read1(client, k).value() == 2**31 - 2


def test_fatcounter_reset_clears_the_increments_it_saw(client, key):
    k = key("FATCOUNTER")
    write(client, [Counter.IncOp(k, 4), Counter.IncOp(k, 6)])
    write(client, Counter.ResetOp(k))
    assert read1(client, k).value() == 0
    write(client, Counter.IncOp(k, 3))
    assert read1(client, k).value() == 3


def test_fatcounter_increment_concurrent_with_reset_survives(connect, key):
    a, b = connect(), connect()
    k = key("FATCOUNTER")
    write(a, Counter.IncOp(k, 10))
    clock = concurrent([(a, Counter.ResetOp(k)), (b, Counter.IncOp(k, 5))], a.last_commit)
    assert read1(a, k, clock=clock).value() == 5


@pytest.mark.parametrize("type_name", ["COUNTER", "LWWREG"])
def test_reset_of_a_type_without_reset_is_refused(client, key, type_name):
    # AntidoteDB's counter_pn and register_lww have no reset operation.
    k = key(type_name)
    initial = Counter.IncOp(k, 1) if type_name == "COUNTER" else Register.AssignOp(k, b"v")
    write(client, initial)
    reset = Counter.ResetOp(k) if type_name == "COUNTER" else Register.ResetOp(k)
    with pytest.raises(AntidoteException, match="Antidote error 0"):
        client.start_static_transaction(min_snapshot=client.last_commit).update_objects(reset)
    value = read1(client, k).value()
    assert value == (1 if type_name == "COUNTER" else b"v")


# Sets -------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("type_name", ["ORSET", "RWSET"])
def test_set_add_and_remove(client, key, type_name):
    k = key(type_name)
    write(client, Set.AddOp(k, [b"a", b"b"]))
    write(client, Set.AddOp(k, b"c"))
    write(client, Set.AddOp(k, b"a"))  # already there
    assert sorted(read1(client, k).values()) == [b"a", b"b", b"c"]
    write(client, Set.RemoveOp(k, b"b"))
    write(client, Set.RemoveOp(k, b"zzz"))  # never added: no effect
    assert sorted(read1(client, k).values()) == [b"a", b"c"]
    write(client, Set.AddOp(k, b"b"))
    assert sorted(read1(client, k).values()) == [b"a", b"b", b"c"]
    write(client, Set.RemoveOp(k, [b"a", b"b", b"c"]))
    assert list(read1(client, k).values()) == []


@pytest.mark.parametrize("type_name", ["ORSET", "RWSET"])
def test_set_reset_empties_it(client, key, type_name):
    k = key(type_name)
    write(client, Set.AddOp(k, [b"x", b"y", b"z"]))
    write(client, Set.ResetOp(k))
    assert list(read1(client, k).values()) == []
    write(client, Set.AddOp(k, b"w"))
    assert list(read1(client, k).values()) == [b"w"]


@pytest.mark.parametrize("type_name", ["ORSET", "RWSET"])
def test_set_many_elements_in_one_operation(client, key, type_name):
    k = key(type_name)
    elements = [f"e{i:03}".encode() for i in range(200)]
    write(client, Set.AddOp(k, elements))
    write(client, Set.RemoveOp(k, elements[::2]))
    assert sorted(read1(client, k).values()) == elements[1::2]


def test_orset_concurrent_add_and_remove_add_wins(connect, key):
    a, b = connect(), connect()
    k = key("ORSET")
    write(a, Set.AddOp(k, [b"x", b"keep"]))
    clock = concurrent([(a, Set.RemoveOp(k, b"x")), (b, Set.AddOp(k, b"x"))], a.last_commit)
    assert sorted(read1(a, k, clock=clock).values()) == [b"keep", b"x"]


def test_rwset_concurrent_add_and_remove_remove_wins(connect, key):
    a, b = connect(), connect()
    k = key("RWSET")
    write(a, Set.AddOp(k, [b"x", b"keep"]))
    clock = concurrent([(a, Set.RemoveOp(k, b"x")), (b, Set.AddOp(k, b"x"))], a.last_commit)
    assert list(read1(a, k, clock=clock).values()) == [b"keep"]


# Registers --------------------------------------------------------------------------------------------------------


def test_lwwreg_last_assign_wins(client, key):
    k = key("LWWREG")
    for v in [b"one", b"two", b"three"]:
        write(client, Register.AssignOp(k, v))
    assert read1(client, k).value() == b"three"
    write(client, [Register.AssignOp(k, b"four"), Register.AssignOp(k, b"five")])
    assert read1(client, k).value() == b"five"
    write(client, Register.AssignOp(k, b""))
    assert read1(client, k).value() == b""


def test_lwwreg_concurrent_assigns_keep_exactly_one(connect, key):
    a, b = connect(), connect()
    k = key("LWWREG")
    clock = concurrent([(a, Register.AssignOp(k, b"from-a")), (b, Register.AssignOp(k, b"from-b"))], None)
    first = read1(a, k, clock=clock).value()
    assert first in (b"from-a", b"from-b")
    assert read1(b, k, clock=clock).value() == first, "every reader sees the same winner"


def test_mvreg_sequential_assigns_keep_the_latest(client, key):
    k = key("MVREG")
    write(client, MVRegister.AssignOp(k, b"v1"))
    write(client, MVRegister.AssignOp(k, b"v2"))
    assert list(read1(client, k).values()) == [b"v2"]


def test_mvreg_concurrent_assigns_are_all_kept_until_overwritten(connect, key):
    a, b = connect(), connect()
    k = key("MVREG")
    write(a, MVRegister.AssignOp(k, b"base"))
    clock = concurrent([(a, MVRegister.AssignOp(k, b"left")), (b, MVRegister.AssignOp(k, b"right"))], a.last_commit)
    assert sorted(read1(a, k, clock=clock).values()) == [b"left", b"right"]
    # An assign that saw both values (its snapshot covers both commits) replaces them.
    tx = a.start_transaction(min_snapshot=clock)
    assert tx.update_objects(MVRegister.AssignOp(k, b"final")) is True
    assert tx.commit() is True
    assert list(read1(a, k, clock=merge_clocks(clock, a.last_commit)).values()) == [b"final"]


def test_mvreg_reset_empties_it(client, key):
    k = key("MVREG")
    write(client, MVRegister.AssignOp(k, b"v"))
    write(client, MVRegister.ResetOp(k))
    assert list(read1(client, k).values()) == []


# Flags ------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("type_name", ["FLAG_EW", "FLAG_DW"])
def test_flag_enable_disable_and_reset(client, key, type_name):
    k = key(type_name)
    for value in [True, False, True, True, False]:
        write(client, Flag.UpdateOp(k, value))
        assert read1(client, k).value() is value
    write(client, Flag.ResetOp(k))
    assert read1(client, k).value() is False


@pytest.mark.parametrize("type_name, winner", [("FLAG_EW", True), ("FLAG_DW", False)])
def test_flag_concurrent_enable_and_disable(connect, key, type_name, winner):
    a, b = connect(), connect()
    k = key(type_name)
    write(a, Flag.UpdateOp(k, True))
    clock = concurrent([(a, Flag.UpdateOp(k, False)), (b, Flag.UpdateOp(k, True))], a.last_commit)
    assert read1(a, k, clock=clock).value() is winner


# Maps -------------------------------------------------------------------------------------------------------------


def test_gmap_nested_objects_of_every_kind(client, key):
    k = key("GMAP")
    write(
        client,
        Map.UpdateOp(
            k,
            [
                Counter.IncOp(b"count", 2, "COUNTER"),
                Set.AddOp(b"tags", [b"a", b"b"], "ORSET"),
                Register.AssignOp(b"name", b"alice", "LWWREG"),
                MVRegister.AssignOp(b"mv", b"m1", "MVREG"),
                Flag.UpdateOp(b"flag", True, "FLAG_EW"),
                Map.UpdateOp(b"inner", [Counter.IncOp(b"deep", 7, "COUNTER")], "GMAP"),
            ],
        ),
    )
    write(client, Map.UpdateOp(k, [Counter.IncOp(b"count", 3, "COUNTER"), Set.AddOp(b"tags", b"c", "ORSET")]))
    m = read1(client, k)
    assert type(m) is Map
    v = m.values()
    assert set(v) == {b"count", b"tags", b"name", b"mv", b"flag", b"inner"}
    assert type(v[b"count"]) is Counter and v[b"count"].value() == 5
    assert type(v[b"tags"]) is Set and sorted(v[b"tags"].values()) == [b"a", b"b", b"c"]
    assert type(v[b"name"]) is Register and v[b"name"].value() == b"alice"
    assert type(v[b"mv"]) is MVRegister and list(v[b"mv"].values()) == [b"m1"]
    assert type(v[b"flag"]) is Flag and v[b"flag"].value() is True
    inner = v[b"inner"]
    assert type(inner) is Map and inner.values()[b"deep"].value() == 7


def test_gmap_remove_is_refused(client, key):
    k = key("GMAP")
    write(client, Map.UpdateOp(k, [Counter.IncOp(b"c", 1, "COUNTER")]))
    with pytest.raises(AntidoteException, match="Antidote error 0"):
        client.start_static_transaction().update_objects(Map.RemoveOp(k, [Key("", b"c", "COUNTER")]))
    assert read1(client, k).values()[b"c"].value() == 1


def test_map_update_naming_one_nested_key_twice_is_refused(client, key):
    k = key("GMAP")
    op = Map.UpdateOp(k, [Counter.IncOp(b"c", 1, "COUNTER"), Counter.IncOp(b"c", 2, "COUNTER")])
    with pytest.raises(AntidoteException, match="Antidote error 0"):
        client.start_static_transaction().update_objects(op)
    assert read1(client, k).values() == {}


def _rrmap_fill(client, k):
    write(
        client,
        Map.UpdateOp(
            k,
            [
                Counter.IncOp(b"hits", 4, "FATCOUNTER"),
                Set.AddOp(b"tags", [b"a", b"b"], "ORSET"),
                MVRegister.AssignOp(b"owner", b"ann", "MVREG"),
                Flag.UpdateOp(b"on", True, "FLAG_EW"),
            ],
        ),
    )


def test_rrmap_remove_resets_the_entry(client, key):
    k = key("RRMAP")
    _rrmap_fill(client, k)
    assert set(read1(client, k).values()) == {b"hits", b"tags", b"owner", b"on"}
    write(client, Map.RemoveOp(k, [Key("", b"tags", "ORSET"), Key("", b"hits", "FATCOUNTER")]))
    v = read1(client, k).values()
    assert set(v) == {b"owner", b"on"}, "removed entries disappear"
    # Updating a removed key starts again from the type's initial value.
    write(client, Map.UpdateOp(k, [Set.AddOp(b"tags", b"c", "ORSET"), Counter.IncOp(b"hits", 1, "FATCOUNTER")]))
    v = read1(client, k).values()
    assert list(v[b"tags"].values()) == [b"c"]
    assert v[b"hits"].value() == 1


def test_rrmap_remove_of_an_absent_key_is_a_no_op(client, key):
    k = key("RRMAP")
    _rrmap_fill(client, k)
    write(client, Map.RemoveOp(k, [Key("", b"nothing", "ORSET")]))
    assert set(read1(client, k).values()) == {b"hits", b"tags", b"owner", b"on"}


def test_rrmap_entry_reset_to_bottom_disappears(client, key):
    k = key("RRMAP")
    write(client, Map.UpdateOp(k, [Set.AddOp(b"s", b"x", "ORSET"), Counter.IncOp(b"n", 1, "FATCOUNTER")]))
    write(client, Map.UpdateOp(k, [Set.RemoveOp(b"s", b"x", "ORSET")]))
    # An add-wins set emptied by remove is at bottom: the entry reads as absent, as in AntidoteDB.
    assert set(read1(client, k).values()) == {b"n"}


def test_rrmap_reset_removes_every_entry(client, key):
    k = key("RRMAP")
    _rrmap_fill(client, k)
    write(client, Map.ResetOp(k))
    assert read1(client, k).values() == {}


def test_rrmap_nested_map_remove(client, key):
    k = key("RRMAP")
    write(client, Map.UpdateOp(k, [Map.UpdateOp(b"inner", [Set.AddOp(b"s", b"x", "ORSET")], "RRMAP"),
                                   Flag.UpdateOp(b"f", True, "FLAG_DW")]))
    v = read1(client, k).values()
    assert list(v[b"inner"].values()[b"s"].values()) == [b"x"]
    write(client, Map.RemoveOp(k, [Key("", b"inner", "RRMAP")]))
    assert set(read1(client, k).values()) == {b"f"}


def test_rrmap_update_concurrent_with_remove_survives(connect, key):
    a, b = connect(), connect()
    k = key("RRMAP")
    write(a, Map.UpdateOp(k, [Counter.IncOp(b"c", 10, "FATCOUNTER"), Set.AddOp(b"s", b"old", "ORSET")]))
    clock = concurrent(
        [
            (a, Map.RemoveOp(k, [Key("", b"c", "FATCOUNTER"), Key("", b"s", "ORSET")])),
            (b, Map.UpdateOp(k, [Counter.IncOp(b"c", 5, "FATCOUNTER")])),
        ],
        a.last_commit,
    )
    v = read1(a, k, clock=clock).values()
    # The remove resets what it saw (10 and "old"); the concurrent increment survives.
    assert set(v) == {b"c"}
    assert v[b"c"].value() == 5


def _map_batch(bucket, updates, removes):
    """A top-level ApbUpdateOp on an RRMAP whose mapop both updates and removes keys (AntidoteDB's `batch`), which
    the client cannot express: updates are (key, type, inc) FATCOUNTER increments, removes are (key, type)."""
    u = wire.pb.ApbUpdateOp()
    u.boundobject.CopyFrom(wire.bound(bucket, "m", "RRMAP"))
    u.operation.mapop.SetInParent()
    for name, type_name, inc in updates:
        n = u.operation.mapop.updates.add()
        n.key.key, n.key.type = name, wire.pb.CRDT_type.Value(type_name)
        n.update.counterop.inc = inc
    for name, type_name in removes:
        r = u.operation.mapop.removedKeys.add()
        r.key, r.type = name, wire.pb.CRDT_type.Value(type_name)
    return u


def _raw_map_value(conn, bucket, clock):
    code, msg = conn.request(wire.STATIC_READ_OBJECTS, wire.static_read([wire.bound(bucket, "m", "RRMAP")], clock))
    assert code == wire.STATIC_READ_OBJECTS_RESP, msg
    return {e.key.key: e.value.counter.value for e in msg.objects.objects[0].map.entries}


def test_rrmap_batch_of_updates_and_removes(server, bucket):
    host, port, _ = server
    with wire.RawConnection(host, port) as conn:
        code, msg = conn.request(
            wire.STATIC_UPDATE_OBJECTS,
            wire.static_update([_map_batch(bucket, [(b"a", "FATCOUNTER", 5), (b"b", "FATCOUNTER", 7)], [])]),
        )
        assert code == wire.COMMIT_RESP and msg.success, msg
        code, msg = conn.request(
            wire.STATIC_UPDATE_OBJECTS,
            wire.static_update([_map_batch(bucket, [(b"c", "FATCOUNTER", 1)], [(b"a", "FATCOUNTER")])]),
        )
        assert code == wire.COMMIT_RESP and msg.success, msg
        assert _raw_map_value(conn, bucket, msg.commit_time) == {b"b": 7, b"c": 1}


def test_rrmap_batch_naming_one_key_twice_is_refused(server, bucket):
    host, port, _ = server
    with wire.RawConnection(host, port) as conn:
        code, msg = conn.request(
            wire.STATIC_UPDATE_OBJECTS,
            wire.static_update([_map_batch(bucket, [(b"a", "FATCOUNTER", 5)], [])]),
        )
        assert code == wire.COMMIT_RESP and msg.success, msg
        code, msg = conn.request(
            wire.STATIC_UPDATE_OBJECTS,
            wire.static_update([_map_batch(bucket, [(b"a", "FATCOUNTER", 1)], [(b"a", "FATCOUNTER")])]),
        )
        assert code == wire.ERROR_RESP or not msg.success, "the batch was applied"
        wire.assert_usable(conn)


def test_rrmap_with_nested_counter_and_lwwreg_as_in_the_client_tutorial(client, key):
    # antidote-python-client's test_rrmap, step by step.
    k = key("RRMAP")
    tx = client.start_transaction()
    assert tx.update_objects(
        Map.UpdateOp(k, [Counter.IncOp(b"k1", 1, "COUNTER"), Register.AssignOp(b"k2", b"lightkone", "LWWREG")])
    ) is True
    v = tx.read_objects(k)[0].values()
    assert b"k1" in v and b"k2" in v
    assert tx.commit() is True
    st = client.start_static_transaction(min_snapshot=client.last_commit)
    v = st.read_objects(k)[0].values()
    assert v[b"k1"].value() == 1 and v[b"k2"].value() == b"lightkone"
    assert st.update_objects(Map.RemoveOp(k, [Key("", b"k1", "COUNTER")])) is True
    assert read1(client, k).values()[b"k2"].value() == b"lightkone"
