"""The audit log's workload for the DataStax Python driver (Debian python3-cassandra 3.25).

Against CQL_HOST:CQL_PORT, a node that requires a login (CQL_USER, CQL_PASS): a login with
CQL_BAD_USER and a wrong password that must fail, then, in keyspace CQL_KEYSPACE, the
statements of each audit category (DDL, DCL, DML with a BATCH, QUERY), with CQL_MARKER as a
literal and as the new role's password. The driver negotiates its protocol (v5 first).
"""
import os
import sys

from cassandra.auth import PlainTextAuthProvider
from cassandra.cluster import Cluster, NoHostAvailable
from cassandra.query import BatchStatement

host = os.environ["CQL_HOST"]
port = int(os.environ["CQL_PORT"])
ks = os.environ["CQL_KEYSPACE"]
marker = os.environ["CQL_MARKER"]

bad = Cluster([host], port=port, connect_timeout=10, control_connection_timeout=10,
              auth_provider=PlainTextAuthProvider(os.environ["CQL_BAD_USER"], "pw-" + marker))
try:
    bad.connect()
    print("FAIL the login with a wrong password succeeded", flush=True)
    sys.exit(1)
except NoHostAvailable:
    print("ok   the wrong password is refused", flush=True)
finally:
    bad.shutdown()

cluster = Cluster([host], port=port, connect_timeout=10, control_connection_timeout=10,
                  auth_provider=PlainTextAuthProvider(os.environ["CQL_USER"], os.environ["CQL_PASS"]))
s = cluster.connect()
print("ok   connected at protocol v%d" % cluster.protocol_version, flush=True)
s.execute("CREATE KEYSPACE %s WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}" % ks)
s.execute("CREATE TABLE %s.t (k int PRIMARY KEY, v text)" % ks)
s.execute("ALTER TABLE %s.t ADD w int" % ks)
s.execute("INSERT INTO %s.t (k, v) VALUES (1, '%s')" % (ks, marker))
ins = s.prepare("INSERT INTO %s.t (k, v) VALUES (?, ?)" % ks)
s.execute(ins, (2, marker))
b = BatchStatement()
b.add("INSERT INTO %s.t (k, v) VALUES (3, '%s')" % (ks, marker))
b.add(ins, (4, marker))
s.execute(b)
rows = list(s.execute("SELECT k, v FROM %s.t WHERE k = 1" % ks))
assert rows and rows[0].v == marker, rows
s.execute("CREATE ROLE %s_role WITH PASSWORD = '%s' AND LOGIN = true" % (ks, marker))
s.execute("GRANT SELECT ON KEYSPACE %s TO %s_role" % (ks, ks))
s.execute("DROP TABLE %s.t" % ks)
s.execute("DROP KEYSPACE %s" % ks)
cluster.shutdown()
print("ok   workload", flush=True)
