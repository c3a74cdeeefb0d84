package admin

import (
	"bytes"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/tracecar/tracecar/internal/logs"
	"github.com/valyala/fasthttp"
)

// params are a request's parameters by name, each given once.
type params map[string]string

// readParams collects the parameters of a POST from its query string and its form-encoded
// body. It rejects a name that is not in allowed, a name given more than once, an empty
// value and a body that is not form-encoded, so that a typo never goes unnoticed.
func readParams(ctx *fasthttp.RequestCtx, allowed ...string) (params, error) {
	p := make(params)
	var err error
	add := func(k, v []byte) {
		if err != nil {
			return
		}
		name := string(k)
		switch {
		case !contains(allowed, name):
			if len(allowed) == 0 {
				err = errorf(http.StatusBadRequest, "unknown parameter %q: this endpoint takes none", name)
			} else {
				err = errorf(http.StatusBadRequest, "unknown parameter %q: allowed are %s", name, strings.Join(allowed, ", "))
			}
		case p.has(name):
			err = errorf(http.StatusBadRequest, "parameter %s given more than once", name)
		case len(v) == 0:
			err = errorf(http.StatusBadRequest, "parameter %s has an empty value", name)
		default:
			p[name] = string(v)
		}
	}
	for k, v := range ctx.QueryArgs().All() {
		add(k, v)
	}
	if len(ctx.Request.Body()) > 0 {
		ct := ctx.Request.Header.ContentType()
		if i := bytes.IndexByte(ct, ';'); i >= 0 {
			ct = ct[:i]
		}
		if !bytes.EqualFold(bytes.TrimSpace(ct), []byte("application/x-www-form-urlencoded")) {
			return nil, errorf(http.StatusBadRequest,
				"request body of type %q: send parameters in the query string or as application/x-www-form-urlencoded", ct)
		}
		for k, v := range ctx.PostArgs().All() {
			add(k, v)
		}
	}
	return p, err
}

func (p params) has(name string) bool { _, ok := p[name]; return ok }

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// boolean parses name's value: true, false, 1 or 0 in any case.
func (p params) boolean(name string) (v, ok bool, err error) {
	s, ok := p[name]
	if !ok {
		return false, false, nil
	}
	switch {
	case strings.EqualFold(s, "true") || s == "1":
		return true, true, nil
	case strings.EqualFold(s, "false") || s == "0":
		return false, true, nil
	}
	return false, false, badParam(name, s, "true, false, 1 or 0")
}

// integer parses name's value as a decimal integer in [lo, hi]; want describes it.
func (p params) integer(name string, lo, hi int64, want string) (v int64, ok bool, err error) {
	s, ok := p[name]
	if !ok {
		return 0, false, nil
	}
	v, err = strconv.ParseInt(s, 10, 64)
	if err != nil || v < lo || v > hi {
		return 0, false, badParam(name, s, want)
	}
	return v, true, nil
}

// probability parses name's value as a number in [0,1].
func (p params) probability(name string) (v float64, ok bool, err error) {
	s, ok := p[name]
	if !ok {
		return 0, false, nil
	}
	v, err = strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(v) || v < 0 || v > 1 {
		return 0, false, badParam(name, s, "a number from 0 to 1, such as 0.01")
	}
	return v, true, nil
}

// duration parses name's value as a Go duration of at least lo.
func (p params) duration(name string, lo time.Duration, want string) (time.Duration, bool, error) {
	s, ok := p[name]
	if !ok {
		return 0, false, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < lo || d < 0 {
		return 0, false, badParam(name, s, want)
	}
	return d, true, nil
}

// number parses name's value as a finite number in [lo, hi].
func (p params) number(name string, lo, hi float64, want string) (float64, bool, error) {
	s, ok := p[name]
	if !ok {
		return 0, false, nil
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) || v < lo || v > hi {
		return 0, false, badParam(name, s, want)
	}
	return v, true, nil
}

// level parses name's value as a log level, in any case, and returns it in lower case.
func (p params) level(name string) (v string, ok bool, err error) {
	s, ok := p[name]
	if !ok {
		return "", false, nil
	}
	l := strings.ToLower(s)
	if !contains(Levels, l) {
		return "", false, badParam(name, s, "one of "+strings.Join(Levels, ", "))
	}
	return l, true, nil
}

// missing is the 400 for a required parameter that is absent.
func missing(name, want string) error {
	return errorf(http.StatusBadRequest, "missing parameter %s: want %s", name, want)
}

// Levels are the log levels the API accepts, as ScyllaDB names them.
var Levels = logs.Levels
