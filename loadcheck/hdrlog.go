package loadcheck

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
)

// hdrLog writes one run's interval histograms in the HdrHistogram interval log format
// (version 1.3), which HdrHistogram's HistogramLogProcessor and the Go, Java and C log
// readers load. Values are written in nanoseconds, the format's usual unit, so that the
// tools' default millisecond output is right; response times carry no tag and service
// times the tag "service".
type hdrLog struct {
	f       *os.File
	bw      *bufio.Writer
	w       *hdrhistogram.HistogramLogWriter
	startMs int64
	resp    *hdrhistogram.Histogram // nanosecond copies, reused
	svc     *hdrhistogram.Histogram
}

// hdrLogName is the file of one mode and round.
func hdrLogName(dir, mode string, round int) string {
	return filepath.Join(dir, fmt.Sprintf("%s-round%d.hlog", mode, round+1))
}

func openHDRLog(dir string, m *mode, round int, start time.Time) (*hdrLog, error) {
	f, err := os.Create(hdrLogName(dir, m.name, round))
	if err != nil {
		return nil, fmt.Errorf("hdr log: %w", err)
	}
	l := &hdrLog{f: f, bw: bufio.NewWriter(f), startMs: start.UnixMilli(),
		resp: newNanoHist(), svc: newNanoHist()}
	l.w = hdrhistogram.NewHistogramLogWriter(l.bw)
	l.w.OutputLogFormatVersion()
	l.w.OutputComment(fmt.Sprintf("[tracecar loadcheck: mode %s, round %d, target %s, values in ns; untagged: response time, Tag=service: service time]", m.name, round+1, m.target))
	l.w.OutputStartTime(l.startMs)
	l.w.OutputBaseTime(l.startMs)
	l.w.SetBaseTime(l.startMs)
	if err := l.w.OutputLegend(); err != nil {
		f.Close()
		return nil, fmt.Errorf("hdr log: %w", err)
	}
	return l, nil
}

func newNanoHist() *hdrhistogram.Histogram { return hdrhistogram.New(1000, histMax*1000, histDigits) }

// toNanos copies a microsecond histogram into dst in nanoseconds. Each bucket's count goes
// to its highest equivalent value, the value that percentiles report.
func toNanos(dst, src *hdrhistogram.Histogram) {
	dst.Reset()
	if src.TotalCount() == 0 {
		return
	}
	for _, b := range src.Distribution() {
		if b.Count > 0 {
			dst.RecordValues(min(b.To, histMax)*1000, b.Count)
		}
	}
}

// write logs one interval: response times, then service times.
func (l *hdrLog) write(iv Interval, resp, svc *hdrhistogram.Histogram) error {
	startMs := l.startMs + int64(iv.StartS*1000)
	endMs := l.startMs + int64(iv.TimeS*1000)
	for _, h := range []struct {
		src, dst *hdrhistogram.Histogram
		tag      string
	}{{resp, l.resp, ""}, {svc, l.svc, "service"}} {
		toNanos(h.dst, h.src)
		h.dst.SetStartTimeMs(startMs)
		h.dst.SetEndTimeMs(endMs)
		h.dst.SetTag(h.tag)
		if err := l.w.OutputIntervalHistogram(h.dst); err != nil {
			return err
		}
	}
	return nil
}

func (l *hdrLog) close() error {
	err := l.bw.Flush()
	if cerr := l.f.Close(); err == nil {
		err = cerr
	}
	return err
}
