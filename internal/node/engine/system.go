package engine

import (
	"cmp"
	"encoding/binary"
	"math"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tracecar/tracecar/internal/node/cqlvalue"
	"github.com/tracecar/tracecar/internal/node/storage"
)

// The system keyspaces are real tables in storage, with Cassandra 4.1's names and types.
// system_schema and system_virtual_schema are rewritten after every DDL.

var systemTableDefs = map[string][]string{
	"system": {
		`CREATE TABLE local (key text, bootstrapped text, broadcast_address inet, broadcast_port int,
			cluster_name text, cql_version text, data_center text, gossip_generation int, host_id uuid,
			listen_address inet, listen_port int, native_protocol_version text, partitioner text, rack text,
			release_version text, rpc_address inet, rpc_port int, schema_version uuid, tokens set<varchar>,
			truncated_at map<uuid, blob>, PRIMARY KEY ((key)))`,
		`CREATE TABLE peers (peer inet, data_center text, host_id uuid, preferred_ip inet, rack text,
			release_version text, rpc_address inet, schema_version uuid, tokens set<varchar>, PRIMARY KEY ((peer)))`,
		`CREATE TABLE peers_v2 (peer inet, peer_port int, data_center text, host_id uuid, preferred_ip inet,
			preferred_port int, rack text, release_version text, native_address inet, native_port int,
			schema_version uuid, tokens set<varchar>, PRIMARY KEY ((peer), peer_port))`,
		`CREATE TABLE peer_events_v2 (peer inet, peer_port int, hints_dropped map<uuid, int>, PRIMARY KEY ((peer), peer_port))`,
		`CREATE TABLE size_estimates (keyspace_name text, table_name text, range_start text, range_end text,
			mean_partition_size bigint, partitions_count bigint, PRIMARY KEY ((keyspace_name), table_name, range_start, range_end))`,
		`CREATE TABLE table_estimates (keyspace_name text, table_name text, range_type text, range_start text,
			range_end text, mean_partition_size bigint, partitions_count bigint,
			PRIMARY KEY ((keyspace_name), table_name, range_type, range_start, range_end))`,
		`CREATE TABLE prepared_statements (prepared_id blob, logged_keyspace text, query_string text, PRIMARY KEY ((prepared_id)))`,
		`CREATE TABLE built_views (keyspace_name text, view_name text, status_replicated boolean, PRIMARY KEY ((keyspace_name), view_name))`,
	},
	"system_schema": {
		`CREATE TABLE keyspaces (keyspace_name text, durable_writes boolean, replication frozen<map<text, text>>,
			PRIMARY KEY ((keyspace_name)))`,
		`CREATE TABLE tables (keyspace_name text, table_name text, additional_write_policy text,
			bloom_filter_fp_chance double, caching frozen<map<text, text>>, cdc boolean, comment text,
			compaction frozen<map<text, text>>, compression frozen<map<text, text>>, crc_check_chance double,
			dclocal_read_repair_chance double, default_time_to_live int, extensions frozen<map<text, blob>>,
			flags frozen<set<text>>, gc_grace_seconds int, id uuid, max_index_interval int,
			memtable text, memtable_flush_period_in_ms int, min_index_interval int, read_repair text,
			read_repair_chance double, speculative_retry text, PRIMARY KEY ((keyspace_name), table_name))`,
		`CREATE TABLE columns (keyspace_name text, table_name text, column_name text, clustering_order text,
			column_name_bytes blob, kind text, position int, type text,
			PRIMARY KEY ((keyspace_name), table_name, column_name))`,
		`CREATE TABLE dropped_columns (keyspace_name text, table_name text, column_name text,
			dropped_time timestamp, kind text, type text, PRIMARY KEY ((keyspace_name), table_name, column_name))`,
		`CREATE TABLE triggers (keyspace_name text, table_name text, trigger_name text,
			options frozen<map<text, text>>, PRIMARY KEY ((keyspace_name), table_name, trigger_name))`,
		`CREATE TABLE views (keyspace_name text, view_name text, additional_write_policy text, base_table_id uuid,
			base_table_name text, bloom_filter_fp_chance double, caching frozen<map<text, text>>, cdc boolean,
			comment text, compaction frozen<map<text, text>>, compression frozen<map<text, text>>,
			crc_check_chance double, dclocal_read_repair_chance double, default_time_to_live int,
			extensions frozen<map<text, blob>>, gc_grace_seconds int, id uuid, include_all_columns boolean,
			max_index_interval int, memtable text, memtable_flush_period_in_ms int, min_index_interval int,
			read_repair text, read_repair_chance double, speculative_retry text, where_clause text,
			PRIMARY KEY ((keyspace_name), view_name))`,
		`CREATE TABLE types (keyspace_name text, type_name text, field_names frozen<list<text>>,
			field_types frozen<list<text>>, PRIMARY KEY ((keyspace_name), type_name))`,
		`CREATE TABLE functions (keyspace_name text, function_name text, argument_types frozen<list<text>>,
			argument_names frozen<list<text>>, body text, called_on_null_input boolean, language text,
			return_type text, PRIMARY KEY ((keyspace_name), function_name, argument_types))`,
		`CREATE TABLE aggregates (keyspace_name text, aggregate_name text, argument_types frozen<list<text>>,
			final_func text, initcond text, return_type text, state_func text, state_type text,
			PRIMARY KEY ((keyspace_name), aggregate_name, argument_types))`,
		`CREATE TABLE indexes (keyspace_name text, table_name text, index_name text, kind text,
			options frozen<map<text, text>>, PRIMARY KEY ((keyspace_name), table_name, index_name))`,
	},
	"system_auth": {
		`CREATE TABLE roles (role text, can_login boolean, is_superuser boolean, member_of set<text>,
			salted_hash text, PRIMARY KEY ((role)))`,
		`CREATE TABLE role_members (role text, member text, PRIMARY KEY ((role), member))`,
		`CREATE TABLE role_permissions (role text, resource text, permissions set<text>, PRIMARY KEY ((role), resource))`,
		`CREATE TABLE resource_role_permissons_index (resource text, role text, PRIMARY KEY ((resource), role))`,
		`CREATE TABLE network_permissions (role text, dcs frozen<set<text>>, PRIMARY KEY ((role)))`,
	},
	"system_distributed": {
		`CREATE TABLE repair_history (keyspace_name text, columnfamily_name text, id timeuuid,
			parent_id timeuuid, range_begin text, range_end text, coordinator inet, coordinator_port int,
			participants set<inet>, participants_v2 set<text>, exception_message text,
			exception_stacktrace text, status text, started_at timestamp, finished_at timestamp,
			PRIMARY KEY ((keyspace_name, columnfamily_name), id))`,
		`CREATE TABLE parent_repair_history (parent_id timeuuid, keyspace_name text,
			columnfamily_names set<text>, started_at timestamp, finished_at timestamp, exception_message text,
			exception_stacktrace text, requested_ranges set<text>, successful_ranges set<text>, options map<text, text>,
			PRIMARY KEY (parent_id))`,
		`CREATE TABLE view_build_status (keyspace_name text, view_name text, host_id uuid, status text,
			PRIMARY KEY ((keyspace_name, view_name), host_id))`,
	},
	"system_traces": {
		`CREATE TABLE sessions (session_id uuid, client inet, command text, coordinator inet,
			coordinator_port int, duration int, parameters map<text, text>, request text,
			started_at timestamp, PRIMARY KEY ((session_id))) WITH default_time_to_live = 86400`,
		`CREATE TABLE events (session_id uuid, event_id timeuuid, activity text, source inet, source_elapsed int,
			source_port int, thread text, PRIMARY KEY ((session_id), event_id)) WITH default_time_to_live = 86400`,
	},
	"system_virtual_schema": {
		`CREATE TABLE keyspaces (keyspace_name text, PRIMARY KEY (keyspace_name))`,
		`CREATE TABLE tables (keyspace_name text, table_name text, comment text, PRIMARY KEY (keyspace_name, table_name))`,
		`CREATE TABLE columns (keyspace_name text, table_name text, column_name text, clustering_order text,
			column_name_bytes blob, kind text, position int, type text, PRIMARY KEY (keyspace_name, table_name, column_name))`,
	},
	"system_views": {},
}

