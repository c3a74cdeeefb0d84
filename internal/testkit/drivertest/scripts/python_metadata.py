"""Creates one object of every kind the node's schema has, with the DataStax Python driver,
and prints what the driver's metadata API (cluster.metadata.keyspaces[k]) makes of them, as
JSON. Target from CQL_HOST, CQL_PORT, CQL_KEYSPACE and CQL_USER/CQL_PASS.

Every statement's SCHEMA_CHANGE makes the driver refresh that object alone, so the metadata
read at the end is what those events gave, without a full refresh.
"""
import json
import os
import sys

from cassandra.auth import PlainTextAuthProvider
from cassandra.cluster import Cluster

host = os.environ.get("CQL_HOST", "127.0.0.1")
port = int(os.environ.get("CQL_PORT", "9042"))
ks = os.environ.get("CQL_KEYSPACE", "meta")
kwargs = {"port": port, "connect_timeout": 10, "control_connection_timeout": 10}
if os.environ.get("CQL_USER"):
    kwargs["auth_provider"] = PlainTextAuthProvider(os.environ["CQL_USER"], os.environ["CQL_PASS"])
cluster = Cluster([host], **kwargs)
s = cluster.connect()
for q in [
    "DROP KEYSPACE IF EXISTS %s" % ks,
    "CREATE KEYSPACE %s WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}" % ks,
    "CREATE TYPE %s.address (street text, zip int)" % ks,
    "CREATE TABLE %s.u (k int PRIMARY KEY, a frozen<address>, l list<text>, v text)" % ks,
    "ALTER TYPE %s.address ADD city text" % ks,
    "ALTER TABLE %s.u ADD n int" % ks,
    "ALTER TABLE %s.u DROP l" % ks,
    "CREATE INDEX ON %s.u (v)" % ks,
    "CREATE INDEX by_n ON %s.u (n)" % ks,
    "CREATE MATERIALIZED VIEW %s.by_v AS SELECT k, v, n FROM %s.u WHERE v IS NOT NULL AND k IS NOT NULL "
    "PRIMARY KEY (v, k) WITH CLUSTERING ORDER BY (k DESC) AND comment = 'u by v'" % (ks, ks),
    "CREATE FUNCTION %s.acc(s int, v int) CALLED ON NULL INPUT RETURNS int LANGUAGE java AS 'return s + v;'" % ks,
    "CREATE FUNCTION %s.fin(s int) RETURNS NULL ON NULL INPUT RETURNS bigint LANGUAGE java AS 'return (long) s;'" % ks,
    "CREATE AGGREGATE %s.total(int) SFUNC acc STYPE int FINALFUNC fin INITCOND 0" % ks,
]:
    s.execute(q)
    print("ok   %s" % q, file=sys.stderr, flush=True)

m = cluster.metadata.keyspaces[ks]
out = {
    "user_types": {n: {"field_names": list(t.field_names), "field_types": list(t.field_types)}
                   for n, t in m.user_types.items()},
    "tables": {n: {"columns": {c: col.cql_type for c, col in t.columns.items()},
                   "indexes": sorted(t.indexes), "views": sorted(t.views)} for n, t in m.tables.items()},
    "indexes": {n: {"table": i.table_name, "kind": i.kind, "options": dict(i.index_options)}
                for n, i in m.indexes.items()},
    "views": {n: {"base_table_name": v.base_table_name, "include_all_columns": v.include_all_columns,
                  "where_clause": v.where_clause, "partition_key": [c.name for c in v.partition_key],
                  "clustering_key": [c.name for c in v.clustering_key],
                  "columns": {c: col.cql_type for c, col in v.columns.items()},
                  "clustering_order": {c: col.is_reversed for c, col in v.columns.items()},
                  "comment": v.options.get("comment")} for n, v in m.views.items()},
    "functions": {n: {"argument_names": list(f.argument_names), "argument_types": list(f.argument_types),
                      "return_type": f.return_type, "language": f.language, "body": f.body,
                      "called_on_null_input": f.called_on_null_input} for n, f in m.functions.items()},
    "aggregates": {n: {"argument_types": list(a.argument_types), "state_func": a.state_func,
                       "state_type": a.state_type, "final_func": a.final_func,
                       "initial_condition": a.initial_condition, "return_type": a.return_type}
                   for n, a in m.aggregates.items()},
}
# The driver's DESCRIBE of the keyspace walks every object.
cql = m.export_as_string()
out["export_has"] = [w for w in ["CREATE TYPE %s.address" % ks, "CREATE TABLE %s.u" % ks, "CREATE INDEX by_n",
                                 "CREATE MATERIALIZED VIEW %s.by_v AS" % ks,
                                 "CREATE FUNCTION %s.acc" % ks, "CREATE AGGREGATE %s.total" % ks] if w in cql]
cluster.shutdown()
print(json.dumps(out, sort_keys=True))
