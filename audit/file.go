package audit

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Defaults of FileConfig.
const (
	DefaultMaxFileSize = 100 << 20
	DefaultMaxFiles    = 10
)

// File names are FilePrefix, the UTC time the file was opened and FileSuffix: sorted by
// name, they are in the order they were written.
const (
	FilePrefix = "audit-"
	FileSuffix = ".jsonl"
)

// FileConfig configures a File sink. Only Dir is required.
type FileConfig struct {
	// Dir holds the files; it is created with mode 0700 (an existing one is set to 0700).
	Dir string
	// MaxSize is a file's size before the next batch goes to a new file; 0 means
	// DefaultMaxFileSize.
	MaxSize int64
	// MaxFiles is how many files Dir keeps, the current one included: the oldest are
	// removed at rotation. 0 means DefaultMaxFiles.
	MaxFiles int
	// Now gives the time in new files' names; nil means time.Now.
	Now func() time.Time
}

// File is the sink of JSON lines: one Record a line, as Record.AppendJSON writes it, in
// files of mode 0600 rotated by size. A batch is written with one write(2) as it comes,
// so that a record is in the operating system's hands (and survives a kill -9 of the
// process) as soon as the Log's writer has taken it; Sync makes it durable (fsync), and is
// called every Config.Sync, at rotation and at Close. A batch that fails (a full disk) is
// truncated away, so that the retry writes it once and no line is ever cut. It is used
// from the Log's writer only: it is not safe for concurrent use.
type File struct {
	cfg   FileConfig
	f     *os.File
	name  string
	size  int64
	dirty bool
	buf   []byte
	enc   encoder
	// fsync makes a file or the directory durable; nil means (*os.File).Sync. Tests count
	// and record what it was given.
	fsync func(*os.File) error
}

// NewFile returns a File sink for cfg, its directory made and checked.
func NewFile(cfg FileConfig) (*File, error) {
	if cfg.Dir == "" {
		return nil, errors.New("no directory")
	}
	if cfg.MaxSize <= 0 {
		cfg.MaxSize = DefaultMaxFileSize
	}
	if cfg.MaxFiles <= 0 {
		cfg.MaxFiles = DefaultMaxFiles
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
		return nil, err
	}
	if err := os.Chmod(cfg.Dir, 0o700); err != nil {
		return nil, err
	}
	// The first file is opened by the first Write, so that a process that audits nothing
	// leaves no empty file to count against MaxFiles; but a directory that cannot be written
	// is an error now.
	probe, err := os.CreateTemp(cfg.Dir, ".probe-*")
	if err != nil {
		return nil, err
	}
	probe.Close()
	os.Remove(probe.Name())
	return &File{cfg: cfg}, nil
}

// Name is "file".
func (s *File) Name() string { return "file" }

// Path returns the file being written.
func (s *File) Path() string { return s.name }

// Write appends recs, one line each, rotating first when the current file is full.
func (s *File) Write(_ context.Context, recs []Record) error {
	s.buf = s.buf[:0]
	for i := range recs {
		s.buf = append(s.enc.append(s.buf, &recs[i]), '\n')
	}
	if s.f == nil || (s.size > 0 && s.size+int64(len(s.buf)) > s.cfg.MaxSize) {
		if err := s.rotate(); err != nil {
			return err
		}
	}
	n, err := s.f.Write(s.buf)
	if err != nil {
		if n > 0 {
			// No cut line, and no line twice when the batch is retried.
			if terr := s.f.Truncate(s.size); terr != nil {
				return fmt.Errorf("audit file %s: %w (and truncating the partial batch: %v)", s.name, err, terr)
			}
		}
		return fmt.Errorf("audit file %s: %w", s.name, err)
	}
	s.size += int64(n)
	s.dirty = true
	return nil
}

// Sync fsyncs the current file when something was written since the last Sync.
func (s *File) Sync(context.Context) error {
	if s.f == nil || !s.dirty {
		return nil
	}
	if err := s.sync(s.f); err != nil {
		return fmt.Errorf("audit file %s: fsync: %w", s.name, err)
	}
	s.dirty = false
	return nil
}

func (s *File) sync(f *os.File) error {
	if s.fsync != nil {
		return s.fsync(f)
	}
	return f.Sync()
}

// Close syncs and closes the current file.
func (s *File) Close(ctx context.Context) error {
	if s.f == nil {
		return nil
	}
	err := s.Sync(ctx)
	if cerr := s.f.Close(); cerr != nil && err == nil {
		err = cerr
	}
	s.f = nil
	return err
}

// rotate syncs and closes the current file, opens a new one and removes the oldest beyond
// MaxFiles.
func (s *File) rotate() error {
	if s.f != nil {
		if err := s.Close(context.Background()); err != nil {
			return err
		}
	}
	if err := s.open(); err != nil {
		return err
	}
	return s.prune()
}

// open creates a new file, named for now (a nanosecond later when that name is taken, so
// that names stay in the order of the files).
func (s *File) open() error {
	// A directory removed while the sidecar runs is made again, rather than failing
	// every rotation from then on.
	if err := os.MkdirAll(s.cfg.Dir, 0o700); err != nil {
		return fmt.Errorf("audit dir: %w", err)
	}
	now := s.cfg.Now().UTC()
	for i := 0; ; i++ {
		stamp := now.Add(time.Duration(i)).Format("20060102T150405.000000000Z")
		name := filepath.Join(s.cfg.Dir, FilePrefix+stamp+FileSuffix)
		f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL|os.O_APPEND, 0o600)
		if errors.Is(err, os.ErrExist) && i < 1000 {
			continue
		}
		if err != nil {
			return fmt.Errorf("audit file: %w", err)
		}
		s.f, s.name, s.size, s.dirty = f, name, 0, false
		// The new name must survive a crash too: sync the directory.
		if d, err := os.Open(s.cfg.Dir); err == nil {
			s.sync(d)
			d.Close()
		}
		return nil
	}
}

// Files lists the audit files in dir, oldest first.
func Files(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range ents {
		if n := e.Name(); e.Type().IsRegular() && strings.HasPrefix(n, FilePrefix) && strings.HasSuffix(n, FileSuffix) {
			out = append(out, filepath.Join(dir, n))
		}
	}
	slices.Sort(out)
	return out, nil
}

// prune removes the oldest files beyond MaxFiles, never the current one.
func (s *File) prune() error {
	files, err := Files(s.cfg.Dir)
	if err != nil {
		return fmt.Errorf("audit dir: %w", err)
	}
	for len(files) > s.cfg.MaxFiles {
		if files[0] != s.name {
			if err := os.Remove(files[0]); err != nil && !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("audit dir: %w", err)
			}
		}
		files = files[1:]
	}
	return nil
}
