# Runs the command after the first two arguments on this MPI rank; on rank 1 it sends the
# process signal $1 (STOP: a hung replica; KILL: a crashed one) after $2 seconds.
signal=$1
delay=$2
shift 2
"$@" &
pid=$!
if [ "${OMPI_COMM_WORLD_RANK}" = 1 ]; then
  sleep "$delay"
  kill -s "$signal" "$pid"
fi
wait "$pid"
