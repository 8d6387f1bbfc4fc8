"""The lockwipe side of the system tests: one real `lockwiped` per test (`Daemon`,
with its own config, state dir, hooks dir and socket in one temporary directory),
driven by the real `lockwipectl` (`Daemon.ctl`, `CtlResult`), and the configuration
texts the tests give it.

Time travel uses libfaketime (LD_PRELOAD + FAKETIME), moving only the wall clock
(FAKETIME_DONT_FAKE_MONOTONIC=1). libfaketime 0.9.10 cannot shift BOOTTIME by an
offset: with monotonic faking on, it reports CLOCK_MONOTONIC and CLOCK_BOOTTIME as the
faked *wall-clock* value (~1.8e9 s). That makes BOOTTIME jump by decades between runs,
go backwards when the clock is set back (which no real machine does), and Swift's
`Task.sleep` never returns (Dispatch gives the kernel absolute deadlines in the faked
clock domain), so the daemon's timers would not fire. Wall-clock-only travel is what
a machine that was switched off, or whose clock was changed, looks like. Tests that
travel in time still start every daemon run of the test under libfaketime
(`faketime="+0"` for "now").

Plain classes and functions; the fixtures that create daemons are in conftest.py.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from host_helpers import Processes, User, as_user_argv, child_env, fill_vault, wait_until

# Runs argv[2:] with the listening socket argv[1] as systemd passes one: fd 3, LISTEN_FDS=1,
# LISTEN_PID=the pid that execs.
ACTIVATE = (
    "import os, sys\n"
    "fd = int(sys.argv[1])\n"
    "if fd != 3:\n"
    "    os.dup2(fd, 3)\n"
    "    os.close(fd)\n"
    "os.environ.update(LISTEN_FDS='1', LISTEN_PID=str(os.getpid()))\n"
    "os.execv(sys.argv[2], sys.argv[2:])\n"
)

DEFAULT_CONFIG = """\
[policy]
offline_days_before_lock = 0
offline_days_before_wipe = 0

[lock]
terminate_processes = true
terminate_grace_seconds = 1

[hooks]
timeout_seconds = 5
"""


def config_text(lock=0, wipe=0, grace=1, hook_timeout=5, admin_group=None, extra="", lift_after_contact=None):
    """`lift_after_contact`: "immediately" for a test of something else that expects a
    contact to lift a server or offline lock (the default, "at-login", waits for a login)."""
    text = (
        f"[policy]\noffline_days_before_lock = {lock}\noffline_days_before_wipe = {wipe}\n"
        f"\n[lock]\nterminate_processes = true\nterminate_grace_seconds = {grace}\n"
        + (f'lift_after_contact = "{lift_after_contact}"\n' if lift_after_contact else "")
        + f"\n[hooks]\ntimeout_seconds = {hook_timeout}\n"
    )
    if admin_group is not None:
        text += f'\n[control]\nadmin_group = "{admin_group}"\n'
    return text + extra


def server_config(url, interval=3600, timeout=3, ca_file=None, allow_insecure_http=None):
    """The [server] table. The demo server speaks plain http:// unless started with TLS;
    lockwiped accepts that only with `allow_insecure_http = true`, which is added for an
    http:// URL unless the test says otherwise (True/False: written as given)."""
    text = f'\n[server]\nurl = "{url}"\ninterval = {interval}\ntimeout = {timeout}\n'
    if ca_file:
        text += f'ca_file = "{ca_file}"\n'
    if allow_insecure_http is None:
        allow_insecure_http = True if url.startswith("http://") else None
    if allow_insecure_http is not None:
        text += f"allow_insecure_http = {'true' if allow_insecure_http else 'false'}\n"
    return text


# --------------------------------------------------------------------------- binaries


class Binaries:
    def __init__(self, bin_dir: Path, ctl_for_others: Path, faketime_lib: str):
        self.bin_dir = bin_dir
        self.lockwiped = bin_dir / "lockwiped"
        self.lockwipectl = bin_dir / "lockwipectl"
        self.ctl_for_others = ctl_for_others
        self.faketime_lib = faketime_lib


