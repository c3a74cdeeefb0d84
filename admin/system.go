package admin

import (
	"net/http"
	"strings"

	"github.com/valyala/fasthttp"
)

// wantLevel describes the level parameter in messages.
var wantLevel = "one of " + strings.Join(Levels, ", ")

// getLoggers serves GET /system/logger: the logger names.
func (s *Server) getLoggers(ctx *fasthttp.RequestCtx, _ string) error {
	names := append([]string{}, s.logs.Names()...)
	names = append(names, s.nodeLoggers()...)
	return writeJSON(ctx, names)
}

// setAllLoggers serves POST /system/logger?level=L.
func (s *Server) setAllLoggers(ctx *fasthttp.RequestCtx, _ string) error {
	level, err := requiredLevel(ctx)
	if err != nil {
		return err
	}
	old := make(map[string]string)
	for _, n := range s.logs.Names() {
		old[n], _ = s.logs.Level(n)
	}
	if err := s.logs.SetAll(level); err != nil {
		return err
	}
	s.audit(ctx, "logger *").
		Interface("old", old).Str("new", level).Msg("admin change")
	return nil
}

// unknownLogger is the error for a logger name that the registry does not have. It is a
// 400, as in Scylla (bad_param_exception "Unknown logger name"), not a 404: 404 means an
// endpoint that does not exist, so a client can tell a typo in the name from an old server.
func (s *Server) unknownLogger(name string) error {
	return errorf(http.StatusBadRequest, "unknown logger %q: loggers are %s", name, strings.Join(s.logs.Names(), ", "))
}

// getLogger serves GET /system/logger/{name}: the level as a JSON string.
func (s *Server) getLogger(ctx *fasthttp.RequestCtx, name string) error {
	if n, ok := nodeName(name); ok {
		return s.getNodeLogger(ctx, name, n)
	}
	l, err := s.logs.Level(name)
	if err != nil {
		return s.unknownLogger(name)
	}
	return writeJSON(ctx, l)
}

// setLogger serves POST /system/logger/{name}?level=L.
func (s *Server) setLogger(ctx *fasthttp.RequestCtx, name string) error {
	if n, ok := nodeName(name); ok {
		return s.setNodeLogger(ctx, name, n)
	}
	old, err := s.logs.Level(name)
	if err != nil {
		return s.unknownLogger(name)
	}
	level, err := requiredLevel(ctx)
	if err != nil {
		return err
	}
	if err := s.logs.SetLevel(name, level); err != nil {
		return err
	}
	s.audit(ctx, "logger "+name).
		Str("old", old).Str("new", level).Msg("admin change")
	return nil
}

// requiredLevel reads the request's only parameter, level, which must be present.
func requiredLevel(ctx *fasthttp.RequestCtx) (string, error) {
	p, err := readParams(ctx, "level")
	if err != nil {
		return "", err
	}
	level, ok, err := p.level("level")
	if err != nil {
		return "", err
	}
	if !ok {
		return "", missing("level", wantLevel)
	}
	return level, nil
}
