# Sourced by .ci/run (and scripts/fuzzlog_test.go): tells the Go fuzzer's own -fuzztime
# deadline apart from a finding.

# fuzz_deadline_only LOG TARGET succeeds when LOG, the output of a failed
#   go test -run '^$' -fuzz '^TARGET$' -fuzztime DURATION PKG
# is only the Go fuzzer's own -fuzztime deadline, and not a finding.
#
# Go 1.26's coordinator (internal/fuzz.CoordinateFuzzing) can return the -fuzztime context's
# own error when the deadline fires (a race in its stop function, go.dev/issue/75804, fixed
# in Go 1.27), and testing.(*F).Fuzz prints that error bare, with fmt.Fprintf(f.w, "%v\n",
# err), as the one line of the target's failure:
#   --- FAIL: TARGET (10.02s)
#       context deadline exceeded
# Every other line must be the fuzzer's progress ("fuzz: ..." or "warning: ...") before it,
# or go test's closing lines after it. Anything else is not the deadline: a failing input
# ("Failing input written to ..."), a subtest's failure, a panic, another target's failure,
# or a "context deadline exceeded" with any prefix (the target's own error).
fuzz_deadline_only() {
  local log=$1 target=$2
  [ -s "$log" ] || return 1
  grep -q 'Failing input written' "$log" && return 1
  awk -v target="$target" '
    # state 0: the fuzzer'"'"'s progress; 1: just after the FAIL line; 2: after the message.
    state == 0 && (/^fuzz: / || /^warning: /) { next }
    state == 0 && index($0, "--- FAIL: " target " (") == 1 && /\([0-9.]+s\)$/ { state = 1; next }
    state == 1 && $0 == "    context deadline exceeded" { state = 2; next }
    state == 2 && ($0 == "FAIL" || /^exit status [0-9]+$/ || /^FAIL\t[^ \t]+\t[0-9.]+s$/) { next }
    { bad = 1; exit }
    END { exit !(state == 2 && !bad) }
  ' "$log"
}
