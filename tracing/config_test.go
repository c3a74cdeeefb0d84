package tracing

import (
	"encoding/json"
	"errors"
	"math"
	"sync"
	"testing"
	"time"
)

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name    string
		cfg     Config
		wantErr bool
	}{
		{name: "defaults", cfg: DefaultConfig()},
		{name: "zero", cfg: Config{}},
		{name: "fast threshold 0", cfg: Config{Enable: true, Fast: true}},
		{name: "probability 1", cfg: Config{Probability: 1}},
		{name: "negative threshold", cfg: Config{ThresholdMicros: -1}, wantErr: true},
		{name: "negative ttl", cfg: Config{TTLSeconds: -1}, wantErr: true},
		{name: "probability above 1", cfg: Config{Probability: 1.5}, wantErr: true},
		{name: "negative probability", cfg: Config{Probability: -0.1}, wantErr: true},
		{name: "NaN probability", cfg: Config{Probability: math.NaN()}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			if (err != nil) != tt.wantErr {
				t.Fatalf("Validate() = %v; want error %v", err, tt.wantErr)
			}
			if err != nil && !errors.Is(err, ErrInvalidConfig) {
				t.Errorf("Validate() = %v; want it to wrap ErrInvalidConfig", err)
			}
		})
	}
}

func TestSetConfig(t *testing.T) {
	tr := New(Options{})
	defer mustClose(t, tr)
	if got, want := tr.Config(), DefaultConfig(); got != want {
		t.Fatalf("initial Config() = %+v; want %+v", got, want)
	}
	if got := tr.Stats().Mode; got != "off" {
		t.Errorf("initial mode = %q; want off", got)
	}
	fast := Config{Enable: true, Fast: true, ThresholdMicros: 1000, TTLSeconds: 60, Probability: 0.5}
	mustConfig(t, tr, fast)
	if got := tr.Config(); got != fast {
		t.Errorf("Config() = %+v; want %+v", got, fast)
	}
	if err := tr.SetConfig(Config{Enable: true, ThresholdMicros: -5}); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("SetConfig(negative threshold) = %v; want ErrInvalidConfig", err)
	}
	if got := tr.Config(); got != fast {
		t.Errorf("after a rejected SetConfig, Config() = %+v; want unchanged %+v", got, fast)
	}
	if got := tr.Stats().Mode; got != "fast" {
		t.Errorf("mode = %q; want fast", got)
	}
}

// TestUpdateConfigConcurrent checks that read-modify-write updates are not lost and that
// readers always see a whole snapshot (run with -race).
func TestUpdateConfigConcurrent(t *testing.T) {
	tr := New(Options{})
	defer mustClose(t, tr)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				if err := tr.UpdateConfig(func(c Config) Config { c.ThresholdMicros++; return c }); err != nil {
					t.Error(err)
				}
				_ = tr.Config()
			}
		}()
	}
	wg.Wait()
	if got, want := tr.Config().ThresholdMicros, int64(DefaultThresholdMicros+800); got != want {
		t.Errorf("threshold after 800 increments = %d; want %d", got, want)
	}
}

// TestConfigStateCarriesTheFloor: the trace floor's setting survives a handover's JSON.
func TestConfigStateCarriesTheFloor(t *testing.T) {
	c := Config{Probability: 0.5, FloorInterval: 90 * time.Second, FloorMaxPerSecond: 3}
	b, err := json.Marshal(c.State())
	if err != nil {
		t.Fatal(err)
	}
	var s ConfigState
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	if got := s.Config(); got != c {
		t.Errorf("%s gives %+v; want %+v", b, got, c)
	}
	if c.Mode() != "sampled" || (Config{FloorInterval: time.Second}).Mode() != "floor" {
		t.Errorf("modes %q and %q; want sampled and floor", c.Mode(), Config{FloorInterval: time.Second}.Mode())
	}
	for _, bad := range []Config{{FloorInterval: -time.Second}, {FloorInterval: MaxFloorInterval + time.Second}, {FloorMaxPerSecond: -1}} {
		if err := bad.Validate(); err == nil {
			t.Errorf("%+v is valid; want an error", bad)
		}
	}
}
