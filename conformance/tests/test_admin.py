"""The admin port (/status, /metrics, /health) and the server's lifecycle as an operator sees it."""

import json
import signal
import urllib.request

import pytest
from antidotedb import AntidoteClient, AntidoteException, Counter, Key, Register
from antidotedb.antidoteclient import InteractiveTransaction

import wire
from conftest import http_get
from helpers import metric, metrics, read1, write


def test_status_is_json(server, client, key):
    _, _, admin = server
    write(client, Counter.IncOp(key("COUNTER"), 1))
    status, body = http_get(f"{admin}/status")
    assert status == 200
    doc = json.loads(body)
    assert isinstance(doc, dict)
    assert doc["partitions"] >= 1
    assert doc["dcs"] == 1
    assert isinstance(doc["stable_snapshot"], list)
    assert isinstance(doc["open_transactions"], int)


def test_health(server):
    _, _, admin = server
    status, body = http_get(f"{admin}/health")
    assert status == 200 and body.strip() == "ok"


def test_metrics_count_committed_transactions(server, client, key):
    _, _, admin = server
    text = metrics(admin)
    # Prometheus' text format 0.0.4 by default: a counter's metadata names its samples.
    assert "# TYPE causet_transactions_committed_total counter" in text
    before = metric(text, "causet_transactions_committed_total")
    assert before is not None, text[:2000]
    k = key("COUNTER")
    for _ in range(3):
        write(client, Counter.IncOp(k, 1))
    tx = client.start_transaction()
    assert tx.update_objects(Counter.IncOp(k, 1)) is True
    assert tx.commit() is True
    after = metric(metrics(admin), "causet_transactions_committed_total")
    assert after >= before + 4


def test_metrics_speak_openmetrics_to_who_asks_for_it(server):
    _, _, admin = server
    request = urllib.request.Request(f"{admin}/metrics", headers={"Accept": "application/openmetrics-text; version=1.0.0"})
    with urllib.request.urlopen(request, timeout=5) as resp:
        assert resp.headers["Content-Type"].startswith("application/openmetrics-text")
        text = resp.read().decode("utf-8")
    assert "# TYPE causet_transactions_committed counter" in text
    assert text.rstrip().endswith("# EOF")
    plain = metrics(admin)
    assert "# EOF" not in plain


def test_metrics_count_started_transactions_and_open_ones(server, client, key):
    _, _, admin = server
    started = metric(metrics(admin), "causet_transactions_started_total")
    tx = client.start_transaction()
    text = metrics(admin)
    assert metric(text, "causet_transactions_started_total") >= started + 1
    assert metric(text, "causet_open_transactions") >= 1
    assert tx.commit() is True


def test_metrics_count_protocol_errors(server):
    host, port, admin = server
    before = metric(metrics(admin), "causet_protocol_errors_total")
    with wire.RawConnection(host, port) as conn:
        code, _ = conn.request(200, b"")
        assert code == wire.ERROR_RESP
    assert metric(metrics(admin), "causet_protocol_errors_total") >= before + 1


def test_metrics_count_connections(server):
    host, port, admin = server
    with wire.RawConnection(host, port) as conn:
        wire.assert_usable(conn)
        assert metric(metrics(admin), "causet_connections") >= 1


def test_server_stops_cleanly_on_sigterm_and_keeps_committed_data(start_server):
    first = start_server()
    clt = AntidoteClient(first.host, first.port)
    k = Key("durable", "k", "LWWREG")
    write(clt, Register.AssignOp(k, b"survives"))
    clock = clt.last_commit
    open_tx = clt.start_transaction()
    assert open_tx.update_objects(Register.AssignOp(k, b"never committed")) is True
    # SIGTERM with a connection and a transaction still open.
    first.process.send_signal(signal.SIGTERM)
    assert first.process.wait(timeout=15) == 0, first.log()[-2000:]
    clt.close()
    again = start_server(data_dir=first.data_dir)
    clt = AntidoteClient(again.host, again.port)
    try:
        assert read1(clt, k).value() == b"survives"
        # A clock from before the restart is still a valid min_snapshot.
        assert read1(clt, k, clock=clock).value() == b"survives"
        # A descriptor from before the restart names no transaction any more.
        with pytest.raises(AntidoteException, match="Antidote error 0: .*transaction"):
            InteractiveTransaction(clt, open_tx.txDescriptor).read_objects(k)
    finally:
        clt.close()


def test_server_recovers_committed_data_after_sigkill(start_server):
    first = start_server()
    clt = AntidoteClient(first.host, first.port)
    k = Key("durable", "counter", "COUNTER")
    for _ in range(5):
        write(clt, Counter.IncOp(k, 1))
    clt.close()
    first.kill()
    again = start_server(data_dir=first.data_dir)
    clt = AntidoteClient(again.host, again.port)
    try:
        assert read1(clt, k).value() == 5
    finally:
        clt.close()
