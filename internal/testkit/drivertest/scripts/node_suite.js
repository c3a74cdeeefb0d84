// Interoperability suite for the DataStax Node.js driver (npm cassandra-driver@4).
// Runs against a tracecar node or sidecar given by CQL_HOST and CQL_PORT, with optional
// CQL_USER/CQL_PASS. Prints one line per check and exits non-zero on the first failure.
'use strict';
const cassandra = require('cassandra-driver');

const host = process.env.CQL_HOST || '127.0.0.1';
const port = parseInt(process.env.CQL_PORT || '9042', 10);
const ks = process.env.CQL_KEYSPACE || 'node_suite';

function check(name, cond, detail) {
  if (!cond) {
    console.log(`FAIL ${name} ${detail || ''}`);
    process.exit(1);
  }
  console.log(`ok   ${name}`);
}

async function main() {
  const opts = {
    contactPoints: [`${host}:${port}`],
    localDataCenter: 'datacenter1',
    protocolOptions: { port },
    socketOptions: { connectTimeout: 10000, readTimeout: 20000 },
  };
  if (process.env.CQL_USER) {
    opts.authProvider = new cassandra.auth.PlainTextAuthProvider(process.env.CQL_USER, process.env.CQL_PASS);
  }
  const client = new cassandra.Client(opts);
  await client.connect();
  const version = client.controlConnection.protocolVersion;
  check(`connect (protocol v${version})`, version === 3 || version === 4, `negotiated protocol v${version}; want 3 or 4`);
  // The driver knows exactly one host, the address it was given: the node reports its own
  // address, and a sidecar rewrites the node's into its own.
  const hosts = client.hosts.keys();
  check('host list', hosts.length === 1 && hosts[0] === `${host}:${port}`, `hosts ${JSON.stringify(hosts)}; want ["${host}:${port}"]`);

  const local = (await client.execute("SELECT release_version, data_center FROM system.local WHERE key='local'")).first();
  check('system.local', local.release_version === '4.1.0' && local.data_center === 'datacenter1', JSON.stringify(local));

  await client.execute(`DROP KEYSPACE IF EXISTS ${ks}`);
  await client.execute(`CREATE KEYSPACE ${ks} WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}`);
  await client.execute(`CREATE TABLE ${ks}.rows (p int, c int, v text, l list<int>, s set<text>, m map<text, int>, PRIMARY KEY (p, c))`);
  await client.execute(`CREATE TABLE ${ks}.kv (k text PRIMARY KEY, b blob, u uuid, ts timestamp, d double, big bigint)`);

  const table = await client.metadata.getTable(ks, 'rows');
  // Cassandra lists system_schema.columns by name, and the driver keeps that order.
  check('schema metadata', table && table.columns.map(c => c.name).sort().join(',') === 'c,l,m,p,s,v',
    table && table.columns.map(c => c.name).join(','));
  check('schema metadata types', table.columnsByName.m.type.code === cassandra.types.dataTypes.map,
    JSON.stringify(table.columnsByName.m.type));
  check('schema metadata keys', table.partitionKeys[0].name === 'p' && table.clusteringKeys[0].name === 'c');

  const u = cassandra.types.Uuid.random();
  const ts = new Date(1700000000123);
  await client.execute(`INSERT INTO ${ks}.kv (k, b, u, ts, d, big) VALUES (?, ?, ?, ?, ?, ?)`,
    ['a', Buffer.from([1, 2, 3]), u, ts, 2.5, cassandra.types.Long.fromString('1099511627776')], { prepare: true });
  const kv = (await client.execute(`SELECT * FROM ${ks}.kv WHERE k = ?`, ['a'], { prepare: true })).first();
  check('prepared insert/select', kv.b.equals(Buffer.from([1, 2, 3])) && kv.u.equals(u) && kv.ts.getTime() === ts.getTime()
    && kv.d === 2.5 && kv.big.toString() === '1099511627776', JSON.stringify(kv));

  await client.execute(`INSERT INTO ${ks}.rows (p, c, v, l, s, m) VALUES (?, ?, ?, ?, ?, ?)`,
    [0, 0, 'x', [3, 1], ['b', 'a'], { k: 7 }], { prepare: true });
  const coll = (await client.execute(`SELECT l, s, m FROM ${ks}.rows WHERE p = 0 AND c = 0`)).first();
  check('collections', coll.l.join(',') === '3,1' && coll.s.join(',') === 'a,b' && coll.m.k === 7, JSON.stringify(coll));

  const ins = `INSERT INTO ${ks}.rows (p, c, v) VALUES (?, ?, ?)`;
  const total = 10000;
  for (let i = 0; i < total; i += 500) {
    const work = [];
    for (let j = i; j < i + 500; j++) work.push(client.execute(ins, [1, j, `v${j}`], { prepare: true }));
    await Promise.all(work);
  }
  let seen = 0;
  let last = -1;
  let ordered = true;
  let pageState;
  do {
    const rs = await client.execute(`SELECT c FROM ${ks}.rows WHERE p = ?`, [1], { prepare: true, fetchSize: 999, pageState });
    for (const row of rs.rows) {
      if (row.c <= last) ordered = false;
      last = row.c;
      seen++;
    }
    pageState = rs.pageState;
  } while (pageState);
  check('paging through 10000 rows', seen === total && ordered, `seen ${seen}`);

  await client.batch([
    { query: ins, params: [2, 1, 'b1'] },
    { query: ins, params: [2, 2, 'b2'] },
    { query: `INSERT INTO ${ks}.rows (p, c, v) VALUES (2, 3, 'b3')` },
  ], { prepare: true });
  const n = (await client.execute(`SELECT count(*) FROM ${ks}.rows WHERE p = 2`)).first().count.toNumber();
  check('batch', n === 3, `count ${n}`);

  // A TTL that expires, checked without assuming how long anything takes: the remaining TTL
  // right after the insert, then polling until the row is gone, for at most TTL + 3 s.
  await client.execute(`INSERT INTO ${ks}.rows (p, c, v) VALUES (3, 1, 'ttl') USING TTL 2`);
  const ttlRow = (await client.execute(`SELECT TTL(v) AS t FROM ${ks}.rows WHERE p = 3 AND c = 1`)).first();
  check('ttl set', ttlRow && ttlRow.t > 0 && ttlRow.t <= 2, JSON.stringify(ttlRow));
  const ttlDeadline = Date.now() + (2 + 3) * 1000;
  let ttlLeft = 1;
  while ((ttlLeft = (await client.execute(`SELECT v FROM ${ks}.rows WHERE p = 3`)).rowLength) > 0 && Date.now() < ttlDeadline) {
    await new Promise(r => setTimeout(r, 100));
  }
  check('ttl expired', ttlLeft === 0, 'the row is still there 5 s after an insert with TTL 2');

  try {
    await client.execute('SELECT * FROM nope.nope');
    check('invalid request error', false);
  } catch (e) {
    check('invalid request error', e.code === cassandra.types.responseErrorCodes.invalid, `${e.code} ${e.message}`);
  }
  try {
    await client.execute('SELEKT 1');
    check('syntax error', false);
  } catch (e) {
    check('syntax error', e.code === cassandra.types.responseErrorCodes.syntaxError, `${e.code} ${e.message}`);
  }

  const traced = await client.execute(`SELECT v FROM ${ks}.rows WHERE p = 1 AND c = 5`, [], { traceQuery: true });
  check('tracing id returned', !!traced.info.traceId);
  let trace;
  for (let i = 0; i < 20 && !(trace && trace.duration); i++) {
    try {
      trace = await client.metadata.getTrace(traced.info.traceId);
    } catch (e) {
      await new Promise(r => setTimeout(r, 200));
    }
  }
  check('client-requested tracing', trace && trace.duration !== null && trace.events.length >= 2, JSON.stringify(trace));

  await client.execute(`DROP KEYSPACE ${ks}`);
  await client.shutdown();
  console.log('node.js suite passed');
}

main().catch(e => {
  console.log(`FAIL unexpected error: ${e && e.stack || e}`);
  process.exit(1);
});
