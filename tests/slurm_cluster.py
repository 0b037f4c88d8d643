"""A real single-node Slurm for the test suite: install (apt, as root), start, stop.

``SlurmCluster.start()`` installs Debian's ``slurmctld slurmd slurm-client
munge`` when they are missing (root + apt-get; about 25 s), then runs
``tests/slurm/start.sh`` with a fresh temporary ROOT and two free TCP ports,
so it never touches a cluster already running on the machine (or another test
session's). ``stop()`` runs ``tests/slurm/stop.sh``, which kills exactly the
daemons whose pid files live under that ROOT. :func:`unavailable` returns the
reason Slurm cannot be provided here (the tests skip with it), or None.

To run the Slurm tests against an existing cluster instead, set
``HWEVAL_TEST_SLURM_CONF`` (its slurm.conf; the default partition is used
unless ``HWEVAL_TEST_SLURM_PARTITION`` names one) and point ``HWEVAL_STORE``
/ the test's temp dir at a shared filesystem (``--basetemp``).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent / "slurm"
PACKAGES = ("slurmctld", "slurmd", "slurm-client", "munge")
TOOLS = ("slurmctld", "slurmd", "sbatch", "squeue", "scancel", "scontrol", "munged")


def _missing_tools() -> list[str]:
    return [t for t in TOOLS if shutil.which(t) is None and not Path("/usr/sbin", t).exists()]


def install() -> str | None:
    """Install the Slurm packages if needed; returns None on success, else why not."""
    if not _missing_tools():
        return None
    if os.geteuid() != 0:
        return f"Slurm is not installed ({', '.join(_missing_tools())} missing) and the tests do not run as root"
    if shutil.which("apt-get") is None:
        return "Slurm is not installed and there is no apt-get to install it"
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    cmd = ["apt-get", "install", "-y", "-q", *PACKAGES]
    res = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    if res.returncode != 0:  # stale package lists on a fresh image
        subprocess.run(["apt-get", "update", "-q"], capture_output=True, text=True, env=env, timeout=600)
        res = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    if res.returncode != 0 or _missing_tools():
        tail = (res.stderr or res.stdout).strip().splitlines()[-1:] or [""]
        return f"cannot install Slurm with apt-get ({' '.join(PACKAGES)}): {tail[0]}"
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class SlurmCluster:
    """One single-node cluster under a temporary ROOT."""

    def __init__(self) -> None:
        self.root: Path | None = None
        self.conf: Path | None = None
        self.partition: str | None = None
        self.external = False

    def start(self) -> None:
        ext = os.environ.get("HWEVAL_TEST_SLURM_CONF")
        if ext:
            self.external = True
            self.conf = Path(ext)
            self.partition = os.environ.get("HWEVAL_TEST_SLURM_PARTITION")
            return
        self.root = Path(tempfile.mkdtemp(prefix="hweval-slurm-"))
        ports = set()
        while len(ports) < 2:
            ports.add(_free_port())
        ctld, slurmd = sorted(ports)
        env = dict(os.environ, ROOT=str(self.root), SLURMCTLD_PORT=str(ctld), SLURMD_PORT=str(slurmd),
                   KILL_WAIT_S="2", CPUS=str(max(4, os.cpu_count() or 1)), PATH=os.environ.get("PATH", "") + ":/usr/sbin:/sbin")
        res = subprocess.run(["bash", str(HERE / "start.sh")], capture_output=True, text=True, env=env, timeout=300)
        self.conf = self.root / "slurm" / "slurm.conf"
        self.partition = "debug"
        if res.returncode != 0 or "idle" not in res.stdout:
            logs = ""
            for name in ("slurmctld.log", "slurmd.log"):
                p = self.root / "slurm" / "log" / name
                if p.exists():
                    logs += f"\n--- {name}\n" + "\n".join(p.read_text(errors="replace").splitlines()[-15:])
            self.stop()
            raise RuntimeError(f"start.sh failed (rc {res.returncode}):\n{res.stdout}\n{res.stderr}{logs}")

    @property
    def env(self) -> dict[str, str]:
        return {"SLURM_CONF": str(self.conf)}

    def log(self, name: str) -> str:
        if self.root is None:
            return ""
        p = self.root / "slurm" / "log" / name
        return p.read_text(errors="replace") if p.exists() else ""

    def stop(self) -> None:
        if self.external or self.root is None:
            return
        subprocess.run(["bash", str(HERE / "stop.sh")], capture_output=True, text=True,
                       env=dict(os.environ, ROOT=str(self.root)), timeout=60)
        shutil.rmtree(self.root, ignore_errors=True)
