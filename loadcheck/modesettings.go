package loadcheck

import (
	"net/url"
	"strconv"
	"strings"
	"time"
)

// ModeSettings are a mode's effective tracing settings on the sidecar: the state the
// sidecar had at the start, with the mode's steps applied. A nil field is not known: no
// mode of the run touches it, so loadcheck did not read it.
type ModeSettings struct {
	Enable      *bool  `json:"enable"`
	Fast        *bool  `json:"fast"`
	ThresholdUs *int64 `json:"threshold_us"`
	Probability string `json:"probability,omitempty"`
}

// String formats the settings as the mode table prints them: enable, fast, threshold and
// probability, with "?" for what is not known.
func (s *ModeSettings) String() string {
	if s == nil {
		return "-"
	}
	b := func(v *bool) string {
		if v == nil {
			return "?"
		}
		return strconv.FormatBool(*v)
	}
	th := "?"
	if s.ThresholdUs != nil {
		th = (time.Duration(*s.ThresholdUs) * time.Microsecond).String()
	}
	p := s.Probability
	if p == "" {
		p = "?"
	}
	return "enable=" + b(s.Enable) + " fast=" + b(s.Fast) + " threshold=" + th + " probability=" + p
}

// recordsSlow reports whether the settings trace requests by the threshold (fast or
// full), so that a run with no session recorded measured the fixed cost alone.
func (s *ModeSettings) recordsSlow() bool {
	return s != nil && s.Enable != nil && *s.Enable
}

// settingsOf works out a mode's effective settings from the saved initial state and the
// mode's steps; nil for a mode whose load bypasses the sidecar.
func settingsOf(m *mode, sidecar string, st *savedState) *ModeSettings {
	if sidecar == "" || m.target != sidecar {
		return nil
	}
	for st != nil && len(st.restore) == 0 && len(st.each) > 0 {
		st = st.each[0] // a cluster: every sidecar gets the same steps
	}
	q := url.Values{}
	if st != nil {
		for _, k := range []stateKey{{apiAdmin, pathSlowQuery}, {apiAdmin, pathProbability}} {
			if v, err := url.ParseQuery(st.restore[k]); err == nil {
				for name, vs := range v {
					q[name] = vs
				}
			}
		}
	}
	for _, s := range m.steps {
		if s.api != apiAdmin || s.method != "POST" || s.path != pathSlowQuery && s.path != pathProbability {
			continue
		}
		if v, err := url.ParseQuery(s.query); err == nil {
			for name, vs := range v {
				q[name] = vs
			}
		}
	}
	out := &ModeSettings{Probability: q.Get("probability")}
	if v, err := strconv.ParseBool(q.Get("enable")); err == nil {
		out.Enable = &v
	}
	if v, err := strconv.ParseBool(q.Get("fast")); err == nil {
		out.Fast = &v
	}
	if v, err := strconv.ParseInt(strings.TrimSpace(q.Get("threshold")), 10, 64); err == nil {
		out.ThresholdUs = &v
	}
	return out
}
