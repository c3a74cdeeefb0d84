// The DataStax Node.js driver, token-aware over DC-aware round robin, against one sidecar of
// a cluster (CONTACT, host:port): prints one JSON line with the hosts it found and how many
// requests each served.
'use strict';
const cassandra = require('cassandra-driver');

const [host, port] = process.env.CONTACT.split(':');

async function main() {
  const { TokenAwarePolicy, DCAwareRoundRobinPolicy } = cassandra.policies.loadBalancing;
  const client = new cassandra.Client({
    contactPoints: [host],
    localDataCenter: 'datacenter1',
    protocolOptions: { port: parseInt(port, 10) },
    policies: { loadBalancing: new TokenAwarePolicy(new DCAwareRoundRobinPolicy('datacenter1')) },
    socketOptions: { connectTimeout: 10000, readTimeout: 20000 },
  });
  await client.connect();
  await client.execute("CREATE KEYSPACE IF NOT EXISTS jscl WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}");
  await client.execute('CREATE TABLE IF NOT EXISTS jscl.kv (k text PRIMARY KEY, v int)');
  const served = {};
  for (let i = 0; i < 300; i++) {
    const k = `key-${i}`;
    const rs = await client.execute('INSERT INTO jscl.kv (k, v) VALUES (?, ?)', [k, i], { prepare: true });
    const a = rs.info.queriedHost;
    served[a] = (served[a] || 0) + 1;
    const row = (await client.execute('SELECT v FROM jscl.kv WHERE k = ?', [k], { prepare: true })).first();
    if (!row || row.v !== i) {
      throw new Error(`key ${k}: read ${JSON.stringify(row)}, wrote ${i}`);
    }
  }
  const hosts = client.hosts.values().map((h) => h.address).sort();
  console.log(JSON.stringify({ hosts, served }));
  await client.shutdown();
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
