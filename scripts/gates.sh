#!/bin/sh
# SPDX-License-Identifier: MIT
# The quality gates of "make test", each a make target, run in order:
#   lint            clang-format, cppcheck, shellcheck
#   check           unit and integration suites (build/)
#   check-sanitize  the same suites under ASan+UBSan (build-address-undefined/)
#   fuzz            libFuzzer on the listing, option and passwd parsers
# Every gate runs even when an earlier one failed, so one run shows every
# failure; the summary gives each gate's result and wall time, and the exit
# status is 1 when any gate failed.
#
#   sh scripts/gates.sh [MAKE]        (make test passes $(MAKE))
set -u

make=${1:-make}
summary=""
failed=0
total_start=$(date +%s)

for gate in lint check check-sanitize fuzz; do
	echo "==== gate: $gate"
	start=$(date +%s)
	if $make --no-print-directory "$gate"; then
		result=PASS
	else
		result=FAIL
		failed=1
	fi
	secs=$(($(date +%s) - start))
	summary="$summary$(printf '  %-16s %s  %4ds' "$gate" "$result" "$secs")
"
done

echo "==== summary"
printf '%s' "$summary"
printf '  %-16s %s  %4ds\n' total "$([ $failed -eq 0 ] && echo PASS || echo FAIL)" \
	$(($(date +%s) - total_start))
exit $failed
