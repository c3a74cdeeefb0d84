"""Interoperability suite for the DataStax Python driver (Debian python3-cassandra 3.25).

Runs against a tracecar node or sidecar given by CQL_HOST and CQL_PORT, with compression
CQL_COMPRESSION (none, lz4 or snappy) and optional CQL_USER/CQL_PASS. The driver is left to
negotiate the protocol version, which must come out as CQL_PROTOCOL when it is set (the
driver tries v5 first), and as 3, 4 or 5 otherwise. Prints one line per check and exits
non-zero on the first failure.
"""
import os
import sys
import time
import uuid
import decimal
import datetime
import ipaddress

from cassandra import InvalidRequest
from cassandra.protocol import SyntaxException
from cassandra.auth import PlainTextAuthProvider
from cassandra.cluster import Cluster
from cassandra.concurrent import execute_concurrent_with_args
from cassandra.query import BatchStatement, SimpleStatement
from cassandra.util import SortedSet

host = os.environ.get("CQL_HOST", "127.0.0.1")
port = int(os.environ.get("CQL_PORT", "9042"))
comp = os.environ.get("CQL_COMPRESSION", "none")
ks = os.environ.get("CQL_KEYSPACE", "py_suite")
want_protocol = [int(os.environ["CQL_PROTOCOL"])] if os.environ.get("CQL_PROTOCOL") else [3, 4, 5]


def check(name, cond, detail=""):
    if not cond:
        print("FAIL %s %s" % (name, detail), flush=True)
        sys.exit(1)
    print("ok   %s" % name, flush=True)


kwargs = {"port": port, "compression": {"none": False, "lz4": "lz4", "snappy": "snappy"}[comp],
          "connect_timeout": 10, "control_connection_timeout": 10}
if os.environ.get("CQL_USER"):
    kwargs["auth_provider"] = PlainTextAuthProvider(os.environ["CQL_USER"], os.environ["CQL_PASS"])
if os.environ.get("CQL_TLS_CA"):
    # TLS with the certificate checked against the host (an IP SAN), and a client
    # certificate when one is given (mutual TLS).
    import ssl
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.load_verify_locations(os.environ["CQL_TLS_CA"])
    if os.environ.get("CQL_TLS_CERT"):
        ctx.load_cert_chain(os.environ["CQL_TLS_CERT"], os.environ["CQL_TLS_KEY"])
    kwargs["ssl_context"] = ctx
    kwargs["ssl_options"] = {"server_hostname": host}
cluster = Cluster([host], **kwargs)
session = cluster.connect()
check("connect (protocol v%d, compression %s)" % (cluster.protocol_version, comp), cluster.protocol_version in want_protocol,
      "want protocol %s" % want_protocol)
if os.environ.get("CQL_TLS_CA"):
    sock = cluster.control_connection._connection._socket
    check("connected over TLS (%s)" % sock.version(), isinstance(sock, ssl.SSLSocket), str(type(sock)))
# The driver knows exactly one host, the address it was given: the node reports its own
# address, and a sidecar rewrites the node's into its own.
hosts = ["%s:%d" % (h.endpoint.address, h.endpoint.port) for h in cluster.metadata.all_hosts()]
check("host list", hosts == ["%s:%d" % (host, port)], "hosts %s; want [%s:%d]" % (hosts, host, port))

local = session.execute("SELECT release_version, data_center FROM system.local WHERE key='local'").one()
check("system.local", local.release_version == "4.1.0" and local.data_center == "datacenter1", str(local))

session.execute("DROP KEYSPACE IF EXISTS %s" % ks)
session.execute("CREATE KEYSPACE %s WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}" % ks)
session.set_keyspace(ks)
session.execute("""CREATE TABLE types (
    k int PRIMARY KEY, a ascii, b bigint, bl blob, bo boolean, d date, de decimal, do double,
    f float, i inet, s smallint, t text, ti time, ts timestamp, tu timeuuid, tn tinyint,
    u uuid, v varint, l list<int>, st set<text>, m map<text, int>)""")
session.execute("CREATE TABLE rows (p int, c int, v text, PRIMARY KEY (p, c)) WITH CLUSTERING ORDER BY (c DESC)")
cluster.refresh_schema_metadata()
meta = cluster.metadata.keyspaces[ks]
check("schema metadata lists tables", set(meta.tables) >= {"types", "rows"}, str(list(meta.tables)))
cols = list(meta.tables["rows"].columns)
check("schema metadata column order", cols == ["p", "c", "v"], str(cols))
check("schema metadata clustering order", meta.tables["rows"].clustering_key[0].is_reversed, "")
check("schema metadata types", meta.tables["types"].columns["m"].cql_type == "map<text, int>",
      meta.tables["types"].columns["m"].cql_type)

