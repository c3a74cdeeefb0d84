# The DataStax Python driver with TokenAwarePolicy(DCAwareRoundRobinPolicy()) against a
# cluster of sidecars, driven by the Go test over stdin/stdout, one JSON line per phase:
#   1. connect to CONTACT, report the hosts found and which served a load;
#   2. (after "stopped" on stdin) load until the stopped host is marked down, then a load
#      that must succeed on the others;
#   3. (after "started" on stdin) load until the host serves requests again.
import json
import os
import sys
import time

from cassandra import ConsistencyLevel, OperationTimedOut
from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster, ExecutionProfile
from cassandra.policies import DCAwareRoundRobinPolicy, TokenAwarePolicy

host, port = os.environ["CONTACT"].rsplit(":", 1)
stopped_addr = os.environ["STOPPED"]  # host:port of the sidecar whose node the test stops

profile = ExecutionProfile(
    load_balancing_policy=TokenAwarePolicy(DCAwareRoundRobinPolicy()),
    consistency_level=ConsistencyLevel.ONE,
    request_timeout=10,
)
cluster = Cluster([host], port=int(port), execution_profiles={EXEC_PROFILE_DEFAULT: profile})
session = cluster.connect()
session.execute("CREATE KEYSPACE IF NOT EXISTS pycl WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
session.execute("CREATE TABLE IF NOT EXISTS pycl.kv (k text PRIMARY KEY, v int)")
insert = session.prepare("INSERT INTO pycl.kv (k, v) VALUES (?, ?)")
select = session.prepare("SELECT v FROM pycl.kv WHERE k = ?")


def addr(h):
    return "%s:%d" % (h.endpoint.address, h.endpoint.port)


def stopped_host():
    for h in cluster.metadata.all_hosts():
        if addr(h) == stopped_addr:
            return h
    raise SystemExit("no host %s among %s" % (stopped_addr, [addr(h) for h in cluster.metadata.all_hosts()]))


def load(offset, n, tolerate=False):
    """Writes and reads n keys; returns served-by counts, errors and timeouts."""
    served, errors, timeouts = {}, [], 0
    for i in range(n):
        k = "key-%d" % (offset + i)
        try:
            rs = session.execute(insert, (k, i))
            a = addr(rs.response_future._current_host)
            served[a] = served.get(a, 0) + 1
            row = session.execute(select, (k,)).one()
            if row is None or row.v != i:
                raise AssertionError("key %s: read %r, wrote %d" % (k, row, i))
        except Exception as e:  # noqa: BLE001 - every failure is reported
            if isinstance(e, OperationTimedOut):
                timeouts += 1
            if not tolerate:
                raise
            errors.append("%s: %s" % (type(e).__name__, e))
    return served, errors, timeouts


def say(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def wait_line(want):
    line = sys.stdin.readline().strip()
    if line != want:
        raise SystemExit("expected %r on stdin, got %r" % (want, line))


served, _, _ = load(0, 300)
say({"phase": 1, "hosts": sorted(addr(h) for h in cluster.metadata.all_hosts()), "served": served,
     "protocol": cluster.protocol_version})

wait_line("stopped")
errors, timeouts, off = [], 0, 10000
deadline = time.time() + 30
while stopped_host().is_up:
    if time.time() > deadline:
        raise SystemExit("30 s after the node stopped, the driver still has %s up" % stopped_addr)
    _, e, t = load(off, 20, tolerate=True)
    errors += e
    timeouts += t
    off += 20
served, _, _ = load(20000, 300)
say({"phase": 2, "errors": errors[:5], "error_count": len(errors), "timeouts": timeouts, "served": served})

wait_line("started")
deadline = time.time() + 60
off, served_total = 30000, {}
while served_total.get(stopped_addr, 0) == 0:
    if time.time() > deadline:
        raise SystemExit("60 s after the node started, the driver sends %s nothing (up: %s)" % (stopped_addr, stopped_host().is_up))
    served, _, _ = load(off, 50)
    for a, n in served.items():
        served_total[a] = served_total.get(a, 0) + n
    off += 50
    if served_total.get(stopped_addr, 0) == 0:
        time.sleep(0.1)
say({"phase": 3, "served": served_total, "up": stopped_host().is_up})
cluster.shutdown()
