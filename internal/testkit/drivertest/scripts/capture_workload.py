"""A user-profile workload through the DataStax Python driver, for the workload capture's
acceptance test (tracecar capture, then loadcheck --workload replay:FILE).

Against CQL_HOST:CQL_PORT it creates keyspace capture_app with two tables, writes ten rows
into each of the hottest partitions, prints READY and waits for a line on standard input
(the test starts the capture then). It then runs WORKLOAD_SECONDS of load, keeping
WORKLOAD_IN_FLIGHT requests in flight:

  - three prepared statements, 70/20/10, over a 10,000-key Zipf population (s = 1.1):
    a 10-row partition read, an INSERT whose bound note is MARKER, and an UPDATE;
  - one unprepared statement (a SELECT with its key as a literal) every 25th request;
  - with WORKLOAD_EXTRAS=1, also a BATCH (a prepared INSERT and an unprepared one) every
    20th request, and a read of a hot partition paged 4 rows at a time (3 pages, the last
    two with a paging state) every 30th.

The driver runs at its default protocol version (v5 for this driver), or at
PROTOCOL_VERSION when it is set. With WORKLOAD_REQUESTS the load is that many requests
rather than WORKLOAD_SECONDS of them: with the fixed seed, two runs send the same requests.

It prints one JSON line with the counts it sent and the protocol version the driver
negotiated, and exits.
"""
import bisect
import json
import os
import random
import sys
import threading
import time

from cassandra.cluster import Cluster
from cassandra.query import BatchStatement, BatchType, SimpleStatement

host = os.environ.get("CQL_HOST", "127.0.0.1")
port = int(os.environ.get("CQL_PORT", "9042"))
seconds = float(os.environ.get("WORKLOAD_SECONDS", "20"))
in_flight = int(os.environ.get("WORKLOAD_IN_FLIGHT", "8"))
marker = os.environ["MARKER"]
requests = int(os.environ.get("WORKLOAD_REQUESTS", "0"))
extras = os.environ.get("WORKLOAD_EXTRAS") == "1"
version = {}
if os.environ.get("PROTOCOL_VERSION"):
    version["protocol_version"] = int(os.environ["PROTOCOL_VERSION"])
KEYS = 10000
HOT = int(os.environ.get("WORKLOAD_PRELOAD_KEYS", "300"))

cluster = Cluster([host], port=port, connect_timeout=10, control_connection_timeout=10, **version)
session = cluster.connect()
session.execute("CREATE KEYSPACE IF NOT EXISTS capture_app WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
session.execute("CREATE TABLE IF NOT EXISTS capture_app.events (user_id int, seq int, kind text, payload text, PRIMARY KEY (user_id, seq))")
session.execute("CREATE TABLE IF NOT EXISTS capture_app.profiles (id int PRIMARY KEY, name text, note text, visits int)")

read = session.prepare("SELECT seq, kind, payload FROM capture_app.events WHERE user_id = ?")
insert = session.prepare("INSERT INTO capture_app.profiles (id, name, note) VALUES (?, ?, ?)")
update = session.prepare("UPDATE capture_app.profiles SET visits = ? WHERE id = ?")
event = session.prepare("INSERT INTO capture_app.events (user_id, seq, kind, payload) VALUES (?, ?, ?, ?)")

# Zipf over 1..KEYS: the CDF of 1/k^s.
weights = [1.0 / (k ** 1.1) for k in range(1, KEYS + 1)]
cdf, acc = [], 0.0
for w in weights:
    acc += w
    cdf.append(acc)
rng = random.Random(7)


def key():
    return bisect.bisect_left(cdf, rng.random() * acc) + 1


# Ten rows in each of the hottest partitions, so that their reads return ten rows.
futures = []
for k in range(1, HOT + 1):
    for seq in range(10):
        futures.append(session.execute_async(event, (k, seq, "view", "p" * 40)))
        if len(futures) >= 64:
            for f in futures:
                f.result()
            futures = []
for f in futures:
    f.result()

print("READY", flush=True)
sys.stdin.readline()

counts = {"read": 0, "insert": 0, "update": 0, "unprepared": 0, "batch": 0, "paged": 0, "pages": 0, "errors": 0}
lock = threading.Lock()
sem = threading.Semaphore(in_flight)
deadline = time.time() + seconds
n = 0


def done(_, name):
    with lock:
        counts[name] += 1
    sem.release()


def failed(exc, name):
    with lock:
        counts["errors"] += 1
    sem.release()


def paged_read(k):
    # A hot partition holds ten rows: three pages of 4, 4 and 2, the last two asked for with
    # the paging state of the one before.
    stmt = SimpleStatement("SELECT seq, kind FROM capture_app.events WHERE user_id = %d" % ((k - 1) % HOT + 1), fetch_size=4)
    result = session.execute(stmt)
    pages = 1
    while result.has_more_pages:
        result.fetch_next_page()
        pages += 1
    with lock:
        counts["paged"] += 1
        counts["pages"] += pages


while (n < requests) if requests else (time.time() < deadline):
    sem.acquire()
    n += 1
    k = key()
    if extras and n % 30 == 0:
        sem.release()
        paged_read(k)
        continue
    if extras and n % 20 == 0:
        b = BatchStatement(batch_type=BatchType.UNLOGGED)
        b.add(insert, (k, "user%d" % k, marker))
        b.add(SimpleStatement("UPDATE capture_app.profiles SET visits = 1 WHERE id = %d" % k))
        name, fut = "batch", session.execute_async(b)
    elif n % 25 == 0:
        name, fut = "unprepared", session.execute_async(SimpleStatement("SELECT name, visits FROM capture_app.profiles WHERE id = %d" % k))
    else:
        r = rng.random()
        if r < 0.7:
            name, fut = "read", session.execute_async(read, (k,))
        elif r < 0.9:
            name, fut = "insert", session.execute_async(insert, (k, "user%d" % k, marker))
        else:
            name, fut = "update", session.execute_async(update, (n, k))
    fut.add_callbacks(done, failed, callback_args=(name,), errback_args=(name,))

for _ in range(in_flight):
    sem.acquire()
counts["protocol_version"] = cluster.protocol_version
print(json.dumps(counts), flush=True)
cluster.shutdown()