const (
	localStrategy  = "org.apache.cassandra.locator.LocalStrategy"
	simpleStrategy = "org.apache.cassandra.locator.SimpleStrategy"
	ntsStrategy    = "org.apache.cassandra.locator.NetworkTopologyStrategy"
)

var systemReplication = map[string]map[string]string{
	"system":             {"class": localStrategy},
	"system_schema":      {"class": localStrategy},
	"system_auth":        {"class": simpleStrategy, "replication_factor": "1"},
	"system_distributed": {"class": simpleStrategy, "replication_factor": "3"},
	"system_traces":      {"class": simpleStrategy, "replication_factor": "2"},
}

// systemKeyspaces builds the built-in keyspaces.
func systemKeyspaces() map[string]*storage.Keyspace {
	out := map[string]*storage.Keyspace{}
	for name, defs := range systemTableDefs {
		virtual := name == "system_virtual_schema" || name == "system_views"
		k := &storage.Keyspace{Name: name, DurableWrites: true, Tables: map[string]*storage.Table{}, System: true, Virtual: virtual,
			Replication: systemReplication[name]}
		if virtual {
			k.Replication = map[string]string{}
		}
		for _, d := range defs {
			t := storage.MustTable(name, d)
			t.Virtual = virtual
			k.Tables[t.Name] = t
		}
		out[name] = k
	}
	return out
}

