package secrets

import "testing"

func TestRedact(t *testing.T) {
	for _, tt := range []struct {
		name string
		want string
	}{
		{"token", Redacted},
		{"TOKEN", Redacted},
		{"admin_token", Redacted},
		{"access-Token", Redacted},
		{"password", Redacted},
		{"node_password", Redacted},
		{"PassWord", Redacted},
		{"client_secret", Redacted},
		{"Authorization", Redacted},
		{"Proxy-Authorization", Redacted},
		{"Cookie", Redacted},
		{"X-Api-Key", Redacted},
		{"passwd", Redacted},
		{"enable", "v"},
		{"threshold", "v"},
		{"probability", "v"},
		{"keyspaces", "v"},
		{"Accept", "v"},
		{"", "v"},
	} {
		if got := Redact(tt.name, "v"); got != tt.want {
			t.Errorf("Redact(%q, v) = %q; want %q", tt.name, got, tt.want)
		}
	}
}
