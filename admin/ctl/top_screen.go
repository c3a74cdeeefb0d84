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
	s, err := openScreen()
	if err != nil {
		return err
	}
	defer s.Fini()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	events, stop := pollEvents(s)
	defer stop()

	st := &screenState{top: t, o: screenOpts{perHost: t.cmd.PerHost}, order: t.cmd.Sort}
	draw := func() {
		st.o.width, st.o.height = s.Size()
		drawLines(s, render(st.v, st.o))
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
			if st.o.paused {
				continue // frozen: the next reading after the pause spans it
			}
			st.reading(r)
			draw()
			if st.done() {
				return nil
			}
		case ev := <-events:
			switch ev := ev.(type) {
			case *tcell.EventResize:
				s.Sync()
				draw()
			case *tcell.EventKey:
				if st.key(topKey(ev)) {
					return nil
				}
				draw()
			}
		}
	}
}

// openScreen opens the terminal, its cursor hidden, cleared.
func openScreen() (tcell.Screen, error) {
	s, err := tcell.NewScreen()
	if err != nil {
		return nil, fmt.Errorf("ctl top: open the terminal: %w", err)
	}
	if err := s.Init(); err != nil {
		return nil, fmt.Errorf("ctl top: open the terminal: %w", err)
	}
	s.HideCursor()
	s.Clear()
	return s, nil
}

// pollEvents sends the terminal's events (keys, resizes) on the channel it returns, until
// the terminal closes or stop is called.
func pollEvents(s tcell.Screen) (events <-chan tcell.Event, stop func()) {
	ch := make(chan tcell.Event)
	quit := make(chan struct{})
	go func() {
		for {
			ev := s.PollEvent()
			if ev == nil { // Fini
				return
			}
			select {
			case ch <- ev:
			case <-quit:
				return
			}
		}
	}()
	return ch, func() { close(quit) }
}

// screenState is what the screen shows: the options, the order, the last two readings,
// their view, and how many views it has shown.
type screenState struct {
	top       *top
	o         screenOpts
	order     string
	prev, cur []hostSample
	v         topView
	shown     int
}

// reading takes a new reading and builds its view.
func (st *screenState) reading(r []hostSample) {
	st.prev, st.cur = st.cur, r
	st.v = buildView(st.top.hosts, st.prev, st.cur, st.order)
	if st.prev != nil {
		st.shown++
	}
}

// done reports whether the screen has shown the views --count asked for.
func (st *screenState) done() bool {
	return st.top.cmd.Count > 0 && st.shown >= st.top.cmd.Count
}

// key does what a key (topKey) asks: it reports whether to quit, else pauses, shows or
// hides the hosts, or sorts in another order.
func (st *screenState) key(key string) (quit bool) {
	switch key {
	case "quit":
		return true
	case "pause":
		st.o.paused = !st.o.paused
	case "hosts":
		st.o.perHost = !st.o.perHost
	case "next":
		st.order = TopSortOrders[(slices.Index(TopSortOrders, st.order)+1)%len(TopSortOrders)]
		fallthrough
	default:
		if slices.Contains(TopSortOrders, key) {
			st.order = key
		}
		if st.cur != nil {
			st.v = buildView(st.top.hosts, st.prev, st.cur, st.order)
		}
	}
	return false
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
