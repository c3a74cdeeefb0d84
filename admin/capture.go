package admin

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/tracecar/tracecar/tracing/capture"
)

// captureStopTimeout bounds how long POST enable=false waits for the file to be complete.
const captureStopTimeout = 30 * time.Second

// getCapture serves GET /tracecar/capture.
func (s *opsAPI) getCapture(ctx *fasthttp.RequestCtx, _ string) error {
	if _, err := readParams(ctx); err != nil {
		return err
	}
	return writeJSON(ctx, captureOf(s.capture.Status()))
}

// setCapture serves POST /tracecar/capture?enable=true[&duration=60s][&max_bytes=256MiB]
// [&values=shape|keep], which starts a capture, and enable=false, which stops it once its
// file is complete. Every parameter is checked before anything starts.
func (s *opsAPI) setCapture(ctx *fasthttp.RequestCtx, _ string) error {
	p, err := readParams(ctx, "enable", "duration", "max_bytes", "values")
	if err != nil {
		return err
	}
	on, ok, err := p.boolean("enable")
	if err != nil {
		return err
	}
	if !ok {
		return missing("enable", "true (start a capture) or false (stop it)")
	}
	var o capture.Options
	if v, ok := p["duration"]; ok {
		d, err := time.ParseDuration(v)
		if n, nerr := strconv.ParseInt(v, 10, 64); nerr == nil {
			d, err = time.Duration(n)*time.Second, nil
		}
		if err != nil || d <= 0 || d > capture.MaxDuration {
			return badParam("duration", v, "a duration such as 60s or 10m, at most "+capture.MaxDuration.String())
		}
		o.Duration = d
	}
	if v, ok := p["max_bytes"]; ok {
		n, ok := parseSize(v)
		if !ok || n < capture.MinMaxBytes {
			return badParam("max_bytes", v, "a size of at least 64KiB, such as 256MiB, 1GiB or a number of bytes")
		}
		o.MaxBytes = n
	}
	if v, ok := p["values"]; ok {
		if v != "shape" && v != "keep" {
			return badParam("values", v, "shape (no value is written: the default) or keep (the bound values are written)")
		}
		o.Values = v
	}
	if !on {
		for _, n := range []string{"duration", "max_bytes", "values"} {
			if p.has(n) {
				return errorf(http.StatusBadRequest, "parameter %s applies to enable=true only", n)
			}
		}
		c, cancel := context.WithTimeout(context.Background(), captureStopTimeout)
		defer cancel()
		st, err := s.capture.Stop(c)
		if err != nil {
			return err
		}
		s.audit(ctx, "capture").Bool("enable", false).Msg("admin change")
		return writeJSON(ctx, captureOf(st))
	}
	st, err := s.capture.Start(o)
	if err != nil {
		return err
	}
	s.audit(ctx, "capture").Bool("enable", true).Str("file", st.File).Str("values", st.Values).Msg("admin change")
	return writeJSON(ctx, captureOf(st))
}

// parseSize reads a byte size: a number of bytes, or one with the suffix KiB, MiB or GiB
// (k, M, G alike).
func parseSize(s string) (int64, bool) {
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"k", 1 << 10}, {"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}} {
		if v, ok := strings.CutSuffix(s, u.suffix); ok {
			s, mult = v, u.mult
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 || n > (1<<62)/mult {
		return 0, false
	}
	return n * mult, true
}
