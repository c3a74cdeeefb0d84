package loadcheck

import "testing"

// TestBudgetMetricsListed: every metric a budget takes is in the list the help and the
// errors print, and the list names no other.
func TestBudgetMetricsListed(t *testing.T) {
	if len(BudgetMetrics) != len(metricNames) {
		t.Errorf("%d metrics listed, %d known", len(BudgetMetrics), len(metricNames))
	}
	for _, m := range BudgetMetrics {
		if _, ok := metricNames[m.Name]; !ok {
			t.Errorf("listed metric %q is unknown", m.Name)
		}
		if _, err := ParseBudgets("full=" + m.Name + ":5%"); err != nil && m.Name != MetricAddedP99 {
			t.Errorf("%s: %v", m.Name, err)
		}
	}
}
