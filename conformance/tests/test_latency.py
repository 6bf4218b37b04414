"""Request latency as the published Python client sees it.

The `antidotedb` client sends each request in two writes (the 5-byte header, then the message) on a socket with
Nagle's algorithm on, so the message waits until the server acknowledges the header. A server that delays its ACKs
(Linux does, 40 ms, once a connection is interactive) makes every request cost ~40 ms; one that acknowledges at
once (TCP_QUICKACK after each read) answers in well under a millisecond.
"""

import statistics
import time

import pytest
from antidotedb import Counter

import wire


def median_ms(f, n=12):
    samples = []
    for _ in range(n):
        t0 = time.perf_counter()
        f()
        samples.append((time.perf_counter() - t0) * 1000)
    return statistics.median(samples)


def test_raw_single_write_requests_are_fast(server, bucket):
    # The baseline: the same request in one write is not delayed.
    host, port, _ = server
    body = wire.static_read([wire.bound(bucket, "k", "COUNTER")])
    with wire.RawConnection(host, port) as conn:
        assert median_ms(lambda: conn.request(wire.STATIC_READ_OBJECTS, body)) < 20


def test_antidotedb_client_requests_are_not_delayed(client, key):
    k = key("COUNTER")
    assert median_ms(lambda: client.start_static_transaction().read_objects(k)) < 20
    assert median_ms(lambda: client.start_static_transaction().update_objects(Counter.IncOp(k, 1))) < 20
