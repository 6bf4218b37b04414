"""Several clients at once (threads, one connection each): no increment or element is lost."""

import threading

from antidotedb import AntidoteClient, Counter, Set

from helpers import merge_clocks, read1

THREADS = 8
ROUNDS = 25


def run_threads(server, body):
    """Runs body(client, index) in THREADS threads, each with its own connection; returns their clocks."""
    host, port, _ = server
    errors, clocks = [], [None] * THREADS
    barrier = threading.Barrier(THREADS)

    def worker(i):
        client = AntidoteClient(host, port)
        try:
            barrier.wait(timeout=30)
            body(client, i)
            clocks[i] = client.last_commit
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append((i, repr(e)))
        finally:
            client.close()

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=90)
    assert not any(t.is_alive() for t in threads), "a client thread hung"
    assert not errors, errors
    return merge_clocks(*clocks)


def test_concurrent_static_increments_add_up(server, connect, key):
    k = key("COUNTER")

    def body(client, i):
        for n in range(ROUNDS):
            assert client.start_static_transaction().update_objects(Counter.IncOp(k, i + 1)) is True

    clock = run_threads(server, body)
    expected = ROUNDS * sum(range(1, THREADS + 1))
    assert read1(connect(), k, clock=clock).value() == expected


def test_concurrent_interactive_increments_add_up(server, connect, key):
    k = key("FATCOUNTER")

    def body(client, i):
        for _ in range(ROUNDS // 2):
            tx = client.start_transaction()
            assert tx.read_objects(k)[0].value() >= 0
            assert tx.update_objects(Counter.IncOp(k, 2)) is True
            assert tx.update_objects(Counter.IncOp(k, -1)) is True
            assert tx.commit() is True

    clock = run_threads(server, body)
    assert read1(connect(), k, clock=clock).value() == THREADS * (ROUNDS // 2)


def test_concurrent_set_adds_are_all_kept(server, connect, key):
    k = key("ORSET")

    def body(client, i):
        for n in range(ROUNDS // 2):
            assert client.start_static_transaction().update_objects(Set.AddOp(k, f"{i}-{n}".encode())) is True

    clock = run_threads(server, body)
    expected = sorted(f"{i}-{n}".encode() for i in range(THREADS) for n in range(ROUNDS // 2))
    assert sorted(read1(connect(), k, clock=clock).values()) == expected


def test_many_connections_at_once(server, key):
    host, port, _ = server
    k = key("COUNTER")
    clients = [AntidoteClient(host, port) for _ in range(64)]
    try:
        for c in clients:
            assert c.start_static_transaction().update_objects(Counter.IncOp(k, 1)) is True
        clock = merge_clocks(*[c.last_commit for c in clients])
        for c in clients[::8]:
            assert read1(c, k, clock=clock).value() == 64
    finally:
        for c in clients:
            c.close()
