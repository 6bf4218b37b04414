"""Small helpers over the `antidotedb` client, written the way its README uses it (sessions through
`min_snapshot=clt.last_commit`)."""

import re
import struct

from conftest import http_get


def write(client, ops):
    """One static update transaction after the client's last commit; it must succeed."""
    ok = client.start_static_transaction(min_snapshot=client.last_commit).update_objects(ops)
    assert ok is True, f"static update {ops!r} failed"


def read(client, *keys, clock=None):
    """One static read after `clock` (default: the client's last commit)."""
    snapshot = clock if clock is not None else client.last_commit
    res = client.start_static_transaction(min_snapshot=snapshot).read_objects(list(keys))
    assert res is not None, "static read failed"
    return res


def read1(client, key, clock=None):
    return read(client, key, clock=clock)[0]


# Causet's clocks (commit times, start timestamps) are opaque to AntidoteDB clients. Causet documents their layout
# (format byte 0x01, a big-endian u16 count, then one big-endian u64 per DC); tests that need to combine the
# clocks of several clients decode them.

CLOCK_FORMAT = 0x01


def decode_clock(data):
    assert data and data[0] == CLOCK_FORMAT, f"not a Causet clock: {data!r}"
    (n,) = struct.unpack(">H", data[1:3])
    assert len(data) == 3 + 8 * n, f"clock of {n} entries has {len(data)} bytes"
    return list(struct.unpack(f">{n}Q", data[3:]))


def encode_clock(entries):
    return bytes([CLOCK_FORMAT]) + struct.pack(f">H{len(entries)}Q", len(entries), *entries)


def merge_clocks(*clocks):
    """The entrywise maximum of several clocks (None ignored): a snapshot after all of them."""
    decoded = [decode_clock(c) for c in clocks if c]
    if not decoded:
        return None
    n = max(len(d) for d in decoded)
    return encode_clock([max((d[i] if i < len(d) else 0) for d in decoded) for i in range(n)])


def concurrent(pairs, clock):
    """Runs interactive transactions that all start (after `clock`) before any of them updates or commits, so
    none sees another's effects. `pairs` is a list of (client, ops). Returns a clock after every commit."""
    txs = [(c, c.start_transaction(min_snapshot=clock)) for c, _ in pairs]
    for (_, tx), (_, ops) in zip(txs, pairs):
        assert tx.update_objects(ops) is True
    for c, tx in txs:
        assert tx.commit() is True, "a concurrent transaction failed to commit"
    return merge_clocks(*[c.last_commit for c, _ in txs])


def metric(text, name):
    """The value of an unlabelled sample `name` in Prometheus text, or None."""
    m = re.search(rf"^{re.escape(name)}(?:\{{\}})? (\S+)$", text, re.M)
    return float(m.group(1)) if m else None


def metrics(admin_url):
    """The node's /metrics page."""
    status, text = http_get(f"{admin_url}/metrics")
    assert status == 200
    return text
