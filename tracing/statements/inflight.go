package statements

// What a reader outside the data path may learn from an entry and a Ticket: the statement
// of a request in flight (GET /tracecar/queries), and the anti-patterns an entry's
// requests have shown (the "antipatterns" of each statement in the list).

// Statement returns the statement of the request of t: its entry's text (the normalized
// text of an unprepared QUERY, the text a PREPARE sent for an EXECUTE, a BATCH's key), or a
// PREPARE's own text, with the keyspace and table it names. ok is false for a Ticket that
// knows no statement. The entry's fields never change once it is made, so this is safe for
// concurrent use with the data path.
func (t Ticket) Statement() (text, keyspace, table string, ok bool) {
	switch {
	case t.e != nil:
		return t.e.key.text, t.e.shape.keyspace, t.e.shape.table, true
	case t.prepText != "":
		sh := classify(t.prepText)
		return t.prepText, sh.keyspace, sh.table, true
	}
	return "", "", "", false
}

// Start returns the arrival of the request of t (the now that Request was given), or 0.
func (t Ticket) Start() int64 { return t.start }

// antiPatterns returns the kinds e's requests have shown, in AntiPatternKinds' order, or
// nil.
func (e *Entry) antiPatterns() []string {
	b := e.seen.bits.Load()
	if b == 0 {
		return nil
	}
	var out []string
	for k, name := range AntiPatternKinds {
		if b&(1<<k) != 0 {
			out = append(out, name)
		}
	}
	return out
}
