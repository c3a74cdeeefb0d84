"""Protocol v5's now_in_seconds (the query-parameters flag 0x100) with the DataStax Python
driver, which has no API for it: QUERY, EXECUTE and BATCH messages of the driver's own
message classes, with the flag and the time appended to their parameters, sent on a
connection the driver opened (and negotiated v5 on), and decoded by it.

Each write is USING TTL 20 at a now_in_seconds N; a read at N + 10 must see TTL(v) = 10,
and the row must be gone for a read at N + 20, and for one at the wall clock (N is long
past). N = 0 is checked too: it is a time like any other. Exits 1 on a failed check.
"""
import os
import sys

from cassandra import ConsistencyLevel
from cassandra.cluster import Cluster
from cassandra.protocol import (_MessageType, ResultMessage, write_byte, write_consistency_level,
                                write_int, write_longstring, write_short, write_string, write_uint,
                                write_value)

NOW_IN_SECONDS = 0x100
VALUES = 0x01

host = os.environ.get("CQL_HOST", "127.0.0.1")
port = int(os.environ.get("CQL_PORT", "9042"))
ks = os.environ.get("CQL_KEYSPACE", "py_now")
kwargs = {"port": port, "connect_timeout": 10, "control_connection_timeout": 10}
if os.environ.get("CQL_COMPRESSION", "none") != "none":
    kwargs["compression"] = os.environ["CQL_COMPRESSION"]


def params(f, values, now):
    """<consistency><flags>[<n><value>...]<now_in_seconds>, as v5 writes them."""
    write_consistency_level(f, ConsistencyLevel.ONE)
    write_uint(f, NOW_IN_SECONDS | (VALUES if values else 0))
    if values:
        write_short(f, len(values))
        for v in values:
            write_value(f, v)
    write_int(f, now)


class NowQuery(_MessageType):
    opcode = 0x07
    name = "QUERY"

    def __init__(self, query, now, values=()):
        self.query, self.now, self.values = query, now, values

    def send_body(self, f, protocol_version):
        write_longstring(f, self.query)
        params(f, self.values, self.now)


class NowExecute(_MessageType):
    opcode = 0x0A
    name = "EXECUTE"

    def __init__(self, prepared, now, values):
        self.prepared, self.now, self.values = prepared, now, values

    def send_body(self, f, protocol_version):
        write_string(f, self.prepared.query_id)
        write_string(f, self.prepared.result_metadata_id)
        params(f, self.values, self.now)


class NowBatch(_MessageType):
    opcode = 0x0D
    name = "BATCH"

    def __init__(self, queries, now):
        self.queries, self.now = queries, now

    def send_body(self, f, protocol_version):
        write_byte(f, 0)  # logged
        write_short(f, len(self.queries))
        for q in self.queries:
            write_byte(f, 0)
            write_longstring(f, q)
            write_short(f, 0)
        write_consistency_level(f, ConsistencyLevel.ONE)
        write_uint(f, NOW_IN_SECONDS)
        write_int(f, self.now)


failed = False


def check(what, got, want):
    global failed
    ok = got == want
    print("%-60s got %-10r want %r%s" % (what, got, want, "" if ok else "  FAIL"), flush=True)
    failed = failed or not ok


cluster = Cluster([host], **kwargs)
session = cluster.connect()
check("negotiated protocol", cluster.protocol_version, 5)
session.execute("DROP KEYSPACE IF EXISTS %s" % ks)
session.execute("CREATE KEYSPACE %s WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}" % ks)
session.execute("CREATE TABLE %s.t (k int PRIMARY KEY, v int)" % ks)

host0 = cluster.metadata.all_hosts()[0]
conn = cluster.connection_factory(host0.endpoint)


def send(msg):
    r = conn.wait_for_response(msg, timeout=10)
    if not isinstance(r, ResultMessage):
        raise RuntimeError("%s: %r" % (msg.name, r))
    return r


def ttl_at(k, now, how):
    q = "SELECT TTL(v) FROM %s.t WHERE k = %d" % (ks, k)
    if how == "execute":
        r = send(NowExecute(read_ps, now, [k.to_bytes(4, "big")]))
    else:
        r = send(NowQuery(q, now))
    rows = list(r.parsed_rows or [])
    return rows[0][0] if rows else None


ins = session.prepare("INSERT INTO %s.t (k, v) VALUES (?, ?) USING TTL 20" % ks)
read_ps = session.prepare("SELECT TTL(v) FROM %s.t WHERE k = ?" % ks)

writes = [
    ("QUERY", 1, 0, lambda: send(NowQuery("INSERT INTO %s.t (k, v) VALUES (1, 1) USING TTL 20" % ks, 0))),
    ("QUERY", 2, 1000000, lambda: send(NowQuery("INSERT INTO %s.t (k, v) VALUES (2, 2) USING TTL 20" % ks, 1000000))),
    ("EXECUTE", 3, 2000000, lambda: send(NowExecute(ins, 2000000, [(3).to_bytes(4, "big"), (3).to_bytes(4, "big")]))),
    ("BATCH", 4, 3000000, lambda: send(NowBatch(["INSERT INTO %s.t (k, v) VALUES (4, 4) USING TTL 20" % ks], 3000000))),
]
for kind, k, now, write in writes:
    write()
    for how in ("query", "execute"):
        check("%s at now %d, TTL(v) read by %s at now + 10" % (kind, now, how), ttl_at(k, now + 10, how), 10)
    check("%s at now %d, read at now + 20" % (kind, now), ttl_at(k, now + 20, "query"), None)
    check("%s at now %d, read at the wall clock" % (kind, now), session.execute(read_ps, [k]).one(), None)

conn.close()
cluster.shutdown()
sys.exit(1 if failed else 0)
