"""Runs a statement suite (a JSON file, see drivertest.Suite) with the DataStax Python driver.

Target from CQL_HOST, CQL_PORT, CQL_COMPRESSION and CQL_USER/CQL_PASS, as python_suite.py.
Prints a JSON list with the outcome of every case, rendered exactly as drivertest's gocql
runner renders it; progress goes to stderr.
"""
import datetime
import decimal
import json
import math
import os
import re
import sys
import time
import types
import uuid

from cassandra import AlreadyExists
from cassandra.auth import PlainTextAuthProvider
from cassandra.cluster import Cluster
from cassandra.query import BatchStatement, SimpleStatement, tuple_factory
from cassandra.util import Date, Duration, SortedSet, Time

host = os.environ.get("CQL_HOST", "127.0.0.1")
port = int(os.environ.get("CQL_PORT", "9042"))
comp = os.environ.get("CQL_COMPRESSION", "none")

with open(sys.argv[1]) as f:
    suite = json.load(f)
ks = suite["keyspace"]

clusters = {}
sessions = {}
prepared = {}


def session(login):
    if login in sessions:
        return sessions[login]
    kwargs = {"port": port, "compression": {"none": False, "lz4": "lz4", "snappy": "snappy"}[comp],
              "connect_timeout": 10, "control_connection_timeout": 10}
    user, password = None, None
    if login:
        user, password = login.split(":", 1)
    elif os.environ.get("CQL_USER"):
        user, password = os.environ["CQL_USER"], os.environ["CQL_PASS"]
    if user is not None:
        kwargs["auth_provider"] = PlainTextAuthProvider(user, password)
    cluster = Cluster([host], **kwargs)
    s = cluster.connect()
    s.row_factory = tuple_factory
    if not sessions:
        s.execute("DROP KEYSPACE IF EXISTS %s" % ks)
        s.execute("CREATE KEYSPACE %s WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}" % ks)
    s.set_keyspace(ks)
    clusters[login] = cluster
    sessions[login] = s
    return s


def render(v):
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "NaN"
        if math.isinf(v):
            return "+Inf" if v > 0 else "-Inf"
        if v.is_integer() and abs(v) < 1e21:
            return str(int(v))
        return repr(v)
    if isinstance(v, decimal.Decimal):
        return str(v)
    if isinstance(v, str):
        return "'" + v + "'"
    if isinstance(v, (bytes, bytearray)):
        return "0x" + bytes(v).hex()
    if isinstance(v, uuid.UUID):
        return str(v)
    if isinstance(v, datetime.datetime):
        return v.strftime("%Y-%m-%dT%H:%M:%S.") + "%03dZ" % (v.microsecond // 1000)
    if isinstance(v, (Date, datetime.date)):
        return str(v)
    if isinstance(v, Time):
        return str(v.nanosecond_time)
    if isinstance(v, Duration):
        return "%dmo%dd%dns" % (v.months, v.days, v.nanoseconds)
    if isinstance(v, list):
        return "[" + ", ".join(render(e) for e in v) + "]"
    if isinstance(v, (set, frozenset, SortedSet)):
        return "{" + ", ".join(sorted(render(e) for e in v)) + "}"
    if hasattr(v, "items"):
        return "{" + ", ".join(sorted(render(k) + ": " + render(e) for k, e in v.items())) + "}"
    if hasattr(v, "_fields"):
        return "{" + ", ".join(f + ": " + render(e) for f, e in zip(v._fields, v)) + "}"
    if isinstance(v, tuple):
        return "(" + ", ".join(render(e) for e in v) + ")"
    return "!" + repr(v)


def render_column(v):
    # A tuple column of nulls only is null, as gocql, which splits tuples, shows it.
    if type(v) is tuple and all(e is None for e in v):
        return "null"
    return render(v)


def py_value(v):
    """The JSON value of a case as the driver binds it: {"$udt": {...}} is an object with
    the fields as attributes, which the driver's UserType serializer reads, and
    {"$duration": [months, days, nanoseconds]} a Duration."""
    if isinstance(v, dict):
        if list(v) == ["$udt"]:
            return types.SimpleNamespace(**{k: py_value(e) for k, e in v["$udt"].items()})
        if list(v) == ["$duration"]:
            return Duration(*v["$duration"])
        return {k: py_value(e) for k, e in v.items()}
    if isinstance(v, list):
        return [py_value(e) for e in v]
    return v


SERVER_ERROR = re.compile(r'code=([0-9a-fA-F]+) \[[^\]]*\] message="(.*)"$', re.S)


def error_outcome(e):
    if isinstance(e, AlreadyExists):
        name = e.keyspace + ("." + e.table if e.table else "")
        return "error 0x2400 already exists: " + name
    code, message = getattr(e, "code", None), getattr(e, "message", None)
    if code is None:
        m = SERVER_ERROR.search(str(e))
        if m:
            code, message = int(m.group(1), 16), m.group(2)
    if code is None:
        return "driver error: " + repr(e)
    return "error 0x%04x %s" % (code, message)


def run_batch(s, case):
    batch = BatchStatement()
    for e in case["batch"]:
        if e.get("values") is not None:
            batch.add(s.prepare(e["q"]), [py_value(v) for v in e["values"]])
        else:
            batch.add(SimpleStatement(e["q"]))
    rs = s.execute(batch)
    if not rs.column_names:
        return "ok"
    return "rows(" + ",".join(rs.column_names) + "): " + " | ".join(
        ",".join(render_column(v) for v in row) for row in rs.current_rows)


def run(case):
    s = session(case.get("as", ""))
    if "batch" in case:
        return run_batch(s, case)
    page = case.get("page", 0)
    values = case.get("values")
    if values is not None:
        key = case.get("reuse") or None
        ps = prepared.get(key) if key else None
        if ps is None:
            ps = s.prepare(case["q"])
            if key:
                prepared[key] = ps
        stmt = ps.bind([py_value(v) for v in values])
        if page:
            stmt.fetch_size = page
    else:
        stmt = SimpleStatement(case["q"], fetch_size=page or None)
    rs = s.execute(stmt)
    rows = list(rs.current_rows)
    pages = 1
    while rs.has_more_pages:
        rs.fetch_next_page()
        pages += 1
        rows += list(rs.current_rows)
    if not rs.column_names:
        return "ok"
    out = "rows(" + ",".join(rs.column_names) + "):"
    if rows:
        out += " " + " | ".join(",".join(render_column(v) for v in row) for row in rows)
    if page:
        out += " pages=%d" % pages
    return out


outcomes = []
for case in suite["cases"]:
    time.sleep(case.get("sleep_ms", 0) / 1000.0)
    try:
        outcome = run(case)
    except Exception as e:  # every failure is an outcome to compare
        outcome = error_outcome(e)
    print("%-40s %s" % (case["name"], outcome), file=sys.stderr, flush=True)
    outcomes.append(outcome)
for c in clusters.values():
    c.shutdown()
print(json.dumps(outcomes))
