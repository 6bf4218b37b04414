"""A first transaction against Causet with AntidoteDB's Python client (antidotedb 0.1.3).

Usage: python first_transaction.py [HOST [PORT]]   (default: 127.0.0.1 8087, where `causet start` listens)
"""
import sys

from antidotedb import AntidoteClient, AntidoteException, Counter, Key, Set

host = sys.argv[1] if len(sys.argv) > 1 else "127.0.0.1"
port = int(sys.argv[2]) if len(sys.argv) > 2 else 8087

# An object is named by bucket, key and CRDT type.
visits = Key("shop", "visits", "COUNTER")
tags = Key("shop", "tags", "ORSET")
added = [b"new", b"sale"]

try:
    writer = AntidoteClient(host, port)
except AntidoteException as e:
    sys.exit(f"first_transaction.py: cannot connect to {host}:{port} (is `causet start` running?): {e}")

# One interactive transaction: both updates become visible together at commit, or not at all.
tx = writer.start_transaction()
ok = tx.update_objects([Counter.IncOp(visits, 1), Set.AddOp(tags, added)])
if not (ok and tx.commit()):
    sys.exit("first_transaction.py: the transaction failed")
commit_time = writer.last_commit  # the commit clock, an opaque byte string
writer.close()

# Read both back on a new connection, in a snapshot that includes at least that commit.
reader = AntidoteClient(host, port)
values = reader.start_static_transaction(min_snapshot=commit_time).read_objects([visits, tags])
reader.close()
if values is None:
    sys.exit("first_transaction.py: the read failed")
counter, tag_set = values

count = counter.value()
members = sorted(tag_set.values())  # elements are bytes
names = ", ".join(m.decode(errors="replace") for m in members)
print(f"python: visits = {count}, tags = [{names}] (commit clock {commit_time.hex()})")

# The program may run again against the same server: the counter only grows, the set keeps its elements.
if count < 1 or not set(added) <= set(members):
    sys.exit(f"first_transaction.py: expected visits >= 1 and tags containing {added}, read {count} and {members}")
