#!/bin/bash
# Start a single-node Slurm (Debian 12's slurm-wlm 22.05) "cluster" for the test suite, as root, no systemd.
# Adapted from a configuration seen working on this kind of machine: no cgroups, no accounting DB,
# jobcomp/filetxt so finished jobs stay visible after they leave squeue.
# Env: ROOT (state dir, default /tmp/hweval-slurm), SLURMCTLD_PORT, SLURMD_PORT (default 6817/6818;
#      the test set-up picks free ports so two clusters never collide), KILL_WAIT_S (default 2),
#      CPUS (default: nproc; more than the node has is allowed: slurmd then trusts slurm.conf, which lets
#      sleeping test jobs run side by side on a 2-core machine).
# Prereq: apt-get install -y slurmctld slurmd slurm-client munge
# Afterwards: export SLURM_CONF=$ROOT/slurm/slurm.conf   (every client command needs it)
# Stop with stop.sh (same ROOT): it kills exactly the daemons whose pid files are under ROOT.
set -euo pipefail
ROOT=${ROOT:-/tmp/hweval-slurm}
SLURMCTLD_PORT=${SLURMCTLD_PORT:-6817}
SLURMD_PORT=${SLURMD_PORT:-6818}
KILL_WAIT_S=${KILL_WAIT_S:-2}
S=$ROOT/slurm; M=$ROOT/munge
export SLURM_CONF=$S/slurm.conf
mkdir -p $S/state $S/spool $S/run $S/log $M
chmod 755 $ROOT $M            # munged refuses a socket dir that is not world-executable (mode 755)
NODE=$(hostname -s)
NPROC=$(nproc)
CPUS=${CPUS:-$NPROC}
OVERRIDES=""
[ "$CPUS" -gt "$NPROC" ] && OVERRIDES="SlurmdParameters=config_overrides"
# RealMemory above what the node has => the node DRAINs; keep 15% headroom
MEM=$(( $(slurmd -C | sed -n 's/.*RealMemory=\([0-9]*\).*/\1/p') * 85 / 100 ))

# ---- munge: a private key and socket under ROOT (mode 400, owned by root, as munged wants)
if [ ! -f $M/munge.key ]; then
  if [ -f /etc/munge/munge.key ]; then cp /etc/munge/munge.key $M/munge.key
  else dd if=/dev/urandom of=$M/munge.key bs=1 count=1024 status=none; fi
fi
chown root:root $M/munge.key; chmod 400 $M/munge.key
if ! [ -S $M/munge.socket.2 ] || ! munge -S $M/munge.socket.2 -n >/dev/null 2>&1; then
  rm -f $M/munge.socket.2 $M/munge.socket.2.lock
  munged --key-file=$M/munge.key --socket=$M/munge.socket.2 --pid-file=$M/munged.pid \
         --log-file=$M/munged.log --seed-file=$M/munged.seed
fi

cat > $S/slurm.conf <<CONF
ClusterName=hweval-test
SlurmctldHost=$NODE(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$M/munge.socket.2
SlurmctldPort=$SLURMCTLD_PORT
SlurmdPort=$SLURMD_PORT
StateSaveLocation=$S/state
SlurmdSpoolDir=$S/spool
SlurmctldPidFile=$S/run/slurmctld.pid
SlurmdPidFile=$S/run/slurmd.pid
SlurmctldLogFile=$S/log/slurmctld.log
SlurmdLogFile=$S/log/slurmd.log
# no cgroups anywhere
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
# finished jobs leave squeue; the completion log keeps their final state (read by hweval.slurm's poller)
JobCompType=jobcomp/filetxt
JobCompLoc=$S/log/jobcomp.txt
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
# without this every job is given the whole node's memory and jobs run one at a time
DefMemPerCPU=1024
# a job past its --time is killed at once (no grace minutes) and SIGKILLed KillWait s after SIGTERM
OverTimeLimit=0
KillWait=$KILL_WAIT_S
$OVERRIDES
MailProg=/bin/true
MpiDefault=none
ReturnToService=2
MinJobAge=300
SchedulerType=sched/backfill
SchedulerParameters=batch_sched_delay=0,sched_min_interval=0
NodeName=$NODE NodeAddr=127.0.0.1 CPUs=$CPUS RealMemory=$MEM Feature=cpu-test State=UNKNOWN
PartitionName=debug Nodes=$NODE Default=YES MaxTime=INFINITE State=UP
CONF

if scontrol ping >/dev/null 2>&1; then scontrol reconfigure; else slurmctld; fi
for i in $(seq 100); do scontrol ping >/dev/null 2>&1 && break; sleep 0.1; done
if ! { [ -s $S/run/slurmd.pid ] && kill -0 $(cat $S/run/slurmd.pid) 2>/dev/null; }; then slurmd; fi
for i in $(seq 200); do sinfo -h -o %T 2>/dev/null | grep -qE '^(idle|mixed|allocated)' && break; sleep 0.1; done
sinfo -h -o '%P %T %D %N'