def find_faketime_lib():
    try:
        out = subprocess.run(
            ["dpkg", "-L", "libfaketime"], capture_output=True, text=True
        ).stdout
        for line in out.splitlines():
            if line.endswith("/libfaketime.so.1"):
                return line
    except FileNotFoundError:
        pass
    for cand in (
        "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1",
        "/usr/lib/aarch64-linux-gnu/faketime/libfaketime.so.1",
        "/usr/lib/faketime/libfaketime.so.1",
    ):
        if os.path.exists(cand):
            return cand
    return None


# --------------------------------------------------------------------------- daemon


def starting_up(status_json: str) -> bool:
    """Whether a `status --json` output says the daemon is in its start-up pass."""
    try:
        return bool(json.loads(status_json).get("starting_up"))
    except ValueError:
        return False


class CtlResult(tuple):
    """(exit code, stdout, stderr) of one lockwipectl run; also .pid and .argv."""

    def __new__(cls, code, out, err, pid, argv):
        self = super().__new__(cls, (code, out, err))
        self.pid = pid
        self.argv = argv
        return self

    code = property(lambda self: self[0])
    out = property(lambda self: self[1])
    err = property(lambda self: self[2])

    @property
    def text(self):
        return self.out + self.err

    def describe(self):
        return (
            f"`{' '.join(self.argv)}` exited {self.code}\n"
            f"--- stdout ---\n{self.out}--- stderr ---\n{self.err}"
        )


