package grammar

import (
	"strings"

	"github.com/tracecar/tracecar/internal/cql"
)

// parse parses one statement. The returned error is a *cql.Error of code Syntax.
func Parse(query string) (ps *ParsedStmt, err error) {
	p := &parser{lex: lexer{src: query}}
	p.advance()
	defer func() {
		if r := recover(); r != nil {
			se, ok := r.(*syntaxError)
			if !ok {
				panic(r)
			}
			ps, err = nil, &cql.Error{Code: cql.ErrCodeSyntax, Message: se.msg}
		}
	}()
	st := p.statement()
	p.acceptPunct(";")
	if p.tok.kind == tBad {
		p.unexpected()
	}
	if p.tok.kind != tEOF {
		p.failf("extraneous input %s expecting EOF", p.quote(p.tok))
	}
	return &ParsedStmt{Stmt: st, Markers: p.markers}, nil
}

func (p *parser) statement() Statement {
	if p.tok.kind != tIdent {
		p.unexpected()
	}
	switch strings.ToLower(p.tok.text) {
	case "select":
		p.advance()
		return dmlParser{p}.selectStmt()
	case "insert":
		p.advance()
		return dmlParser{p}.insertStmt()
	case "update":
		p.advance()
		return dmlParser{p}.updateStmt()
	case "delete":
		p.advance()
		return dmlParser{p}.deleteStmt()
	case "begin":
		p.advance()
		return dmlParser{p}.batchStmt()
	case "use":
		p.advance()
		return &UseStmt{Keyspace: p.identAny()}
	case "create":
		p.advance()
		return ddlParser{p}.createStmt()
	case "drop":
		p.advance()
		return ddlParser{p}.dropStmt()
	case "truncate":
		p.advance()
		p.acceptKeyword("table")
		return &TruncateStmt{Table: p.tableName()}
	case "alter":
		p.advance()
		return ddlParser{p}.alterStmt()
	case "describe", "desc":
		p.skipRest()
		return &UnsupportedStmt{What: "DESCRIBE statements are not supported by the embedded node (the drivers' metadata APIs describe the schema from system_schema)"}
	case "grant", "revoke":
		revoke := p.isKeyword("revoke")
		p.advance()
		return authParser{p}.grant(revoke)
	case "list":
		p.advance()
		return authParser{p}.list()
	}
	p.unexpected()
	return nil
}
