package admin

import (
	"context"
	"errors"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/tracecar/tracecar/audit"
	"github.com/tracecar/tracecar/internal/secrets"
)

// auditedKey marks a request whose ADMIN record its handler wrote itself.
const auditedKey = "tracecar.audited"

// Usernames of ADMIN records: the admin API has no users, only its bearer token.
const (
	// AuditUserToken is the username of a change that carried the API's token.
	AuditUserToken = "token"
	// AuditUserAnonymous is the username of a change without one: the API has no token,
	// or the change was refused for want of it.
	AuditUserAnonymous = "anonymous"
)

// getAudit serves GET /tracecar/audit.
func (s *opsAPI) getAudit(ctx *fasthttp.RequestCtx, _ string) error {
	if _, err := readParams(ctx); err != nil {
		return err
	}
	return writeJSON(ctx, auditOf(s.auditLog.Status()))
}

// setAudit serves POST /tracecar/audit?enable=&categories=&keyspaces=&tables=&exclude_users=:
// every parameter is checked before any is applied; an absent one stays as it is. Turning
// the audit off is recorded before it is off.
func (s *opsAPI) setAudit(ctx *fasthttp.RequestCtx, _ string) error {
	p, err := readParams(ctx, audit.Params...)
	if err != nil {
		return err
	}
	if len(p) == 0 {
		return errorf(http.StatusBadRequest, "no parameter: give any of enable, categories, keyspaces, tables, exclude_users")
	}
	old := *s.auditLog.Settings()
	ns, err := audit.ParseSettings(old, p)
	var pe *audit.ParamError
	if errors.As(err, &pe) {
		return badParam(pe.Param, pe.Value, pe.Want)
	}
	if err != nil {
		return err
	}
	if ns.Enabled && !s.auditLog.HasSinks() {
		return errorf(http.StatusConflict, "the audit log has no sink: start the sidecar with --audit-dir (or another audit sink) to enable it")
	}
	// A change of the audit itself is recorded whatever the categories, so that no change
	// can hide itself (dropping ADMIN from the categories, say): while the audit is on, it
	// is recorded under the settings it changes, before they change (the record of turning
	// the audit off is written while it is still on); when it turns the audit on, after.
	if old.Enabled {
		s.auditChange(ctx, http.StatusOK, true)
		s.auditLog.Set(ns)
	} else {
		s.auditLog.Set(ns)
		if ns.Enabled {
			s.auditChange(ctx, http.StatusOK, true)
		}
	}
	ctx.SetUserValue(auditedKey, true)
	s.audit(ctx, "audit").Interface("old", old.View()).Interface("new", ns.View()).Msg("admin change")
	return writeJSON(ctx, auditOf(s.auditLog.Status()))
}

// auditRequest makes the ADMIN record of a request that may change something (any method
// but GET and HEAD), once it was answered, unless its handler wrote it already. A request
// to no endpoint, or with a method the endpoint lacks, changes nothing and is not
// recorded; one refused for its token or its parameters is, as an error.
func (s *Server) auditRequest(ctx *fasthttp.RequestCtx) {
	if s.auditLog == nil || ctx.IsGet() || ctx.IsHead() || ctx.UserValue(auditedKey) != nil {
		return
	}
	code := ctx.Response.StatusCode()
	if code == http.StatusNotFound || code == http.StatusMethodNotAllowed {
		return
	}
	s.auditChange(ctx, code, false)
}

// auditChange submits the ADMIN record of the change ctx asks for, answered with code;
// always records it whatever the settings (the audit's own disabling).
func (s *core) auditChange(ctx *fasthttp.RequestCtx, code int, always bool) {
	user := AuditUserAnonymous
	if s.cfg.Token != "" && code != http.StatusUnauthorized {
		user = AuditUserToken
	}
	if !always && !s.auditLog.Wants(audit.ADMIN, "", "", user) {
		return
	}
	r := audit.Record{EventTime: time.Now(), Source: ctx.RemoteAddr().String(), Username: user,
		Category: audit.ADMIN.String(), Operation: adminOperation(ctx)}
	if code >= 400 {
		r.Error, r.ErrorCode = true, int32(code)
	}
	c, cancel := context.WithTimeout(context.Background(), auditSubmitTimeout)
	defer cancel()
	if err := s.auditLog.Submit(c, r); err != nil {
		s.log.Warn().Err(err).Str("operation", r.Operation).Msg("audit record of an admin change dropped: a sink is behind or failing")
	}
}

// readableQuery encodes v as a query string sorted by name, escaping only what would be
// ambiguous (&, =, %, +, #, spaces and control bytes), so that "categories=DDL,DML" reads
// as it was meant.
func readableQuery(v url.Values) string {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(v)) {
		for _, val := range v[k] {
			if b.Len() > 0 {
				b.WriteByte('&')
			}
			escapeQuery(&b, k)
			b.WriteByte('=')
			escapeQuery(&b, val)
		}
	}
	return b.String()
}

func escapeQuery(b *strings.Builder, s string) {
	const hex = "0123456789ABCDEF"
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c <= ' ' || c == 0x7f || c == '&' || c == '=' || c == '%' || c == '+' || c == '#':
			b.WriteByte('%')
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&15])
		default:
			b.WriteByte(c)
		}
	}
}

// maxAdminOperation bounds the operation text of an ADMIN record.
const maxAdminOperation = 1024

// adminOperation is an ADMIN record's operation: the method, the path and the parameters,
// from the query string and a form body, as a query string, such as
// "POST /storage_service/slow_query?enable=true&fast=true". A parameter named like a
// secret (token, password: secrets.Redact) has its value withheld.
func adminOperation(ctx *fasthttp.RequestCtx) string {
	v := url.Values{}
	for k, val := range ctx.QueryArgs().All() {
		v.Add(string(k), secrets.Redact(string(k), string(val)))
	}
	if len(ctx.Request.Body()) > 0 {
		for k, val := range ctx.PostArgs().All() {
			v.Add(string(k), secrets.Redact(string(k), string(val)))
		}
	}
	op := string(ctx.Method()) + " " + string(ctx.Path())
	if q := readableQuery(v); q != "" {
		op += "?" + q
	}
	if len(op) > maxAdminOperation {
		op = op[:maxAdminOperation] + "…"
	}
	return op
}
