#!/usr/bin/env bash
# Issue 31's flaky race, run long: Serve on a store without a Claimer must
# never start again a run that ended while its listing was read (it would
# only read the recorded outcome and log the execution's error twice).
# TestServeLogsFailedRunsAtDebug catches it; it failed about once in 150
# runs under load before the fix. Not part of .ci/run (minutes). Usage:
#
#   scripts/serve-race.sh [count]    # default 500
set -euo pipefail
cd "$(dirname "$0")/.."
export GOFLAGS="${GOFLAGS:--trimpath}"
exec go test ./sdk -race -count="${1:-500}" -run '^TestServeLogsFailedRunsAtDebug$'