class Daemon:
    """One lockwiped with its own config, state dir, hooks dir and socket, all inside
    one temporary directory `root`."""

    def __init__(self, bins: Binaries, root: Path, procs: Processes):
        self.bins = bins
        self.root = root
        self.procs = procs
        self.config = root / "etc" / "lockwiped.toml"
        self.dropins = root / "etc" / "lockwiped.toml.d"
        self.state_dir = root / "state"
        self.hooks_dir = root / "hooks.d"
        self.socket = root / "run" / "io.lockwipe.Manager"
        self.data = root / "data"  # vaults live here
        self.outside = root / "outside"  # canaries live here
        self.log_path = root / "daemon.log"
        self.credential_secret = root / "credential.secret"
        for d, m in (
            (root / "etc", 0o755),
            (self.state_dir, 0o700),
            (self.hooks_dir, 0o755),
            (root / "run", 0o755),
            (self.data, 0o755),
            (self.outside, 0o755),
        ):
            d.mkdir(mode=m)
            os.chmod(d, m)
        self.proc: subprocess.Popen | None = None
        self.faketime: str | None = None
        # RLIMIT_NOFILE for the daemon (None: inherit), to prove bounded descriptors.
        self.nofile: int | None = None
        # A command the daemon runs under, e.g. setpriv dropping a capability.
        self.wrapper: list[str] = []
        # More environment for the daemon (e.g. NOTIFY_SOCKET).
        self.extra_env: dict[str, str] = {}
        # A listening socket passed as systemd's socket activation does (fd 3,
        # LISTEN_FDS=1, LISTEN_PID): it outlives each daemon, as lockwiped.socket does.
        self.listener: socket.socket | None = None
        self._log_offset = 0
        self.starts = 0

    def machine_key(self) -> bytes:
        """The machine key, opened as lockwiped opens it: its credential with this test's
        host key (and TPM, when the environment names one), or the plain file."""
        sealed = self.state_dir / "machine.key.cred"
        if not sealed.exists():
            return (self.state_dir / "machine.key").read_bytes()
        env = child_env({"SYSTEMD_CREDENTIAL_SECRET": str(self.credential_secret), **self.extra_env})
        creds = self.extra_env.get("LOCKWIPE_SYSTEMD_CREDS", "systemd-creds")
        p = subprocess.run([creds, "decrypt", "--name=lockwipe-machine-key", str(sealed), "-"],
                           env=env, capture_output=True, timeout=30)
        assert p.returncode == 0 and len(p.stdout) == 32, p.stderr
        return p.stdout

    # ---- configuration and hooks

    def write_config(self, text: str):
        self.config.write_text(text)

    def write_hook(self, name: str, body: str, mode=0o755):
        path = self.hooks_dir / name
        path.write_text(body)
        os.chmod(path, mode)
        return path

    # ---- process control

    def _env(self, faketime):
        # systemd-creds seals lockwiped's keys with the host key of this test's own
        # (systemd's is /var/lib/systemd/credential.secret, which no test may touch).
        env = child_env({"LOCKWIPE_LOG": "stderr", "SYSTEMD_CREDENTIAL_SECRET": str(self.credential_secret)})
        if faketime is not None:
            env["LD_PRELOAD"] = self.bins.faketime_lib
            env["FAKETIME"] = faketime
            # Only the wall clock moves: libfaketime would report CLOCK_MONOTONIC and
            # CLOCK_BOOTTIME as the faked wall-clock value, which breaks timers (their
            # deadlines land decades ahead) and is not what a real machine does.
            env["FAKETIME_DONT_FAKE_MONOTONIC"] = "1"
        env.update(self.extra_env)
        return env

    def argv(self, *extra):
        return [
            *self.wrapper,
            str(self.bins.lockwiped),
            "--config", str(self.config),
            "--state-dir", str(self.state_dir),
            "--socket", str(self.socket),
            "--hooks-dir", str(self.hooks_dir),
            *extra,
        ]

    def start(self, faketime: str | None = None, wait=True):
        assert self.proc is None, "daemon already running"
        self.starts += 1
        self.faketime = faketime
        with open(self.log_path, "ab") as log:
            self._log_offset = log.tell()
            log.write(
                f"### test harness: start #{self.starts}"
                f" FAKETIME={faketime or '(real time)'}\n".encode()
            )
            self._log_offset = log.tell()
            limit = self.nofile
            listener = self.listener.fileno() if self.listener is not None else None
            argv = self.argv()
            if listener is not None:
                # The socket becomes fd 3, and LISTEN_PID the daemon's pid (exec keeps it).
                argv = [sys.executable, "-c", ACTIVATE, str(listener), *argv]

            # Run as lockwiped itself (socket activation's python shim execs it), the daemon
            # starts with the stop signals blocked, as a parent may start it: a SIGTERM sent
            # before it catches them stays pending, and lockwiped must still stop cleanly on
            # it (StopSignals), not die of it or lose it. A wrapper (strace, setpriv) would
            # inherit the mask and never pass the signal on, so it gets none.
            block_stops = not self.wrapper

            def preexec():
                if block_stops:
                    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGINT})
                if limit is not None:
                    import resource
                    resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit))

            self.proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                env=self._env(faketime),
                preexec_fn=preexec,
                pass_fds=(listener,) if listener is not None else (),
            )
        if wait:
            self.wait_ready()
        return self

    def wait_ready(self, timeout=10):
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                code = self.proc.returncode
                self.proc = None
                pytest.fail(
                    f"lockwiped exited with status {code} during start-up instead of "
                    f"serving {self.socket}\n{self.log_tail()}"
                )
            if self.socket.exists():
                # The socket answers status during the start-up pass too (starting_up):
                # ready is when that pass has ended.
                last = self.ctl("status", "--json", timeout=5)
                # 3 and 4: a lock-failed registration, a machine key that does not open:
                # the report is complete all the same.
                if last.code in (0, 3, 4) and not starting_up(last.out):
                    return
            time.sleep(0.1)
        msg = (
            f"lockwiped did not answer `lockwipectl --socket {self.socket} status` "
            f"within {timeout} s"
        )
        if last is not None:
            msg += "\nlast attempt: " + last.describe()
        pytest.fail(msg + "\n" + self.log_tail())

    def stop(self, check=True):
        """SIGTERM, SIGKILL after 5 s; the daemon must exit 0 on SIGTERM."""
        p = self.proc
        if p is None:
            return None
        self.proc = None
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(timeout=5)
                if check:
                    pytest.fail(
                        "lockwiped did not exit within 5 s after SIGTERM (killed)\n"
                        + self.log_tail()
                    )
                return p.returncode
        if check and p.returncode != 0:
            pytest.fail(
                f"lockwiped exited with status {p.returncode} on SIGTERM (expected 0)\n"
                + self.log_tail()
            )
        return p.returncode

    def kill9(self):
        """SIGKILL, as a crash or power loss would end it: no shutdown code runs."""
        p = self.proc
        assert p is not None, "daemon not running"
        self.proc = None
        p.kill()
        p.wait(timeout=10)

    def restart(self, faketime: str | None = None):
        self.stop()
        return self.start(faketime=faketime)

    def hup(self):
        assert self.proc is not None and self.proc.poll() is None, "daemon not running"
        self.proc.send_signal(signal.SIGHUP)

    def running(self):
        return self.proc is not None and self.proc.poll() is None

    # ---- log

    def log(self) -> str:
        """The daemon's log of the current (or last) run."""
        with open(self.log_path, "rb") as f:
            f.seek(self._log_offset)
            return f.read().decode("utf-8", "replace")

    def full_log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def log_tail(self, lines=60):
        text = self.full_log().splitlines()[-lines:]
        return "--- lockwiped log (last lines) ---\n" + "\n".join(text)

    def log_lines(self, *needles, since=0):
        """Lines of the current run's log containing all `needles`."""
        return [
            l for l in self.log().splitlines()[since:] if all(n in l for n in needles)
        ]

    def wait_log(self, predicate, timeout, what):
        return wait_until(
            lambda: [l for l in self.log().splitlines() if predicate(l)],
            timeout,
            what,
            details=self.log_tail,
        )

    # ---- control

    def ctl(self, *args, user: User | None = None, input=None, timeout=30, env=None,
            socket=True):
        ctl = self.bins.lockwipectl if user is None else self.bins.ctl_for_others
        argv = [str(ctl)]
        if socket:
            argv += ["--socket", str(self.socket)]
        argv += [str(a) for a in args]
        full = as_user_argv(user, argv)
        p = subprocess.Popen(
            full,
            stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=child_env(env),
        )
        try:
            out, err = p.communicate(input=input, timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            out, err = p.communicate()
            pytest.fail(
                f"`{' '.join(argv)}`"
                f"{' as ' + user.name if user else ''} did not finish within "
                f"{timeout} s\nstdout: {out}\nstderr: {err}\n{self.log_tail()}"
            )
        shown = argv if user is None else [f"(as {user.name})"] + argv
        return CtlResult(p.returncode, out, err, p.pid, shown)

    def ok(self, *args, **kw) -> CtlResult:
        r = self.ctl(*args, **kw)
        assert r.code == 0, "expected success: " + r.describe() + "\n" + self.log_tail()
        return r

    def status(self, user: User | None = None, as_user: User | None = None) -> dict:
        args = ["status", "--json"]
        if user is not None:
            args += ["--user", user.name]
        r = self.ctl(*args, user=as_user)
        # 3: a registration shown is lock-failed; 4: the machine key cannot be opened (the
        # report is complete all the same).
        assert r.code in (0, 3, 4), "expected a status report: " + r.describe() + "\n" + self.log_tail()
        try:
            return json.loads(r.out)
        except ValueError as e:
            pytest.fail(f"`lockwipectl status --json` printed invalid JSON ({e}):\n{r.out}")

    def registration(self, user: User):
        regs = [r for r in self.status()["registrations"] if r.get("user") == user.name]
        assert len(regs) <= 1, f"{user.name} is listed more than once in status: {regs}"
        return regs[0] if regs else None

    def state_of(self, user: User):
        reg = self.registration(user)
        return None if reg is None else reg.get("state")

    def history(self, user: User | None = None) -> list:
        r = self.ok("history", "--json")
        events = json.loads(r.out)["events"]
        if user is not None:
            events = [e for e in events if e.get("user") == user.name]
        return events

    # ---- vaults

    def make_vault(self, user: User, name: str, files=None, mode=0o750) -> Path:
        """A pre-existing directory owned by `user`, with some files."""
        d = self.data / name
        d.mkdir()
        fill_vault(user, d, files)
        os.chown(d, user.uid, user.gid)
        os.chmod(d, mode)
        return d
