//go:build linux

// Package smalldisk gives tests a real full disk: a small tmpfs, mounted for the test and
// filled up, whose filler can be removed to free the space again.
package smalldisk

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// Full mounts a tmpfs of 64 KiB on a fresh directory, unmounted when the test ends, fills
// it, and returns the directory and the filler file, whose removal frees the space. A test
// run as root fails when the mount does; one run as another user is skipped, as only root
// can mount.
func Full(tb testing.TB) (dir, filler string) {
	tb.Helper()
	mnt := tb.TempDir()
	if err := syscall.Mount("tmpfs", mnt, "tmpfs", 0, "size=64k,mode=0755"); err != nil {
		if os.Geteuid() != 0 {
			tb.Skipf("mount tmpfs: %v (needs root)", err)
		}
		tb.Fatalf("mount tmpfs as root: %v", err)
	}
	tb.Cleanup(func() {
		if err := syscall.Unmount(mnt, 0); err != nil {
			tb.Errorf("unmount %s: %v", mnt, err)
		}
	})
	filler = filepath.Join(mnt, "filler")
	f, err := os.Create(filler)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	for _, chunk := range []int{4096, 1} {
		buf := make([]byte, chunk)
		for {
			if _, err := f.Write(buf); err != nil {
				if !errors.Is(err, syscall.ENOSPC) {
					tb.Fatalf("filling the tmpfs: %v", err)
				}
				break
			}
		}
	}
	return mnt, filler
}
