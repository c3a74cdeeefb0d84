// The audit log's workload for the DataStax Node.js driver (cassandra-driver 4), as
// audit_workload.py: a login with a wrong password that must fail, then the statements of
// each audit category in CQL_KEYSPACE, with CQL_MARKER as a literal and as a password.
const cassandra = require('cassandra-driver');

const host = process.env.CQL_HOST, port = Number(process.env.CQL_PORT);
const ks = process.env.CQL_KEYSPACE, marker = process.env.CQL_MARKER;

function client(user, pass) {
  return new cassandra.Client({
    contactPoints: [host + ':' + port], localDataCenter: 'datacenter1',
    authProvider: new cassandra.auth.PlainTextAuthProvider(user, pass),
    socketOptions: { connectTimeout: 10000 },
  });
}

async function main() {
  const bad = client(process.env.CQL_BAD_USER, 'pw-' + marker);
  try {
    await bad.connect();
    console.log('FAIL the login with a wrong password succeeded');
    process.exit(1);
  } catch (e) {
    console.log('ok   the wrong password is refused');
  } finally {
    await bad.shutdown();
  }
  const c = client(process.env.CQL_USER, process.env.CQL_PASS);
  await c.connect();
  console.log('ok   connected at protocol v' + c.controlConnection.protocolVersion);
  await c.execute(`CREATE KEYSPACE ${ks} WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}`);
  await c.execute(`CREATE TABLE ${ks}.t (k int PRIMARY KEY, v text)`);
  await c.execute(`ALTER TABLE ${ks}.t ADD w int`);
  await c.execute(`INSERT INTO ${ks}.t (k, v) VALUES (1, '${marker}')`);
  await c.execute(`INSERT INTO ${ks}.t (k, v) VALUES (?, ?)`, [2, marker], { prepare: true });
  await c.batch([
    { query: `INSERT INTO ${ks}.t (k, v) VALUES (3, '${marker}')` },
    { query: `INSERT INTO ${ks}.t (k, v) VALUES (?, ?)`, params: [4, marker] },
  ], { prepare: true });
  const rs = await c.execute(`SELECT k, v FROM ${ks}.t WHERE k = 1`);
  if (rs.rows.length !== 1 || rs.rows[0].v !== marker) throw new Error('select: ' + JSON.stringify(rs.rows));
  await c.execute(`CREATE ROLE ${ks}_role WITH PASSWORD = '${marker}' AND LOGIN = true`);
  await c.execute(`GRANT SELECT ON KEYSPACE ${ks} TO ${ks}_role`);
  await c.execute(`DROP TABLE ${ks}.t`);
  await c.execute(`DROP KEYSPACE ${ks}`);
  await c.shutdown();
  console.log('ok   workload');
}

main().catch((e) => { console.log('FAIL ' + (e.stack || e)); process.exit(1); });