// rowWriter builds a table's rows for the system keyspaces.
type rowWriter struct {
	t   *storage.Table
	d   *storage.TableData
	ts  int64
	now int64
}

// put writes one row given as column name to serialized value; nil values are skipped.
func (w *rowWriter) put(vals map[string][]byte) {
	t := w.t
	pk := make([][]byte, len(t.Pk))
	for i, c := range t.Pk {
		pk[i] = vals[c.Name]
	}
	var ck [][]byte
	if len(t.Ck) > 0 {
		ck = make([][]byte, len(t.Ck))
		for i, c := range t.Ck {
			ck[i] = vals[c.Name]
			if ck[i] == nil {
				ck[i] = []byte{}
			}
		}
	}
	m := storage.Mutation{Pk: storage.EncodePK(pk), Ts: w.ts, Marker: true, Ck: ck}
	m.Token = storage.Murmur3Token(m.Pk)
	var ops []storage.CellOp
	for _, c := range t.Cells {
		if v, ok := vals[c.Name]; ok && v != nil {
			ops = append(ops, storage.CellOp{Pos: c.Pos, Kind: storage.CellSet, V: v})
		}
	}
	if t.Ttl > 0 {
		m.Ttl, m.Exp = t.Ttl, w.now+int64(t.Ttl)
	}
	_ = w.d.Apply(t, &m, ops, w.now)
}

// refreshSystem rewrites system.local and the schema tables for sc.
func (e *Engine) refreshSystem(sc *storage.Schema) {
	now := e.cfg.Now()
	ts := now.UnixMicro()
	e.refreshTopology(sc, ts, now)
	fresh := func(ks, name string) *rowWriter {
		return &rowWriter{t: sc.Table(ks, name), d: storage.NewTableData(), ts: ts, now: now.Unix()}
	}
	w := schemaRows{keyspaces: fresh("system_schema", "keyspaces"), tables: fresh("system_schema", "tables"),
		columns: fresh("system_schema", "columns"), dropped: fresh("system_schema", "dropped_columns"),
		types: fresh("system_schema", "types"), indexes: fresh("system_schema", "indexes"),
		functions: fresh("system_schema", "functions"), aggregates: fresh("system_schema", "aggregates"),
		views: fresh("system_schema", "views"), vkeyspaces: fresh("system_virtual_schema", "keyspaces"),
		vtables: fresh("system_virtual_schema", "tables"), vcolumns: fresh("system_virtual_schema", "columns")}
	names := make([]string, 0, len(sc.Keyspaces))
	for n := range sc.Keyspaces {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		w.keyspace(sc.Keyspaces[n])
	}
	for _, rw := range []*rowWriter{w.keyspaces, w.tables, w.columns, w.dropped, w.types, w.indexes, w.functions,
		w.aggregates, w.views, w.vkeyspaces, w.vtables, w.vcolumns} {
		rw.t.Data.Store(rw.d)
	}
}

