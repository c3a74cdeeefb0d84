// Package secrets decides what tracecar may write of a request it received: the one
// redaction of named values, HTTP query and form parameters and headers alike, used by
// every writer of an admin request (the audit's ADMIN records, the admin logger). CQL text
// has its own, cql.NormalizeQuery (literals and passwords), which every writer of a CQL
// request uses; CarriesSecret in package cql keeps such requests out of the node's trace.
package secrets

import "strings"

// Redacted replaces a value that Redact withholds.
const Redacted = "<redacted>"

// names are the parts of a name that make its value a secret, lowercase.
var names = []string{"token", "password", "passwd", "secret", "authorization", "cookie", "apikey", "api_key", "api-key"}

// Secret reports whether a parameter or header named name holds a secret: its name
// contains, in any case, token, password, passwd, secret, authorization, cookie or
// api key (apikey, api_key, api-key).
func Secret(name string) bool {
	lower := strings.ToLower(name)
	for _, n := range names {
		if strings.Contains(lower, n) {
			return true
		}
	}
	return false
}

// Redact returns value as tracecar may write it for the parameter or header name: Redacted
// when name is a Secret, else value unchanged. It is safe for concurrent use.
func Redact(name, value string) string {
	if Secret(name) {
		return Redacted
	}
	return value
}
