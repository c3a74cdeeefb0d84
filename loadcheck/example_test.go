package loadcheck_test

import (
	"fmt"

	"github.com/tracecar/tracecar/loadcheck"
)

func ExampleParseBudgets() {
	budgets, err := loadcheck.ParseBudgets("fast=5%,fast=cpu:+0.5us,full=added-p99:200us,full=node-cpu:3%")
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, b := range budgets {
		fmt.Printf("%s %q %v\n", b.Mode, b.Metric, b)
	}
	_, err = loadcheck.ParseBudgets("fast=added-p99:5%")
	fmt.Println(err != nil)
	// Output:
	// fast "" 5%
	// fast "cpu" +0.5µs/op
	// full "added-p99" 200µs
	// full "node-cpu" 3%
	// true
}