// refreshTopology rewrites system.local, system.peers and system.peers_v2 of every node for
// the schema sc: each node describes itself in local and every other node in the peers.
func (e *Engine) refreshTopology(sc *storage.Schema, ts int64, now time.Time) {
	local, peers, peersV2 := sc.Table("system", "local"), sc.Table("system", "peers"), sc.Table("system", "peers_v2")
	locals := make([]*storage.TableData, len(e.nodes))
	peerss := make([]*storage.TableData, len(e.nodes))
	peersV2s := make([]*storage.TableData, len(e.nodes))
	version := cqlvalue.EncUUID(sc.Version)
	// Nodes that share an IP (--nodes-same-ip) get distinct storage ports, which keep them
	// apart in peers_v2 (keyed by peer and peer_port). system.peers, keyed by the IP alone,
	// can describe only one of them, as in Cassandra.
	storagePort := make([]int32, len(e.nodes))
	for i, n := range e.nodes {
		storagePort[i] = 7000
		for _, m := range e.nodes[:i] {
			if m.RPCAddr.Addr() == n.RPCAddr.Addr() {
				storagePort[i]++
			}
		}
	}
	for i, n := range e.nodes {
		addr := n.RPCAddr.Addr().Unmap()
		lw := &rowWriter{t: local, d: storage.NewTableData(), ts: ts, now: now.Unix()}
		lw.put(map[string][]byte{
			"key": cqlvalue.EncText("local"), "bootstrapped": cqlvalue.EncText("COMPLETED"),
			"broadcast_address": cqlvalue.EncInet(addr), "broadcast_port": cqlvalue.EncInt(storagePort[i]),
			"cluster_name": cqlvalue.EncText(e.cfg.ClusterName), "cql_version": cqlvalue.EncText("3.4.6"),
			"data_center": cqlvalue.EncText(n.DataCenter), "gossip_generation": cqlvalue.EncInt(int32(now.Unix())),
			"host_id": cqlvalue.EncUUID(n.HostID), "listen_address": cqlvalue.EncInet(addr), "listen_port": cqlvalue.EncInt(storagePort[i]),
			"native_protocol_version": cqlvalue.EncText("4"), "partitioner": cqlvalue.EncText("org.apache.cassandra.dht.Murmur3Partitioner"),
			"rack": cqlvalue.EncText(n.Rack), "release_version": cqlvalue.EncText("4.1.0"), "rpc_address": cqlvalue.EncInet(addr),
			"rpc_port": cqlvalue.EncInt(int32(n.RPCAddr.Port())), "schema_version": version,
			"tokens": cqlvalue.EncTextSet(n.Tokens),
		})
		pw := &rowWriter{t: peers, d: storage.NewTableData(), ts: ts, now: now.Unix()}
		p2w := &rowWriter{t: peersV2, d: storage.NewTableData(), ts: ts, now: now.Unix()}
		for j, p := range e.nodes {
			if j == i {
				continue
			}
			paddr := cqlvalue.EncInet(p.RPCAddr.Addr().Unmap())
			pw.put(map[string][]byte{
				"peer": paddr, "data_center": cqlvalue.EncText(p.DataCenter), "host_id": cqlvalue.EncUUID(p.HostID),
				"rack": cqlvalue.EncText(p.Rack), "release_version": cqlvalue.EncText("4.1.0"), "rpc_address": paddr,
				"schema_version": version, "tokens": cqlvalue.EncTextSet(p.Tokens),
			})
			p2w.put(map[string][]byte{
				"peer": paddr, "peer_port": cqlvalue.EncInt(storagePort[j]), "data_center": cqlvalue.EncText(p.DataCenter),
				"host_id": cqlvalue.EncUUID(p.HostID), "rack": cqlvalue.EncText(p.Rack), "release_version": cqlvalue.EncText("4.1.0"),
				"native_address": paddr, "native_port": cqlvalue.EncInt(int32(p.RPCAddr.Port())),
				"schema_version": version, "tokens": cqlvalue.EncTextSet(p.Tokens),
			})
		}
		locals[i], peerss[i], peersV2s[i] = lw.d, pw.d, p2w.d
	}
	for _, x := range []struct {
		t *storage.Table
		d []*storage.TableData
	}{{local, locals}, {peers, peerss}, {peersV2, peersV2s}} {
		x.t.Data.Store(x.d[0])
		if len(x.d) > 1 {
			x.t.PerNode.Store(&x.d)
		}
	}
}

