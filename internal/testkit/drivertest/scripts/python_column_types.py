"""Runs each statement given as an argument with the DataStax Python driver, in keyspace
CQL_KEYSPACE, and prints for the first row of each one that returns rows a line per column:
its name, the type the driver read from the result metadata (its CQL name) and the value
the driver decoded (its repr), separated by '|'.
"""
import os
import sys

from cassandra.cluster import Cluster

kwargs = {"port": int(os.environ.get("CQL_PORT", "9042")), "connect_timeout": 10, "control_connection_timeout": 10}
if os.environ.get("CQL_PROTOCOL"):
    kwargs["protocol_version"] = int(os.environ["CQL_PROTOCOL"])
cluster = Cluster([os.environ.get("CQL_HOST", "127.0.0.1")], **kwargs)
session = cluster.connect(os.environ["CQL_KEYSPACE"])
for q in sys.argv[1:]:
    rs = session.execute(q)
    if not rs.column_names:
        continue
    row = rs.one()
    for i, name in enumerate(rs.column_names):
        print("%s|%s|%r" % (name, rs.column_types[i].typename, row[i]))
cluster.shutdown()
