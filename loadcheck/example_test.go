package loadcheck_test

import (
	"fmt"
	"io"

	"github.com/tracecar/tracecar/loadcheck"
)

func ExampleParseFlags() {
	cfg, err := loadcheck.ParseFlags([]string{
		"--node", "127.0.0.1:9042", "--sidecar", "127.0.0.1:9043", "--admin", "http://127.0.0.1:10000",
		"--modes", "direct,off,fast", "--mode", "slowall=POST /storage_service/slow_query?enable=true&threshold=0",
		"--max-overhead", "fast=5%,slowall=20%", "--rate", "30000/s",
	}, io.Discard)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(cfg.Modes, cfg.ModeSpecs["slowall"])
	fmt.Println(cfg.MaxOverhead["fast"], cfg.MaxOverhead["slowall"], cfg.Rate)

	_, err = loadcheck.ParseFlags([]string{"--modes", "direct,off", "--max-overhead", "fast=5%"}, io.Discard)
	fmt.Println(err)
	// Output:
	// [direct off fast] POST /storage_service/slow_query?enable=true&threshold=0
	// 5 20 30000
	// --max-overhead names mode "fast", which is not run; the modes run are direct, off
}