// schemaRows writes the rows of system_schema and system_virtual_schema (the v tables).
type schemaRows struct {
	keyspaces, tables, columns, dropped, types, indexes, functions, aggregates, views *rowWriter
	vkeyspaces, vtables, vcolumns                                                     *rowWriter
}

// keyspace writes keyspace k's rows: its own, its functions', aggregates', types' and
// tables'.
func (w *schemaRows) keyspace(k *storage.Keyspace) {
	if k.Virtual {
		w.vkeyspaces.put(map[string][]byte{"keyspace_name": cqlvalue.EncText(k.Name)})
	} else {
		w.keyspaces.put(map[string][]byte{"keyspace_name": cqlvalue.EncText(k.Name), "durable_writes": cqlvalue.EncBool(k.DurableWrites),
			"replication": cqlvalue.EncTextMap(k.Replication)})
	}
	w.functionsOf(k)
	for _, u := range k.Types {
		fieldTypes := make([]string, len(u.Fields))
		for i, f := range u.Fields {
			fieldTypes[i] = f.Text
		}
		w.types.put(map[string][]byte{"keyspace_name": cqlvalue.EncText(k.Name), "type_name": cqlvalue.EncText(u.Name),
			"field_names": cqlvalue.EncTextList(u.FieldNames), "field_types": cqlvalue.EncTextList(fieldTypes)})
	}
	for _, t := range k.Tables {
		w.table(k, t)
	}
}

// functionsOf writes the rows of keyspace k's functions and aggregates.
func (w *schemaRows) functionsOf(k *storage.Keyspace) {
	for _, f := range k.Functions {
		w.functions.put(map[string][]byte{"keyspace_name": cqlvalue.EncText(k.Name), "function_name": cqlvalue.EncText(f.Name),
			"argument_types": cqlvalue.EncTextList(storage.TypeTexts(f.ArgTypes)), "argument_names": cqlvalue.EncTextList(f.ArgNames),
			"body": cqlvalue.EncText(f.Body), "called_on_null_input": cqlvalue.EncBool(f.CalledOnNull), "language": cqlvalue.EncText(f.Language),
			"return_type": cqlvalue.EncText(f.Ret.Text)})
	}
	for _, a := range k.Aggregates {
		row := map[string][]byte{"keyspace_name": cqlvalue.EncText(k.Name), "aggregate_name": cqlvalue.EncText(a.Name),
			"argument_types": cqlvalue.EncTextList(storage.TypeTexts(a.ArgTypes)), "return_type": cqlvalue.EncText(a.Ret.Text),
			"state_func": cqlvalue.EncText(a.StateFunc), "state_type": cqlvalue.EncText(a.StateType.Text)}
		if a.FinalFunc != "" {
			row["final_func"] = cqlvalue.EncText(a.FinalFunc)
		}
		if a.InitCond != "" {
			row["initcond"] = cqlvalue.EncText(a.InitCond)
		}
		w.aggregates.put(row)
	}
}