ins = session.prepare("INSERT INTO types (k, a, b, bl, bo, d, de, do, f, i, s, t, ti, ts, tu, tn, u, v, l, st, m) "
                      "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")
tu = uuid.uuid1()
u = uuid.uuid4()
ts = datetime.datetime(2024, 5, 6, 7, 8, 9, 123000)
row_in = (1, "ascii", 2**40, b"\x00\x01", True, datetime.date(2024, 1, 2), decimal.Decimal("12.345"), 1.5,
          2.5, "10.1.2.3", 7, "text é", datetime.time(1, 2, 3), ts, tu, 3, u, 2**70,
          [3, 1, 2], {"b", "a"}, {"x": 1, "y": 2})
session.execute(ins, row_in)
sel = session.prepare("SELECT * FROM types WHERE k = ?")
r = session.execute(sel, (1,)).one()
check("prepared insert/select scalars", r.a == "ascii" and r.b == 2**40 and r.bl == b"\x00\x01" and r.bo is True
      and r.de == decimal.Decimal("12.345") and r.do == 1.5 and r.f == 2.5 and r.i == "10.1.2.3" and r.s == 7
      and r.t == "text é" and r.tn == 3 and r.u == u and r.tu == tu and r.v == 2**70 and r.ts == ts, str(r))
check("collections", list(r.l) == [3, 1, 2] and set(r.st) == {"a", "b"} and dict(r.m) == {"x": 1, "y": 2}, str(r))
check("date and time", str(r.d) == "2024-01-02" and str(r.ti).startswith("01:02:03"), "%s %s" % (r.d, r.ti))

session.execute("UPDATE types SET l = l + [9], st = st + {'c'}, m['z'] = 26 WHERE k = 1")
r = session.execute(sel, (1,)).one()
check("collection updates", list(r.l) == [3, 1, 2, 9] and set(r.st) == {"a", "b", "c"} and r.m["z"] == 26, str(r))

insr = session.prepare("INSERT INTO rows (p, c, v) VALUES (?, ?, ?)")
execute_concurrent_with_args(session, insr, [(1, i, "v%d" % i) for i in range(10000)], concurrency=64)
stmt = SimpleStatement("SELECT c FROM rows WHERE p = 1", fetch_size=777)
seen = [row.c for row in session.execute(stmt)]
check("paging through 10000 rows", len(seen) == 10000 and seen[0] == 9999 and seen[-1] == 0
      and seen == sorted(seen, reverse=True), "got %d" % len(seen))
rng = session.execute("SELECT c FROM rows WHERE p = 1 AND c >= 10 AND c < 20")
check("clustering range", [row.c for row in rng] == list(range(19, 9, -1)))
inq = session.execute("SELECT p, c FROM rows WHERE p IN (1, 2) AND c = 5")
check("IN on partition key", [(row.p, row.c) for row in inq] == [(1, 5)])

batch = BatchStatement()
for i in range(3):
    batch.add(insr, (2, i, "b%d" % i))
batch.add(SimpleStatement("INSERT INTO rows (p, c, v) VALUES (2, 10, 'plain')"))
session.execute(batch)
n = session.execute("SELECT count(*) FROM rows WHERE p = 2").one()[0]
check("batch", n == 4, "count %d" % n)

# A TTL that expires, checked without assuming how long anything takes: the remaining TTL
# right after the insert, then polling until the row is gone, for at most TTL + 3 s.
session.execute("INSERT INTO rows (p, c, v) VALUES (3, 1, 'ttl') USING TTL 2")
ttl_row = session.execute("SELECT TTL(v) FROM rows WHERE p = 3 AND c = 1").one()
check("ttl set", ttl_row is not None and 0 < ttl_row[0] <= 2, str(ttl_row))
deadline = time.monotonic() + 2 + 3
while session.execute("SELECT v FROM rows WHERE p = 3").one() is not None and time.monotonic() < deadline:
    time.sleep(0.1)
check("ttl expired", session.execute("SELECT v FROM rows WHERE p = 3").one() is None,
      "the row is still there 5 s after an insert with TTL 2")

try:
    session.execute("SELECT * FROM nope")
    check("invalid request error", False)
except InvalidRequest as e:
    check("invalid request error", "nope" in str(e), str(e))
try:
    session.execute("SELEKT * FROM rows")
    check("syntax error", False)
except SyntaxException as e:
    check("syntax error", True)

res = session.execute("SELECT v FROM rows WHERE p = 1 AND c = 42", trace=True)
trace = res.get_query_trace(max_wait_sec=10)
acts = [e.description for e in trace.events]
check("client-requested tracing", trace.duration is not None and len(acts) >= 2, str(acts))
check("trace has coordinator", trace.coordinator is not None, str(trace.coordinator))

session.execute("DROP KEYSPACE %s" % ks)
cluster.shutdown()
print("python suite passed (%s)" % comp, flush=True)
