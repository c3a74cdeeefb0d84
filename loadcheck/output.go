package loadcheck

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
)

// writeReports writes the JSON, CSV and HTML files that cfg asks for.
func writeReports(cfg *Config, rep *Report) error {
	for _, f := range []struct {
		path  string
		write func(io.Writer, *Report) error
	}{
		{cfg.JSON, writeJSON},
		{cfg.CSV, writeCSV},
		{cfg.HTML, writeHTML},
	} {
		if f.path == "" {
			continue
		}
		if err := writeFile(f.path, rep, f.write); err != nil {
			return err
		}
	}
	return nil
}

func writeFile(path string, rep *Report, write func(io.Writer, *Report) error) error {
	var b bytes.Buffer
	if err := write(&b, rep); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	return nil
}

func writeJSON(w io.Writer, rep *Report) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(rep)
}