// table writes the rows of table (or view) t of keyspace k: its own, its indexes', its
// dropped columns' and its columns'.
func (w *schemaRows) table(k *storage.Keyspace, t *storage.Table) {
	switch {
	case k.Virtual:
		w.vtables.put(map[string][]byte{"keyspace_name": cqlvalue.EncText(k.Name), "table_name": cqlvalue.EncText(t.Name),
			"comment": cqlvalue.EncText(t.Comment)})
	case t.View != nil:
		w.views.put(viewRow(k, t))
	default:
		w.tables.put(tableRow(k, t))
	}
	for _, ix := range t.Indexes {
		w.indexes.put(map[string][]byte{"keyspace_name": cqlvalue.EncText(k.Name), "table_name": cqlvalue.EncText(t.Name),
			"index_name": cqlvalue.EncText(ix.Name), "kind": cqlvalue.EncText("COMPOSITES"),
			"options": cqlvalue.EncTextMap(map[string]string{"target": ix.Target()})})
	}
	for _, dc := range t.DroppedC {
		w.dropped.put(map[string][]byte{"keyspace_name": cqlvalue.EncText(k.Name), "table_name": cqlvalue.EncText(t.Name),
			"column_name": cqlvalue.EncText(dc.Name), "dropped_time": cqlvalue.EncBigint(dc.At / 1000),
			"kind": cqlvalue.EncText(storage.ColKindNames[dc.Kind]), "type": cqlvalue.EncText(dc.Text)})
	}
	cw := w.columns
	if k.Virtual {
		cw = w.vcolumns
	}
	for _, c := range t.Cols {
		cw.put(columnRow(k, t, c))
	}
}

// columnRow is column c's row of system_schema.columns (or system_virtual_schema.columns).
func columnRow(k *storage.Keyspace, t *storage.Table, c *storage.Column) map[string][]byte {
	order := "none"
	if c.Kind == storage.KindClustering {
		order = "asc"
		if c.Desc {
			order = "desc"
		}
	}
	pos := int32(-1)
	if c.Kind == storage.KindPartitionKey || c.Kind == storage.KindClustering {
		pos = int32(c.Pos)
	}
	return map[string][]byte{"keyspace_name": cqlvalue.EncText(k.Name), "table_name": cqlvalue.EncText(t.Name),
		"column_name": cqlvalue.EncText(c.Name), "clustering_order": cqlvalue.EncText(order),
		"column_name_bytes": []byte(c.Name), "kind": cqlvalue.EncText(storage.ColKindNames[c.Kind]),
		"position": cqlvalue.EncInt(pos), "type": cqlvalue.EncText(c.Text)}
}

// viewRow is a view's row of system_schema.views: its options as a table's, and its base.
func viewRow(k *storage.Keyspace, t *storage.Table) map[string][]byte {
	row := tableRow(k, t)
	delete(row, "table_name")
	delete(row, "flags")
	row["view_name"] = cqlvalue.EncText(t.Name)
	row["base_table_name"] = cqlvalue.EncText(t.View.Base)
	row["base_table_id"] = cqlvalue.EncUUID(t.View.BaseID)
	row["include_all_columns"] = cqlvalue.EncBool(t.View.IncludeAll)
	row["where_clause"] = cqlvalue.EncText(t.View.WhereClause())
	return row
}

