package admin

import (
	"net/http"
	"strings"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/tracecar/tracecar/admin/adminapi"
)

// The loggers, ScyllaDB's /system/logger: the sidecar's own, and the node's as node:NAME.

// wantLevel describes the level parameter in messages.
var wantLevel = "one of " + strings.Join(Levels, ", ")

// getLoggers serves GET /system/logger: the logger names.
func (s *scyllaAPI) getLoggers(ctx *fasthttp.RequestCtx, _ string) error {
	names := append([]string{}, s.logs.Names()...)
	names = append(names, s.nodeLoggers()...)
	return writeJSON(ctx, adminapi.Loggers(names))
}

// setAllLoggers serves POST /system/logger?level=L.
func (s *scyllaAPI) setAllLoggers(ctx *fasthttp.RequestCtx, _ string) error {
	level, d, err := requiredLevel(ctx)
	if err != nil {
		return err
	}
	return s.toggle(ctx, "POST /system/logger", d, func() ([]TimerSetting, bool, error) {
		old := make(map[string]string)
		var set []TimerSetting
		for _, n := range s.logs.Names() {
			old[n], _ = s.logs.Level(n)
			set = append(set, TimerSetting{Setting: settingLoggerPrefix + n, RevertTo: old[n], SetTo: level})
		}
		if err := s.logs.SetAll(level); err != nil {
			return nil, false, err
		}
		s.audit(ctx, "logger *").
			Interface("old", old).Str("new", level).Msg("admin change")
		return set, costlyLevel(level), nil
	})
}

// unknownLogger is the error for a logger name that the registry does not have. It is a
// 400, as in Scylla (bad_param_exception "Unknown logger name"), not a 404: 404 means an
// endpoint that does not exist, so a client can tell a typo in the name from an old server.
func (s *scyllaAPI) unknownLogger(name string) error {
	return errorf(http.StatusBadRequest, "unknown logger %q: loggers are %s", name, strings.Join(s.logs.Names(), ", "))
}

// getLogger serves GET /system/logger/{name}: the level as a JSON string.
func (s *scyllaAPI) getLogger(ctx *fasthttp.RequestCtx, name string) error {
	if n, ok := nodeName(name); ok {
		return s.getNodeLogger(ctx, name, n)
	}
	l, err := s.logs.Level(name)
	if err != nil {
		return s.unknownLogger(name)
	}
	return writeJSON(ctx, adminapi.Level(l))
}

// setLogger serves POST /system/logger/{name}?level=L.
func (s *scyllaAPI) setLogger(ctx *fasthttp.RequestCtx, name string) error {
	if n, ok := nodeName(name); ok {
		return s.setNodeLogger(ctx, name, n)
	}
	if _, err := s.logs.Level(name); err != nil {
		return s.unknownLogger(name)
	}
	level, d, err := requiredLevel(ctx)
	if err != nil {
		return err
	}
	return s.toggle(ctx, "POST /system/logger/"+name, d, func() ([]TimerSetting, bool, error) {
		old, err := s.logs.Level(name)
		if err != nil {
			return nil, false, s.unknownLogger(name)
		}
		if err := s.logs.SetLevel(name, level); err != nil {
			return nil, false, err
		}
		s.audit(ctx, "logger "+name).
			Str("old", old).Str("new", level).Msg("admin change")
		return []TimerSetting{{Setting: settingLoggerPrefix + name, RevertTo: old, SetTo: level}}, costlyLevel(level), nil
	})
}

// getNodeLogger serves GET /system/logger/node:NAME.
func (s *scyllaAPI) getNodeLogger(ctx *fasthttp.RequestCtx, name, nodeLogger string) error {
	if s.node == nil {
		return noNode(name)
	}
	c, cancel := nodeContext()
	defer cancel()
	l, err := s.node.Level(c, nodeLogger)
	if err != nil {
		return nodeError("logger "+name, err)
	}
	return writeJSON(ctx, adminapi.Level(l))
}

// setNodeLogger serves POST /system/logger/node:NAME?level=L.
func (s *scyllaAPI) setNodeLogger(ctx *fasthttp.RequestCtx, name, nodeLogger string) error {
	if s.node == nil {
		return noNode(name)
	}
	level, d, err := requiredLevel(ctx)
	if err != nil {
		return err
	}
	return s.toggle(ctx, "POST /system/logger/"+name, d, func() ([]TimerSetting, bool, error) {
		c, cancel := nodeContext()
		defer cancel()
		old, err := s.node.Level(c, nodeLogger)
		if err != nil {
			return nil, false, nodeError("logger "+name, err)
		}
		if err := s.node.SetLevel(c, nodeLogger, level); err != nil {
			return nil, false, nodeError("logger "+name, err)
		}
		s.audit(ctx, "logger "+name).Str("node", s.node.Kind()).Str("old", old).Str("new", level).Msg("admin change")
		return []TimerSetting{{Setting: settingLoggerPrefix + name, RevertTo: old, SetTo: level}}, costlyLevel(level), nil
	})
}

// requiredLevel reads the request's parameters: level, which must be present, and for.
func requiredLevel(ctx *fasthttp.RequestCtx) (string, time.Duration, error) {
	p, err := readParams(ctx, "level", "for")
	if err != nil {
		return "", 0, err
	}
	level, ok, err := p.level("level")
	if err != nil {
		return "", 0, err
	}
	d, err := p.forParam()
	if err != nil {
		return "", 0, err
	}
	if !ok {
		return "", 0, missing("level", wantLevel)
	}
	return level, d, nil
}
