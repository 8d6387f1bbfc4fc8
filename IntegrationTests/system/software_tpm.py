"""A software TPM2 for the tests and benchmarks of sealed keys (issue 43): Debian's swtpm
on a Unix socket, reached through tpm2-tss's swtpm TCTI ("swtpm:path=SOCKET").

swtpm has no resource manager: systemd-creds leaves its session in the TPM when it exits,
which the kernel's /dev/tpmrm0 flushes on a real machine. `SoftwareTPM.wrapper` is a
systemd-creds that runs the real one and then flushes as the kernel would
(tpm2_flushcontext); lockwiped runs it when LOCKWIPE_SYSTEMD_CREDS names it."""

import contextlib
import hashlib
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path


class SoftwareTPM:
    """swtpm on a Unix socket in `directory`, started as firmware would leave it: PCR 7
    extended once (the Secure Boot state)."""

    def __init__(self, directory: Path):
        for tool in ("swtpm", "tpm2_pcrextend", "tpm2_flushcontext", "systemd-creds"):
            if shutil.which(tool) is None:
                raise RuntimeError(f"{tool} is missing: scripts/install-deps installs swtpm and tpm2-tools")
        self.directory = directory
        self.state = directory / "tpm-state"
        self.socket = directory / "tpm.sock"
        self.state.mkdir(parents=True, exist_ok=True)
        self.proc = None
        self.wrapper = directory / "systemd-creds"
        self.wrapper.write_text(
            "#!/bin/sh\n"
            "# systemd-creds, then what the kernel's TPM resource manager does when a process\n"
            "# closes /dev/tpmrm0: flush the sessions and objects it left.\n"
            "/usr/bin/systemd-creds \"$@\"; rc=$?\n"
            f"TPM2TOOLS_TCTI='swtpm:path={self.socket}' tpm2_flushcontext -l >/dev/null 2>&1\n"
            f"TPM2TOOLS_TCTI='swtpm:path={self.socket}' tpm2_flushcontext -t >/dev/null 2>&1\n"
            "exit $rc\n")
        os.chmod(self.wrapper, 0o755)

    @property
    def device(self):
        return f"swtpm:path={self.socket}"

    def start(self, boot_measurement=b"secure boot on"):
        """Powers the TPM on (PCRs reset) and measures `boot_measurement` into PCR 7."""
        self.proc = subprocess.Popen(
            ["swtpm", "socket", "--tpm2", "--tpmstate", f"dir={self.state}",
             "--server", f"type=unixio,path={self.socket}", "--ctrl", f"type=unixio,path={self.socket}.ctrl",
             "--flags", "startup-clear,not-need-init"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 10
        while not (self.socket.exists() and Path(f"{self.socket}.ctrl").exists()):
            if time.monotonic() > deadline or self.proc.poll() is not None:
                raise RuntimeError(f"swtpm did not listen on {self.socket}: {self.proc.stderr.read().decode(errors='replace') if self.proc.poll() is not None else 'no socket after 10 s'}")
            time.sleep(0.02)
        self.extend_pcr7(boot_measurement)

    def extend_pcr7(self, measurement: bytes):
        digest = hashlib.sha256(measurement).hexdigest()
        r = subprocess.run(["tpm2_pcrextend", f"7:sha256={digest}"], env={**os.environ, "TPM2TOOLS_TCTI": self.device},
                           capture_output=True, text=True, timeout=30)
        assert r.returncode == 0, r.stderr

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None
        for p in (self.socket, Path(f"{self.socket}.ctrl")):
            p.unlink(missing_ok=True)


@contextlib.contextmanager
def software_tpm(directory: Path):
    """A started SoftwareTPM in `directory`, stopped afterwards (also on failure)."""
    tpm = SoftwareTPM(directory)
    try:
        tpm.start()
        yield tpm
    finally:
        tpm.stop()
