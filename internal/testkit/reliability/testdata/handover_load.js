// A steady load through a sidecar while it is replaced, with the DataStax Node.js driver.
//
// CQL_HOST, CQL_PORT: the sidecar; RATE: requests a second (prepared writes and reads, open
// loop: each has a scheduled start, and its latency runs from that start). Prints "ready"
// once the load runs, and on "stop" (a line on stdin) one JSON line: the counts, the first
// errors, and every request's [scheduled start ms, latency ms] since the load began.
'use strict';
const cassandra = require('cassandra-driver');
const readline = require('readline');

const host = process.env.CQL_HOST || '127.0.0.1';
const port = parseInt(process.env.CQL_PORT || '9042', 10);
const rate = parseInt(process.env.RATE || '1000', 10);

async function main() {
  const client = new cassandra.Client({contactPoints: [host + ':' + port], localDataCenter: 'datacenter1'});
  await client.connect();
  await client.execute("CREATE KEYSPACE IF NOT EXISTS ho_js WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}");
  await client.execute('CREATE TABLE IF NOT EXISTS ho_js.kv (k int PRIMARY KEY, v text)');
  const samples = [], errors = [];
  let failed = 0, stopped = false, inflight = 0;
  const start = process.hrtime.bigint();
  const now = () => Number(process.hrtime.bigint() - start) / 1e6; // ms
  let i = 0;
  const tick = () => {
    if (stopped) return;
    const due = Math.floor(now() * rate / 1000);
    for (; i <= due; i++) {
      const at = i * 1000 / rate;
      const q = i % 2 === 0
        ? client.execute('INSERT INTO ho_js.kv (k, v) VALUES (?, ?)', [i % 100000, 'v'], {prepare: true})
        : client.execute('SELECT v FROM ho_js.kv WHERE k = ?', [(i - 1) % 100000], {prepare: true});
      inflight++;
      q.then(() => { samples.push([at, now() - at]); }, (e) => {
        failed++;
        if (errors.length < 5) errors.push(String(e));
      }).finally(() => { inflight--; });
    }
    setTimeout(tick, 1);
  };
  tick();
  console.log('ready');
  const rl = readline.createInterface({input: process.stdin});
  for await (const line of rl) {
    if (line.trim() === 'stop') break;
  }
  rl.close();
  stopped = true;
  const t = Date.now();
  while (inflight > 0 && Date.now() - t < 15000) await new Promise((r) => setTimeout(r, 10));
  await client.shutdown();
  // A pipe takes console.log's output asynchronously: exit once the report is written.
  process.stdout.write(JSON.stringify({ok: samples.length, failed, errors, samples}) + '\n', () => process.exit(0));
}
main().catch((e) => { console.error(e); process.exit(1); });
