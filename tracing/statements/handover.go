package statements

// Prepared is a prepared statement's text as statement statistics learnt it, for a
// handover to another process.
type Prepared struct {
	ID   []byte `json:"id"`
	Text string `json:"text"`
	Cols int    `json:"cols"`
}

// PreparedStatements returns the prepared statements learnt, oldest first. It is safe for
// concurrent use.
func (s *Stats) PreparedStatements() []Prepared {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]Prepared, 0, len(s.prepList))
	for i := range s.prepList {
		k := s.prepList[(s.prepHead+i)%len(s.prepList)]
		if p := s.prep[k]; p != nil {
			out = append(out, Prepared{ID: []byte(k), Text: p.text, Cols: p.cols})
		}
	}
	return out
}

// LearnPrepared learns the statements that another process had learnt, as if their
// PREPAREs had been seen here: an EXECUTE of one then counts under its text. It is safe
// for concurrent use.
func (s *Stats) LearnPrepared(ps []Prepared) {
	for _, p := range ps {
		s.learn(p.ID, p.Text, p.Cols)
	}
}
