package ctl

import (
	"context"
	"fmt"
	"slices"

	"github.com/gdamore/tcell/v2"
)

// The full-screen view: tcell draws the lines that render lays out, and turns keys into
// changes of sort, pause, the per-host rows and quit. tcell saves the terminal's state at
// Init and restores it at Fini (the alternate screen, the cursor, the input mode), also
// when top ends on an error or a signal.

// screen runs top full-screen until q, Ctrl-C or ctx.
func (t *top) screen(ctx context.Context) error {
	s, err := tcell.NewScreen()
	if err != nil {
		return fmt.Errorf("ctl top: open the terminal: %w", err)
	}
	if err := s.Init(); err != nil {
		return fmt.Errorf("ctl top: open the terminal: %w", err)
	}
	defer s.Fini()
	s.HideCursor()
	s.Clear()

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	events := make(chan tcell.Event)
	quit := make(chan struct{})
	go func() {
		for {
			ev := s.PollEvent()
			if ev == nil { // Fini
				return
			}
			select {
			case events <- ev:
			case <-quit:
				return
			}
		}
	}()
	defer close(quit)

	o := screenOpts{perHost: t.cmd.PerHost}
	order := t.cmd.Sort
	var prev, cur []hostSample
	var v topView
	shown := 0
	draw := func() {
		o.width, o.height = s.Size()
		drawLines(s, render(v, o))
	}
	readings := t.readings(ctx)
	for {
		select {
		case <-ctx.Done():
			return nil
		case r, ok := <-readings:
			if !ok {
				return nil
			}
			if o.paused {
				continue // frozen: the next reading after the pause spans it
			}
			prev, cur = cur, r
			v = buildView(t.hosts, prev, cur, order)
			draw()
			if prev != nil {
				shown++
				if t.cmd.Count > 0 && shown >= t.cmd.Count {
					return nil
				}
			}
		case ev := <-events:
			switch ev := ev.(type) {
			case *tcell.EventResize:
				s.Sync()
				draw()
			case *tcell.EventKey:
				switch key := topKey(ev); key {
				case "quit":
					return nil
				case "pause":
					o.paused = !o.paused
				case "hosts":
					o.perHost = !o.perHost
				case "next":
					order = TopSortOrders[(slices.Index(TopSortOrders, order)+1)%len(TopSortOrders)]
					fallthrough
				default:
					if slices.Contains(TopSortOrders, key) {
						order = key
					}
					if cur != nil {
						v = buildView(t.hosts, prev, cur, order)
					}
				}
				draw()
			}
		}
	}
}

// topKey names what a key does: a sort order, "next" (the next order), "pause", "hosts",
// "quit", or "".
func topKey(ev *tcell.EventKey) string {
	switch ev.Key() {
	case tcell.KeyCtrlC, tcell.KeyEscape:
		return "quit"
	case tcell.KeyRune:
	default:
		return ""
	}
	switch ev.Rune() {
	case 'q', 'Q':
		return "quit"
	case 't':
		return "total_time"
	case 'c':
		return "calls"
	case 'p':
		return "p99"
	case 'e':
		return "errors"
	case 's':
		return "next"
	case 'h':
		return "hosts"
	case ' ', 'P':
		return "pause"
	}
	return ""
}

// drawLines replaces the screen's content with lines.
func drawLines(s tcell.Screen, lines []textLine) {
	s.Clear()
	w, _ := s.Size()
	for y, l := range lines {
		st := tcell.StyleDefault
		switch l.style {
		case styleTitle:
			st = st.Reverse(true)
		case styleHeader:
			st = st.Bold(true)
		case styleWarn:
			st = st.Foreground(tcell.ColorYellow)
		}
		x := 0
		for _, r := range l.text {
			if x >= w {
				break
			}
			s.SetContent(x, y, r, nil, st)
			x++
		}
		if l.style == styleTitle {
			for ; x < w; x++ {
				s.SetContent(x, y, ' ', nil, st)
			}
		}
	}
	s.Show()
}
