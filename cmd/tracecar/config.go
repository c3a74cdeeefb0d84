package main

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"strings"
)

// --config FILE: the sidecar's flags in a file, one a line, so that SIGHUP has something
// to re-read (live.go). A line is NAME VALUE, NAME=VALUE or NAME alone (a boolean flag set
// to true), the name with or without its dashes, as on the command line; blank lines and
// lines starting with # are skipped. The command line wins over the file.

// configFile is the --config flag, read before the command line is parsed.
type configFile struct {
	path    string
	cmdline map[string]bool // the flags the command line set: the file's values of those are ignored
}

// configPath returns the value of --config in args, without parsing them.
func configPath(args []string) string {
	for i, a := range args {
		name, value, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !strings.HasPrefix(a, "-") || name != "config" {
			continue
		}
		if hasValue {
			return value
		}
		if i+1 < len(args) {
			return args[i+1]
		}
	}
	return ""
}

// readConfig reads the settings of a config file, in order.
func readConfig(path string) ([][2]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("--config: %w", err)
	}
	defer f.Close()
	var out [][2]string
	s := bufio.NewScanner(f)
	for n := 1; s.Scan(); n++ {
		line := strings.TrimSpace(s.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, value, ok := strings.Cut(line, "=")
		if !ok {
			name, value, ok = strings.Cut(line, " ")
		}
		name = strings.TrimLeft(strings.TrimSpace(name), "-")
		value = strings.TrimSpace(value)
		if !ok {
			value = "true"
		}
		if name == "" || name == "config" {
			return nil, fmt.Errorf("--config %s:%d: %q: want NAME VALUE (a flag other than config)", path, n, line)
		}
		out = append(out, [2]string{name, value})
	}
	return out, s.Err()
}

// applyConfig sets fs's flags from the file at path; the command line, parsed after, wins.
func applyConfig(fs *flag.FlagSet, path string) error {
	settings, err := readConfig(path)
	if err != nil {
		return usageErrorf("%v", err)
	}
	for _, kv := range settings {
		if fs.Lookup(kv[0]) == nil {
			return usageErrorf("--config %s: no flag --%s", path, kv[0])
		}
		if err := fs.Set(kv[0], kv[1]); err != nil {
			return usageErrorf("--config %s: --%s %q: %v", path, kv[0], kv[1], err)
		}
	}
	return nil
}

// parseSidecarFlags applies --config, then the command line, and returns the config file
// (path "" without one).
func parseSidecarFlags(fs *flag.FlagSet, args []string) (*configFile, error) {
	cf := &configFile{path: configPath(args), cmdline: map[string]bool{}}
	fs.String("config", "", "a `file` of flags, one NAME VALUE a line (# comments): read at start, and again on SIGHUP for the log format and file and the TLS files; the command line wins")
	if cf.path != "" {
		if err := applyConfig(fs, cf.path); err != nil {
			return nil, err
		}
	}
	if err := parseFlags(fs, args); err != nil {
		return nil, err
	}
	for _, a := range args {
		if name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "="); strings.HasPrefix(a, "-") && fs.Lookup(name) != nil {
			cf.cmdline[name] = true
		}
	}
	return cf, nil
}
