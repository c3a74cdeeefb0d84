package loadcheck

import (
	"bytes"
	"context"
	"image"
	"image/color"
	"image/png"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tracecar/tracecar/internal/testkit/drivertest"
)

// chromium is the launcher of Debian's chromium package.
const chromium = "/usr/bin/chromium"

// Size of the browser window, and so of the screenshot.
const shotW, shotH = 1280, 4000

// mustChromium skips tb when Chromium is not installed, or fails it when
// TRACECAR_REQUIRE_DRIVERS is set, as in CI.
func mustChromium(tb testing.TB) {
	tb.Helper()
	drivertest.RequireTool(tb, chromium, "chromium")
}

// runChromium loads page in headless Chromium with a new profile and the extra flags, and
// returns its stdout and its log (stderr). Nothing leaves the machine: the page is a file
// and the background services that would fetch are off.
func runChromium(tb testing.TB, page string, extra ...string) (stdout, log string) {
	tb.Helper()
	mustChromium(tb)
	ctx, cancel := context.WithTimeout(tb.Context(), 60*time.Second)
	defer cancel()
	args := []string{
		"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--user-data-dir=" + tb.TempDir(),
		"--window-size=" + strconv.Itoa(shotW) + "," + strconv.Itoa(shotH),
		"--enable-logging=stderr", "--v=0",
	}
	args = append(append(args, extra...), page)
	cmd := exec.CommandContext(ctx, chromium, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	cmd.WaitDelay = 5 * time.Second // a helper process that keeps the pipes open
	if err := cmd.Run(); err != nil {
		tb.Fatalf("chromium %s: %v (context: %v)\n%s", strings.Join(extra, " "), err, ctx.Err(), errb.String())
	}
	return out.String(), errb.String()
}

// checkConsole fails tb on the lines of Chromium's log that come from page's console. The
// report has no script, so any such line is the browser's complaint about the page, such
// as "Error: <polyline> attribute points: Expected number". Chromium logs console
// messages at INFO whatever their level, so the level is not a filter. Its own noise
// (dbus, GPU, sandbox) is not about the page and is ignored.
func checkConsole(tb testing.TB, log, page string) {
	tb.Helper()
	for line := range strings.Lines(log) {
		fromPage := strings.Contains(line, ":CONSOLE") && strings.Contains(line, page)
		if fromPage || strings.Contains(line, "Uncaught") || strings.Contains(line, "ERROR:CONSOLE") {
			tb.Errorf("console message from the page: %s", strings.TrimSpace(line))
		}
	}
}

// TestHTMLReportInChromium renders the HTML report of synthetic data in headless Chromium
// and checks that the browser raises nothing, that its DOM has the three charts, and
// that the screenshot shows them.
func TestHTMLReportInChromium(t *testing.T) {
	mustChromium(t)
	dir := t.ArtifactDir() // kept with go test -artifacts
	report := filepath.Join(dir, "report.html")
	f, err := os.Create(report)
	if err != nil {
		t.Fatal(err)
	}
	if err := writeHTML(f, sampleReport(t)); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	page := (&url.URL{Scheme: "file", Path: report}).String()

	t.Run("dom", func(t *testing.T) {
		dom, log := runChromium(t, page, "--dump-dom")
		checkConsole(t, log, page)
		charts := []struct {
			id, what string
			marks    []string // in the chart's markup, as the browser serialises it
		}{
			{"chart-throughput", "throughput over time", []string{"<polyline"}},
			{"chart-latency", "latency percentiles", []string{"<polyline"}},
			{"chart-cpu", "sidecar CPU per op over the baseline, with 95% bounds and limits", []string{`class="bar"`, `class="interval"`, `class="limit"`, "limit +0.3 µs/op", "limit +1 µs/op"}},
			{"chart-added-p99", "added-latency p99 over the baseline, with 95% bounds and a limit", []string{`class="bar"`, `class="interval"`, `class="limit"`, "limit +20 µs"}},
			{"chart-overhead", "op rate overhead with error bars", []string{`class="bar"`, `class="errorbar"`}},
		}
		ok := true
		// The verdicts' quantities come first: CPU, then added latency, then the op rate.
		if a, b, c := strings.Index(dom, `id="chart-cpu"`), strings.Index(dom, `id="chart-added-p99"`), strings.Index(dom, `id="chart-overhead"`); !(a >= 0 && a < b && b < c) {
			t.Errorf("charts at %d, %d, %d in the DOM; want chart-cpu, chart-added-p99, then chart-overhead", a, b, c)
		}
		for _, c := range charts {
			svg := regexp.MustCompile(`(?s)<svg[^>]*\bid="` + c.id + `".*?</svg>`).FindString(dom)
			if svg == "" {
				t.Errorf("DOM has no <svg id=%q> (%s)", c.id, c.what)
				ok = false
				continue
			}
			for _, m := range c.marks {
				if !strings.Contains(svg, m) {
					t.Errorf("chart %s (%s) has no %s in the DOM", c.id, c.what, m)
					ok = false
				}
			}
		}
		if !ok {
			t.Logf("DOM:\n%s", dom)
		}
	})

	t.Run("screenshot", func(t *testing.T) {
		shot := filepath.Join(dir, "page.png")
		_, log := runChromium(t, page, "--screenshot="+shot)
		checkConsole(t, log, page)
		t.Logf("screenshot: %s", shot)
		f, err := os.Open(shot)
		if err != nil {
			t.Fatalf("no screenshot: %v\n%s", err, log)
		}
		defer f.Close()
		img, err := png.Decode(f)
		if err != nil {
			t.Fatalf("screenshot is not a PNG: %v", err)
		}
		if got := img.Bounds().Size(); got != (image.Point{shotW, shotH}) {
			t.Errorf("screenshot is %v; want %dx%d, the window", got, shotW, shotH)
		}
		// The charts draw in the palette's colours: each mode's lines, legend swatches and
		// bar. Exact pixels of them show that the SVG was painted, not just laid out.
		colours := map[color.RGBA]int{}
		nonWhite := 0
		b := img.Bounds()
		for y := b.Min.Y; y < b.Max.Y; y++ {
			for x := b.Min.X; x < b.Max.X; x++ {
				c := color.RGBAModel.Convert(img.At(x, y)).(color.RGBA)
				colours[c]++
				if c.R < 0xf0 || c.G < 0xf0 || c.B < 0xf0 {
					nonWhite++
				}
			}
		}
		total := b.Dx() * b.Dy()
		t.Logf("%d distinct colours, %.1f%% of the pixels not white", len(colours), 100*float64(nonWhite)/float64(total))
		if nonWhite < total/100 {
			t.Errorf("screenshot is nearly blank: %d of %d pixels not white; want at least 1%%", nonWhite, total)
		}
		if len(colours) < 20 {
			t.Errorf("screenshot has %d distinct colours; want at least 20 (text, axes, a line per mode)", len(colours))
		}
		for i, name := range []string{"off", "fast", "full"} {
			// The window holds the whole page: the overhead bars (fast's and full's, on the
			// CPU and added-latency charts), the legend swatches and the lines.
			c := mustHexColor(t, modeColor(i))
			n := colours[c]
			t.Logf("%s: %d pixels of %s", name, n, modeColor(i))
			if n < 400 {
				t.Errorf("screenshot has %d pixels of %s's colour %s; want at least 400 (its swatches and its lines)", n, name, modeColor(i))
			}
		}
		// The budgets' limits are dashed lines and labels in one red: four limits on the
		// CPU and added-latency charts, and two op-rate budgets.
		red := mustHexColor(t, "#b00020")
		t.Logf("limits: %d pixels of #b00020", colours[red])
		if colours[red] < 300 {
			t.Errorf("screenshot has %d pixels of the limits' colour #b00020; want at least 300", colours[red])
		}
	})
}

// mustHexColor parses a "#rrggbb" colour.
func mustHexColor(tb testing.TB, s string) color.RGBA {
	tb.Helper()
	v, err := strconv.ParseUint(strings.TrimPrefix(s, "#"), 16, 32)
	if err != nil || len(s) != 7 || s[0] != '#' {
		tb.Fatalf("colour %q is not #rrggbb", s)
	}
	return color.RGBA{uint8(v >> 16), uint8(v >> 8), uint8(v), 0xff}
}

// TestHTMLVerdictOnFirstScreen renders the report of each outcome in headless Chromium and
// checks, on the screenshot, that the verdict banner is painted within the first screen
// (the top 900 pixels of a 1280-pixel-wide window) in its outcome's colour, and that a
// not resolved run shows no breach's red banner.
func TestHTMLVerdictOnFirstScreen(t *testing.T) {
	mustChromium(t)
	const firstScreen = 900
	bg := map[string]string{RunBreached: "#fdecea", RunNotResolved: "#fff8e1", RunOK: "#e8f5e9"}
	for want, rep := range outcomeReports(t) {
		t.Run(want, func(t *testing.T) {
			dir := t.ArtifactDir()
			report := filepath.Join(dir, "report.html")
			if err := os.WriteFile(report, []byte(htmlOf(t, rep)), 0o644); err != nil {
				t.Fatal(err)
			}
			shot := filepath.Join(dir, "page.png")
			_, log := runChromium(t, (&url.URL{Scheme: "file", Path: report}).String(), "--screenshot="+shot)
			f, err := os.Open(shot)
			if err != nil {
				t.Fatalf("no screenshot: %v\n%s", err, log)
			}
			defer f.Close()
			img, err := png.Decode(f)
			if err != nil {
				t.Fatal(err)
			}
			count := map[color.RGBA]int{}
			lowest := map[color.RGBA]int{}
			b := img.Bounds()
			for y := b.Min.Y; y < b.Max.Y; y++ {
				for x := b.Min.X; x < b.Max.X; x++ {
					c := color.RGBAModel.Convert(img.At(x, y)).(color.RGBA)
					count[c]++
					lowest[c] = y
				}
			}
			c := mustHexColor(t, bg[want])
			t.Logf("%s banner: %d pixels of %s, the lowest at y=%d", want, count[c], bg[want], lowest[c])
			if count[c] < 20_000 || lowest[c] >= firstScreen {
				t.Errorf("%d pixels of the %s banner's %s, the lowest at y=%d; want a banner (20,000 pixels or more) within the first %d",
					count[c], want, bg[want], lowest[c], firstScreen)
			}
			for other, o := range bg {
				if other != want && count[mustHexColor(t, o)] > 0 {
					t.Errorf("a %s run's page has %d pixels of the %s banner's colour", want, count[mustHexColor(t, o)], other)
				}
			}
		})
	}
}
