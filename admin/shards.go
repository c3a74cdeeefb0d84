package admin

import "github.com/tracecar/tracecar/admin/adminapi"

// Shards is the ScyllaDB part of /tracecar/status.
type Shards = adminapi.Shards
