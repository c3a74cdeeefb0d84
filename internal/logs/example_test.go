package logs_test

import (
	"fmt"
	"os"

	"github.com/tracecar/tracecar/internal/logs"
)

// A logger fetched once follows level changes made later, for example by the admin API.
func Example() {
	reg, err := logs.New(logs.Config{Format: "json", Writer: os.Stdout})
	if err != nil {
		panic(err)
	}
	defer reg.Close()
	log := reg.Logger(logs.Sidecar)

	log.Debug().Msg("not written: sidecar is at info")
	if err := reg.SetLevel(logs.Sidecar, "debug"); err != nil {
		panic(err)
	}
	fmt.Println(log.Debug().Enabled())
	lvl, _ := reg.Level(logs.Sidecar)
	fmt.Println(lvl)
	// Output:
	// true
	// debug
}