func tableRow(k *storage.Keyspace, t *storage.Table) map[string][]byte {
	opt := func(name, def string) string {
		if v, ok := t.Options[name]; ok {
			return v.Text
		}
		return def
	}
	float := func(name string, def float64) []byte {
		if v, err := strconv.ParseFloat(opt(name, ""), 64); err == nil {
			return cqlvalue.EncDouble(v)
		}
		return cqlvalue.EncDouble(def)
	}
	integer := func(name string, def int32) []byte {
		if v, err := strconv.ParseInt(opt(name, ""), 10, 32); err == nil {
			return cqlvalue.EncInt(int32(v))
		}
		return cqlvalue.EncInt(def)
	}
	flags := []string{"compound"}
	if t.Counter {
		flags = append(flags, "counter")
	}
	gc := int32(864000)
	if k.System {
		gc = 0
	}
	ext := map[string][]byte{}
	for k, v := range t.OptMapOr("extensions", nil) {
		ext[k] = []byte(v)
	}
	return map[string][]byte{
		"keyspace_name": cqlvalue.EncText(k.Name), "table_name": cqlvalue.EncText(t.Name),
		"additional_write_policy": cqlvalue.EncText(opt("additional_write_policy", "99p")),
		"bloom_filter_fp_chance":  float("bloom_filter_fp_chance", 0.01),
		"caching":                 cqlvalue.EncTextMap(t.OptMapOr("caching", map[string]string{"keys": "ALL", "rows_per_partition": "NONE"})),
		"cdc":                     cqlvalue.EncBool(strings.EqualFold(opt("cdc", "false"), "true")),
		"comment":                 cqlvalue.EncText(t.Comment),
		"compaction": cqlvalue.EncTextMap(t.OptMapOr("compaction", map[string]string{"class": "org.apache.cassandra.db.compaction.SizeTieredCompactionStrategy",
			"max_threshold": "32", "min_threshold": "4"})),
		"compression": cqlvalue.EncTextMap(t.OptMapOr("compression", map[string]string{"chunk_length_in_kb": "16",
			"class": "org.apache.cassandra.io.compress.LZ4Compressor"})),
		"crc_check_chance":            float("crc_check_chance", 1),
		"dclocal_read_repair_chance":  cqlvalue.EncDouble(0),
		"default_time_to_live":        cqlvalue.EncInt(t.Ttl),
		"extensions":                  cqlvalue.EncBlobMap(ext),
		"flags":                       cqlvalue.EncTextSet(flags),
		"gc_grace_seconds":            integer("gc_grace_seconds", gc),
		"id":                          cqlvalue.EncUUID(t.Id),
		"max_index_interval":          integer("max_index_interval", 2048),
		"memtable":                    cqlvalue.EncText(opt("memtable", "default")),
		"memtable_flush_period_in_ms": integer("memtable_flush_period_in_ms", 0),
		"min_index_interval":          integer("min_index_interval", 128),
		"read_repair":                 cqlvalue.EncText(opt("read_repair", "BLOCKING")),
		"read_repair_chance":          cqlvalue.EncDouble(0),
		"speculative_retry":           cqlvalue.EncText(opt("speculative_retry", "99p")),
	}
}

// TraceSession is a finished trace, as stored in system_traces.sessions.
type TraceSession struct {
	ID          [16]byte
	Client      netip.Addr
	Command     string // "QUERY"
	Coordinator netip.Addr
	Duration    time.Duration
	Parameters  map[string]string
	Request     string
	StartedAt   time.Time
	Events      []TraceEvent
}

// TraceEvent is one event of a trace, as stored in system_traces.events.
type TraceEvent struct {
	ID            [16]byte // a timeuuid
	Activity      string
	Source        netip.Addr
	SourceElapsed time.Duration
	Thread        string
}

// WriteTrace stores a finished trace in system_traces.sessions and system_traces.events,
// with Cassandra's one-day TTL. The session row is written last, so that a reader that
// sees its duration sees the events too. It is safe for concurrent use.
//
// A sampled request pays for it, so it writes the rows directly (traceWriter) rather than
// through rowWriter's map of column names: all the session's values go into one buffer,
// and each row's cell operations stay on the stack.
func (e *Engine) WriteTrace(ts TraceSession) {
	sc := e.schema.Load()
	sessions := sc.Table("system_traces", "sessions")
	events := sc.Table("system_traces", "events")
	if sessions == nil || events == nil {
		return
	}
	now := e.cfg.Now()
	params := ts.Parameters
	cmd := cmp.Or(ts.Command, "QUERY")
	size := 96 + len(cmd) + len(ts.Request) // the session row's fixed-size values: 68 bytes at most
	for k, v := range params {
		size += 8 + len(k) + len(v)
	}
	for _, ev := range ts.Events {
		size += 48 + len(ev.Activity) + len(ev.Thread)
	}
	w := traceWriter{buf: make([]byte, 0, size), ts: now.UnixMicro(), now: now.Unix()}
	id := w.bytes(ts.ID[:])
	port := w.int32(int32(e.cfg.RPCAddr.Port()))

	ev := traceColumns(events, "activity", "source", "source_elapsed", "source_port", "thread")
	ed := events.Data.Load()
	for i := range ts.Events {
		x := &ts.Events[i]
		w.put(events, ed, id, w.bytes(x.ID[:]), &ev, [traceCols][]byte{
			w.text(x.Activity), w.inet(x.Source), w.int32(int32(x.SourceElapsed.Microseconds())), port, w.text(x.Thread),
		})
	}
	sn := traceColumns(sessions, "client", "command", "coordinator", "coordinator_port", "duration", "parameters",
		"request", "started_at")
	w.put(sessions, sessions.Data.Load(), id, nil, &sn, [traceCols][]byte{
		w.inet(ts.Client), w.text(cmd), w.inet(ts.Coordinator), port,
		w.int32(int32(min(ts.Duration.Microseconds(), math.MaxInt32))), w.textMap(params), w.text(ts.Request),
		w.int64(ts.StartedAt.UnixMilli()),
	})
}

