#!/usr/bin/env bash
# Runs a command while N other processes keep a CPU busy each, as another tenant of the machine
# would; they stop when it ends. Usage: under_load.sh N COMMAND [ARG ...]
set -uo pipefail
count=$1
shift
busy=()
for ((i = 0; i < count; ++i)); do
  bash -c 'while :; do :; done' &
  busy+=($!)
done
trap 'kill "${busy[@]}" 2>/dev/null' EXIT
"$@"
