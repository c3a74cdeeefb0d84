#!/usr/bin/python3
"""Reference vectors for internal/sharding (TestShardVectors).

Routing keys and tokens come from the DataStax Python driver (Debian's python3-cassandra):
its serializers (cassandra.cqltypes), its composite routing key (Statement.routing_key set
to several parts) and its Murmur3 token (cassandra.murmur3.murmur3). Shards come from
ScyllaDB's biased-token-round-robin as docs/dev/protocol-extensions.md states it, in
Python's exact integers: shard = (((token + 2^63) << ignore_msb) mod 2^64) * nr_shards >> 64.

gocql.json holds 200 of scylladb/gocql's published vectors (scylla_tokens_test.go, every
50th of 10,000: token -> shard for 4 shards, 12 bits ignored), copied as numbers.

Regenerate with /usr/bin/python3 internal/sharding/testdata/gen.py > internal/sharding/testdata/vectors.json
"""
import json
import uuid

from cassandra import cqltypes as t
from cassandra.murmur3 import murmur3
from cassandra.query import SimpleStatement

V = 4  # protocol version for the serializers


def routing_key(parts):
    s = SimpleStatement("SELECT 1")
    s.routing_key = parts
    return s.routing_key


def shard(token, nr, msb):
    z = ((token + 2**63) << msb) % 2**64
    return (z * nr) >> 64


keys = [
    ("int 1", [t.Int32Type.serialize(1, V)]),
    ("int -1", [t.Int32Type.serialize(-1, V)]),
    ("int 2147483647", [t.Int32Type.serialize(2147483647, V)]),
    ("bigint 4611686018427387904", [t.LongType.serialize(4611686018427387904, V)]),
    ("text user-17", [t.UTF8Type.serialize("user-17", V)]),
    ("text of 40 bytes", [t.UTF8Type.serialize("the quick brown fox jumps over the lazy", V)]),
    ("uuid", [t.UUIDType.serialize(uuid.UUID("6ba7b810-9dad-11d1-80b4-00c04fd430c8"), V)]),
    ("(int 1, text a)", [t.Int32Type.serialize(1, V), t.UTF8Type.serialize("a", V)]),
    ("(int 1, int 2)", [t.Int32Type.serialize(1, V), t.Int32Type.serialize(2, V)]),
    ("(int 2, int 1)", [t.Int32Type.serialize(2, V), t.Int32Type.serialize(1, V)]),
    ("(text empty, int 0)", [t.UTF8Type.serialize("", V), t.Int32Type.serialize(0, V)]),
    ("(bigint -5, text tenant-ä, int 9)", [t.LongType.serialize(-5, V), t.UTF8Type.serialize("tenant-ä", V), t.Int32Type.serialize(9, V)]),
    ("(uuid, bigint 1, int 3, text x)", [t.UUIDType.serialize(uuid.UUID("01234567-89ab-cdef-0123-456789abcdef"), V),
                                         t.LongType.serialize(1, V), t.Int32Type.serialize(3, V), t.UTF8Type.serialize("x", V)]),
]
for i in range(40):  # composites of (int i, text k<i>), and of three ints
    keys.append((f"(int {i}, text k{i})", [t.Int32Type.serialize(i, V), t.UTF8Type.serialize(f"k{i}", V)]))
    keys.append((f"(int {i}, int {i*i}, int {-i})", [t.Int32Type.serialize(i, V), t.Int32Type.serialize(i * i, V), t.Int32Type.serialize(-i, V)]))

out = []
for name, parts in keys:
    rk = routing_key(parts)
    tok = murmur3(rk)
    out.append({
        "name": name, "parts": [p.hex() for p in parts], "routing_key": rk.hex(), "token": tok,
        "shards": {f"{nr}/{msb}": shard(tok, nr, msb) for nr in (1, 3, 4, 7, 12) for msb in (0, 12)},
    })
# Tokens at the edges of the ring, by shard alone.
edges = [-2**63, -2**63 + 1, -1, 0, 1, 2**63 - 1, -2**62, 2**62, -(2**51), 2**51 - 1, 3074457345618258602]
edge = [{"token": tok, "shards": {f"{nr}/{msb}": shard(tok, nr, msb) for nr in (1, 3, 4, 7, 12) for msb in (0, 12)}} for tok in edges]
print(json.dumps({"generator": "gen.py with the python3-cassandra driver", "keys": out, "edges": edge}, indent=1))