// traceCols is the most regular columns a system_traces row of WriteTrace's has.
const traceCols = 8

// traceColumns returns the columns of t named, in order; a column the table lacks is nil.
func traceColumns(t *storage.Table, names ...string) [traceCols]*storage.Column {
	var cols [traceCols]*storage.Column
	for i, n := range names {
		cols[i] = t.ByName[n]
	}
	return cols
}

// traceWriter writes the rows of one trace, their values appended to one buffer that the
// rows then own: buf only grows, so that what it handed out stays as it was.
type traceWriter struct {
	buf []byte
	ts  int64 // write timestamp, µs
	now int64 // s
}

func (w *traceWriter) owned(start int) []byte { return w.buf[start:len(w.buf):len(w.buf)] }

func (w *traceWriter) bytes(b []byte) []byte {
	start := len(w.buf)
	w.buf = append(w.buf, b...)
	return w.owned(start)
}

func (w *traceWriter) text(s string) []byte {
	start := len(w.buf)
	w.buf = append(w.buf, s...)
	return w.owned(start)
}

func (w *traceWriter) int32(v int32) []byte {
	start := len(w.buf)
	w.buf = binary.BigEndian.AppendUint32(w.buf, uint32(v))
	return w.owned(start)
}

func (w *traceWriter) int64(v int64) []byte {
	start := len(w.buf)
	w.buf = binary.BigEndian.AppendUint64(w.buf, uint64(v))
	return w.owned(start)
}

// inet is encInet's value, nil for the zero address.
func (w *traceWriter) inet(a netip.Addr) []byte {
	if !a.IsValid() {
		return nil
	}
	start := len(w.buf)
	w.buf = cqlvalue.AppendInet(w.buf, a)
	return w.owned(start)
}

// textMap is encTextMap's value.
func (w *traceWriter) textMap(m map[string]string) []byte {
	start := len(w.buf)
	w.buf = cqlvalue.AppendTextMap(w.buf, m)
	return w.owned(start)
}

// put writes the row of partition key pk and clustering key ck (nil for a table without
// one) with vals[i] in cols[i]; a nil value or column is skipped, as rowWriter.put skips
// nil values.
func (w *traceWriter) put(t *storage.Table, d *storage.TableData, pk, ck []byte, cols *[traceCols]*storage.Column, vals [traceCols][]byte) {
	m := storage.Mutation{Pk: pk, Token: storage.Murmur3Token(pk), Ts: w.ts, Marker: true}
	if len(t.Ck) > 0 {
		m.Ck = [][]byte{ck}
	}
	if t.Ttl > 0 {
		m.Ttl, m.Exp = t.Ttl, w.now+int64(t.Ttl)
	}
	var opsBuf [traceCols]storage.CellOp
	ops := opsBuf[:0]
	for i, c := range cols {
		if c != nil && vals[i] != nil {
			ops = append(ops, storage.CellOp{Pos: c.Pos, Kind: storage.CellSet, V: vals[i]})
		}
	}
	_ = d.Apply(t, &m, ops, w.now)
}
