"""The published `antidotedb` client against `causet middleware` (the causal middleware's proxy), over its
in-process store with two local sets 20 ms apart: single-key register operations work, and what the middleware
cannot do (several keys in one transaction, other types) is refused with the reason."""

import socket
import subprocess
import time

import pytest
from antidotedb import AntidoteClient, AntidoteException, Counter, Key, Register

from conftest import causet_binary, port_open


def two_free_ports():
    """A port P with P + 1 free too (the memory store serves local set N on the --listen port + N)."""
    for _ in range(50):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        try:
            with socket.socket() as a, socket.socket() as b:
                a.bind(("127.0.0.1", port))
                b.bind(("127.0.0.1", port + 1))
            return port
        except OSError:
            continue
    pytest.fail("no two consecutive free ports")


@pytest.fixture(scope="module")
def middleware(tmp_path_factory):
    port = two_free_ports()
    log = tmp_path_factory.mktemp("middleware") / "middleware.log"
    with open(log, "wb") as out:
        p = subprocess.Popen(
            [str(causet_binary()), "middleware", "--store", "memory", "--local-sets", "2", "--wan-delay-ms", "20",
             "--listen", f"127.0.0.1:{port}"],
            stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
        )
    try:
        deadline = time.monotonic() + 30
        while not (port_open("127.0.0.1", port) and port_open("127.0.0.1", port + 1)):
            assert p.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.05)
        yield port
    finally:
        p.terminate()
        p.wait(timeout=15)


def reg(key):
    return Key("mw", key, "LWWREG")


def test_single_key_operations_and_replication(middleware):
    here, there = AntidoteClient("127.0.0.1", middleware), AntidoteClient("127.0.0.1", middleware + 1)
    assert here.start_static_transaction().update_objects(Register.AssignOp(reg("k"), b"v1")) is True
    assert here.start_static_transaction().read_objects(reg("k"))[0].value() == b"v1"
    deadline = time.monotonic() + 5
    while there.start_static_transaction().read_objects(reg("k"))[0].value() != b"v1":
        assert time.monotonic() < deadline, "the write never reached the other local set"
        time.sleep(0.01)
    tx = there.start_transaction()
    assert tx.update_objects(Register.AssignOp(reg("k"), b"v2")) is True
    assert tx.read_objects(reg("k"))[0].value() == b"v2"
    assert tx.commit() is True
    assert there.start_static_transaction().read_objects(reg("k"))[0].value() == b"v2"


def test_several_keys_or_other_types_are_refused_with_the_reason(middleware):
    client = AntidoteClient("127.0.0.1", middleware)
    with pytest.raises(AntidoteException, match="not multi-key transactions"):
        client.start_static_transaction().read_objects([reg("a"), reg("b")])
    with pytest.raises(AntidoteException, match="register_lww"):
        client.start_static_transaction().update_objects(Counter.IncOp(Key("mw", "n", "COUNTER"), 1))
    # The connection stays usable.
    assert client.start_static_transaction().read_objects(reg("a"))[0].value() == b""
