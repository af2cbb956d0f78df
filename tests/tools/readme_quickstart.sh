#!/usr/bin/env bash
# Keeps README.md's quick start true: every command in its first ```sh block must exist and run.
# Each answers --help; the demo then runs for real in its short form on this build and must
# print a test accuracy. (test.sh itself runs only as --help here: it is what runs this test.)
# Usage: readme_quickstart.sh <source dir> <build dir>
set -euo pipefail
src="$1"
build="$2"
cd "$src"
commands=$(awk '/^## Quick start/ { inside = 1 } inside && /^```sh/ { block = 1; next }
                block && /^```/ { exit } block { print $1 }' README.md)
[ -n "$commands" ] || { echo "README.md: no \`\`\`sh block under '## Quick start'" >&2; exit 1; }
for command in $commands; do
  [ -x "$command" ] || { echo "README.md quick start: '$command' is not an executable file" >&2; exit 1; }
  "$command" --help >/dev/null || { echo "README.md quick start: '$command --help' failed" >&2; exit 1; }
  echo "ok: $command --help"
done
# The demo's smelt caches its compiled steps: in the build tree, emptied first, not in the
# ~/.cache of whoever runs the tests.
export SMELT_CACHE_DIR="$build/tests/readme-quickstart-cache"
rm -rf "$SMELT_CACHE_DIR"
log=$(SMELT_BUILD_DIR="$build" scripts/demo.sh --quick 2>&1) || {
  echo "$log"; echo "README.md quick start: 'scripts/demo.sh --quick' failed" >&2; exit 1; }
echo "$log" | tail -2
echo "$log" | grep -qE 'test accuracy: 0\.[0-9]+' ||
  { echo "README.md quick start: the demo printed no test accuracy" >&2; exit 1; }
