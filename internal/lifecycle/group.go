// Package lifecycle runs long-running actors as one group, in the manner of
// github.com/oklog/run: the group starts them all, stops them all when the first one
// returns, and reports the first error.
//
// It differs from oklog/run in one way: Run returns the first non-nil error that any actor
// returned, in the order they returned, rather than the first actor's value. A sidecar
// stopped by a signal (its signal actor returns nil) must still report an error met while
// it drained, as it did before the group.
package lifecycle

// Group collects actors (functions) and runs them together. The zero value of a Group is
// useful: a group with no actors. A Group is not safe for concurrent use: add every actor,
// then call Run once.
type Group struct {
	actors []actor
}

type actor struct {
	execute   func() error
	interrupt func(error)
}

// Add adds an actor to the group. execute runs the actor and blocks until it is done;
// interrupt makes execute return, and must not block: it is called once, with the value
// of the first actor to return, even for the actor that returned.
func (g *Group) Add(execute func() error, interrupt func(error)) {
	g.actors = append(g.actors, actor{execute, interrupt})
}

// Run runs every actor, each in a goroutine of its own, and waits until the first returns.
// It then interrupts every actor, in the order they were added, and waits until all have
// returned. It returns the first non-nil error an actor returned: an actor that returns
// nil stops the others without being an error. A group with no actors returns nil at once.
func (g *Group) Run() error {
	if len(g.actors) == 0 {
		return nil
	}
	errs := make(chan error, len(g.actors))
	for _, a := range g.actors {
		go func() { errs <- a.execute() }()
	}
	first := <-errs
	for _, a := range g.actors {
		a.interrupt(first)
	}
	for range len(g.actors) - 1 {
		if err := <-errs; first == nil {
			first = err
		}
	}
	return first
}
