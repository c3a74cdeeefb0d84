package storage

import (
	"encoding/hex"
	"fmt"
	"maps"
	"strconv"
	"strings"

	"github.com/tracecar/tracecar/internal/cql"
	"github.com/tracecar/tracecar/internal/node/cqlvalue"
	"github.com/tracecar/tracecar/internal/node/grammar"
)

// optKind is the kind of value a table option takes.
type optKind uint8

const (
	optText optKind = iota
	optInt
	optDouble
	optBool
	optMap
)

// tableOptionKinds are the table options of Cassandra 4.1 (TableParams.Option) with their
// kinds. The node keeps them for system_schema.tables; only default_time_to_live changes
// what it does.
var tableOptionKinds = map[string]optKind{
	"additional_write_policy": optText, "bloom_filter_fp_chance": optDouble, "caching": optMap,
	"cdc": optBool, "comment": optText, "compaction": optMap, "compression": optMap, "memtable": optText,
	"crc_check_chance": optDouble, "default_time_to_live": optInt, "extensions": optMap,
	"gc_grace_seconds": optInt, "max_index_interval": optInt, "memtable_flush_period_in_ms": optInt,
	"min_index_interval": optInt, "read_repair": optText, "speculative_retry": optText,
}

func syntaxf(format string, args ...any) *cql.Error {
	return &cql.Error{Code: cql.ErrCodeSyntax, Message: fmt.Sprintf(format, args...)}
}

func Configf(format string, args ...any) *cql.Error {
	return &cql.Error{Code: cql.ErrCodeConfig, Message: fmt.Sprintf(format, args...)}
}

// setOptions validates and applies WITH options, over the table's current ones.
func (t *Table) SetOptions(opts map[string]grammar.OptValue, create bool) error {
	next := maps.Clone(t.Options)
	if next == nil {
		next = map[string]grammar.OptValue{}
	}
	for name, v := range opts {
		kind, ok := tableOptionKinds[name]
		if !ok {
			if name == "id" && create {
				u, err := hex.DecodeString(strings.ReplaceAll(v.Text, "-", ""))
				if err != nil || len(u) != 16 {
					return Configf("Invalid table id %s", v.Text)
				}
				t.Id, t.IdGiven = [16]byte(u), true
				continue
			}
			return syntaxf("Unknown property '%s'", name)
		}
		if (kind == optMap) != (v.M != nil) {
			if kind == optMap {
				return syntaxf("Invalid value for property '%s'. It should be a map.", name)
			}
			return syntaxf("Invalid value for property '%s'. It should be a string", name)
		}
		switch kind {
		case optInt:
			n, err := strconv.ParseInt(v.Text, 10, 32)
			if err != nil {
				return syntaxf("Invalid integer value %s for '%s'", v.Text, name)
			}
			if n < 0 {
				return Configf("%s must be greater than or equal to 0 (got %d)", name, n)
			}
			if name == "default_time_to_live" && n > MaxTTL {
				return Configf("%s must be less than or equal to %d (got %d)", name, MaxTTL, n)
			}
		case optDouble:
			f, err := strconv.ParseFloat(v.Text, 64)
			if err != nil {
				return syntaxf("Invalid double value %s for '%s'", v.Text, name)
			}
			if name == "bloom_filter_fp_chance" && (f <= 0 || f > 1) {
				return Configf("%s must be larger than 0 and less than or equal to 1.0 (got %s)", name, v.Text)
			}
			if name == "crc_check_chance" && (f < 0 || f > 1) {
				return Configf("%s should be between 0.0 and 1.0", name)
			}
		case optBool:
			if !strings.EqualFold(v.Text, "true") && !strings.EqualFold(v.Text, "false") {
				return syntaxf("Invalid boolean value %s for '%s'. Expected values are 'true' or 'false'", v.Text, name)
			}
		}
		next[name] = v
	}
	ttl := int32(0)
	if v, ok := next["default_time_to_live"]; ok {
		n, _ := strconv.ParseInt(v.Text, 10, 32)
		ttl = int32(n)
	}
	if t.Counter && ttl > 0 {
		return cqlvalue.Invalidf("Cannot set default_time_to_live on a table with counters")
	}
	t.Options, t.Ttl = next, ttl
	t.Comment = next["comment"].Text
	return nil
}

// optMapOr returns the map option name with Cassandra's normalization of its class, or def.
func (t *Table) OptMapOr(name string, def map[string]string) map[string]string {
	v, ok := t.Options[name]
	if !ok {
		return def
	}
	m := maps.Clone(v.M)
	switch name {
	case "compaction":
		if c, ok := m["class"]; ok && !strings.Contains(c, ".") {
			m["class"] = "org.apache.cassandra.db.compaction." + c
		}
		for k, d := range map[string]string{"max_threshold": "32", "min_threshold": "4"} {
			if _, ok := m[k]; !ok {
				m[k] = d
			}
		}
	case "compression":
		if c, ok := m["class"]; ok && c != "" && !strings.Contains(c, ".") {
			m["class"] = "org.apache.cassandra.io.compress." + c
		}
		if _, ok := m["chunk_length_in_kb"]; !ok && m["enabled"] != "false" {
			m["chunk_length_in_kb"] = "16"
		}
	case "caching":
		for k, d := range def {
			if _, ok := m[k]; !ok {
				m[k] = d
			}
		}
	}
	return m
}
