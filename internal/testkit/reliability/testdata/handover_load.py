"""A steady load through a sidecar while it is replaced, with the DataStax Python driver.

CQL_HOST, CQL_PORT: the sidecar; RATE: requests a second (prepared writes and reads, open
loop: each has a scheduled start, and its latency runs from that start); COMPRESSION: lz4,
or none (the default). The protocol version is the driver's own choice (v5 through a sidecar
that speaks it). Prints "ready" once the load runs, and on "stop" (a line on stdin) one JSON
line: the counts, the first errors, the protocol version, and every request's [scheduled
start ms, latency ms] since the load began.
"""
import json
import os
import sys
import threading
import time

from cassandra.cluster import Cluster

host = os.environ.get("CQL_HOST", "127.0.0.1")
port = int(os.environ.get("CQL_PORT", "9042"))
rate = int(os.environ.get("RATE", "1000"))

compression = os.environ.get("COMPRESSION", "none")
cluster = Cluster([host], port=port, compression=False if compression == "none" else compression, connect_timeout=10)
session = cluster.connect()
session.execute("CREATE KEYSPACE IF NOT EXISTS ho_py WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
session.execute("CREATE TABLE IF NOT EXISTS ho_py.kv (k int PRIMARY KEY, v text)")
insert = session.prepare("INSERT INTO ho_py.kv (k, v) VALUES (?, ?)")
select = session.prepare("SELECT v FROM ho_py.kv WHERE k = ?")

lock = threading.Lock()
samples, errors = [], []
failed = [0]
stop = threading.Event()
inflight = threading.Semaphore(256)
start = time.monotonic()


def done(at):
    def ok(_):
        lat = time.monotonic() - start - at
        with lock:
            samples.append([round(at * 1000, 3), round(lat * 1000, 3)])
        inflight.release()

    def err(e):
        with lock:
            failed[0] += 1
            if len(errors) < 5:
                errors.append(repr(e))
        inflight.release()

    return ok, err


def run():
    i = 0
    while not stop.is_set():
        at = i / rate
        d = start + at - time.monotonic()
        if d > 0:
            time.sleep(d)
        inflight.acquire()
        if i % 2 == 0:
            f = session.execute_async(insert, (i % 100000, "v"))
        else:
            f = session.execute_async(select, ((i - 1) % 100000,))
        ok, err = done(at)
        f.add_callbacks(ok, err)
        i += 1


t = threading.Thread(target=run)
t.start()
print("ready", flush=True)
for line in sys.stdin:
    if line.strip() == "stop":
        break
stop.set()
t.join()
for _ in range(256):
    inflight.acquire(timeout=15)
with lock:
    print(json.dumps({"ok": len(samples), "failed": failed[0], "errors": errors,
                      "protocol_version": cluster.protocol_version, "samples": samples}), flush=True)
cluster.shutdown()
