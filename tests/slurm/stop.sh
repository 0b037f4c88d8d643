#!/bin/bash
# Stop what start.sh started under ROOT, by the PIDs in its pid files (never by name).
ROOT=${ROOT:-/tmp/hweval-slurm}
for pf in $ROOT/slurm/run/slurmd.pid $ROOT/slurm/run/slurmctld.pid $ROOT/munge/munged.pid; do
  [ -s "$pf" ] || continue
  pid=$(cat "$pf")
  if kill -0 "$pid" 2>/dev/null; then
    kill "$pid"
    for i in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$pid" 2>/dev/null && kill -9 "$pid"
  fi
  rm -f "$pf"
done
exit 0
