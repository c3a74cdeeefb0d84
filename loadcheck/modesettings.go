package loadcheck

import (
	"strconv"
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
