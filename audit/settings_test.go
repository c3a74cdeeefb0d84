package audit

import (
	"errors"
	"fmt"
	"testing"
)

func TestParseSettings(t *testing.T) {
	base := Settings{Categories: 1 << DDL}
	tests := []struct {
		name  string
		p     map[string]string
		want  string // fmt of the View; "" when bad
		param string // the ParamError's parameter when bad
	}{
		{"enable only", map[string]string{"enable": "TRUE"}, "{true [DDL] [] [] []}", ""},
		{"categories any case", map[string]string{"categories": "dml, query ,Admin"}, "{false [DML QUERY ADMIN] [] [] []}", ""},
		{"lists", map[string]string{"keyspaces": "Shop,\"Big\"", "tables": "shop.Carts,\"Big\".\"T\"", "exclude_users": "a b,c"},
			"{false [DDL] [Big shop] [Big.T shop.carts] [a b c]}", ""},
		{"star clears", map[string]string{"keyspaces": "*"}, "{false [DDL] [] [] []}", ""},
		{"bad category", map[string]string{"enable": "1", "categories": "DML,ALL"}, "", "categories"},
		{"empty category", map[string]string{"categories": "DML,"}, "", "categories"},
		{"table without keyspace", map[string]string{"tables": "carts"}, "", "tables"},
		{"table with empty part", map[string]string{"tables": "shop."}, "", "tables"},
		{"keyspace with a space", map[string]string{"keyspaces": "my shop"}, "", "keyspaces"},
		{"empty user", map[string]string{"exclude_users": "a,,b"}, "", "exclude_users"},
		{"enable maybe", map[string]string{"enable": "yes"}, "", "enable"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := ParseSettings(base, tt.p)
			var pe *ParamError
			if tt.want == "" {
				if !errors.As(err, &pe) || pe.Param != tt.param || pe.Want == "" {
					t.Fatalf("err = %v; want a ParamError on %s", err, tt.param)
				}
				if fmt.Sprint(s.View()) != fmt.Sprint(base.View()) {
					t.Errorf("on error got %v; want base unchanged", s.View())
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			v := s.View()
			if got := fmt.Sprint(v); got != tt.want {
				t.Errorf("got %s; want %s", got, tt.want)
			}
			back, err := v.Settings()
			if err != nil || fmt.Sprint(back.View()) != fmt.Sprint(v) {
				t.Errorf("View round trip: %v, %v; want %v", back.View(), err, v)
			}
		})
	}
}
