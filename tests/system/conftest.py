"""Black-box fixtures for the lockwipe integration suite.

The suite runs the real `lockwiped` and `lockwipectl` binaries found in
$LOCKWIPE_BIN_DIR (scripts/test sets it to `swift build --show-bin-path`). It must
run as root: it creates throwaway Unix users and groups, and the daemon changes
ownership of directories. Everything a test creates lives in its own temporary
directory under /tmp (mode 0755 so that throwaway users can reach their vaults),
and every user, group, process and directory is removed at teardown, also when the
test fails.

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
"""

from __future__ import annotations

import hashlib
import json
import os
import pwd
import secrets
import shutil
import signal
import stat
import subprocess
import tempfile
import time
from datetime import datetime
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DAY = 86400

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

CHILD_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


# --------------------------------------------------------------------------- helpers


def wait_until(predicate, timeout, what, interval=0.1, details=None):
    """Poll `predicate` until it returns a truthy value; fail with `what` otherwise."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            extra = ""
            if details is not None:
                extra = "\n" + (details() if callable(details) else str(details))
            pytest.fail(f"{what} (waited {timeout:g} s){extra}")
        time.sleep(interval)


def mode_of(path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def owner_of(path) -> tuple[int, int, int]:
    st = os.lstat(path)
    return st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)


def fill_vault(user, d: Path, files=None):
    """Writes `files` (relative path -> bytes; default: two small files, one in a
    subdirectory) into the directory `d` and gives everything inside it to `user`."""
    files = {"notes.txt": b"field notes\n", "sub/report.csv": b"a,b\n1,2\n"} if files is None else files
    for rel, content in files.items():
        p = d / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(content)
    for dirpath, dirnames, filenames in os.walk(d):
        for n in dirnames + filenames:
            os.lchown(os.path.join(dirpath, n), user.uid, user.gid)


def fmt_owner(t) -> str:
    """(uid, gid, mode) as `uid:gid mode 0755`."""
    return f"{t[0]}:{t[1]} mode {t[2]:04o}"


def sha256_of(path) -> str:
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def fingerprint(path) -> dict:
    """Everything a wipe or lock must not change about `path` and what is below it:
    type, owner, mode, content hash (files), target (symlinks), never following links."""
    path = os.fspath(path)
    result = {}

    def one(p, rel):
        st = os.lstat(p)
        entry = {"uid": st.st_uid, "gid": st.st_gid, "mode": stat.S_IMODE(st.st_mode)}
        if stat.S_ISLNK(st.st_mode):
            entry["type"] = "symlink"
            entry["target"] = os.readlink(p)
        elif stat.S_ISDIR(st.st_mode):
            entry["type"] = "dir"
            entry["entries"] = sorted(os.listdir(p))
        elif stat.S_ISREG(st.st_mode):
            entry["type"] = "file"
            entry["size"] = st.st_size
            entry["sha256"] = sha256_of(p)
        else:
            entry["type"] = "other"
        result[rel] = entry

    one(path, ".")
    if os.path.isdir(path) and not os.path.islink(path):
        for dirpath, dirnames, filenames in os.walk(path, followlinks=False):
            for name in dirnames + filenames:
                full = os.path.join(dirpath, name)
                one(full, os.path.relpath(full, path))
    return result


def parse_time(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


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


class User:
    def __init__(self, name):
        pw = pwd.getpwnam(name)
        self.name = name
        self.uid = pw.pw_uid
        self.gid = pw.pw_gid

    def __repr__(self):
        return f"User({self.name}, uid={self.uid})"


NOBODY = None  # filled lazily


def nobody() -> User:
    global NOBODY
    if NOBODY is None:
        NOBODY = User("nobody")
    return NOBODY


def as_user_argv(user: User | None, argv):
    """argv that runs `argv` as `user` (no PAM, supplementary groups from the group
    database, all capabilities dropped by the uid change)."""
    argv = [os.fspath(a) for a in argv]
    if user is None:
        return argv
    return [
        "setpriv",
        f"--reuid={user.uid}",
        f"--regid={user.gid}",
        "--init-groups",
        "--",
    ] + argv


def child_env(extra=None):
    env = {"PATH": CHILD_PATH, "LANG": "C.UTF-8", "HOME": "/"}
    if extra:
        env.update(extra)
    return env


def run_as(user, argv, input=None, timeout=30, env=None):
    """Run argv (optionally as another user); return CompletedProcess (text)."""
    full = as_user_argv(user, argv)
    return subprocess.run(
        full,
        input=input,
        stdin=None if input is not None else subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=child_env(env),
    )


# --------------------------------------------------------------------------- session


class Binaries:
    def __init__(self, bin_dir: Path, ctl_for_others: Path, faketime_lib: str):
        self.bin_dir = bin_dir
        self.lockwiped = bin_dir / "lockwiped"
        self.lockwipectl = bin_dir / "lockwipectl"
        self.ctl_for_others = ctl_for_others
        self.faketime_lib = faketime_lib


def _find_faketime_lib():
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


@pytest.fixture(scope="session")
def bins(tmp_path_factory):
    if os.geteuid() != 0:
        pytest.exit(
            "the lockwipe integration tests must run as root: they create throwaway "
            "users and the daemon changes directory ownership (run: sudo scripts/test)",
            returncode=1,
        )
    bin_dir = Path(os.environ.get("LOCKWIPE_BIN_DIR", REPO / ".build" / "debug"))
    for name in ("lockwiped", "lockwipectl"):
        exe = bin_dir / name
        if not os.access(exe, os.X_OK):
            pytest.exit(
                f"{exe} is missing or not executable: build first "
                f"(`swift build`) or set LOCKWIPE_BIN_DIR",
                returncode=1,
            )
    for tool in ("setpriv", "useradd", "userdel", "groupadd", "groupdel", "stat"):
        if shutil.which(tool, path=CHILD_PATH) is None:
            pytest.exit(f"{tool} is not installed (see .ci/run)", returncode=1)
    lib = _find_faketime_lib()
    if lib is None:
        pytest.exit("libfaketime is not installed (apt-get install faketime)", returncode=1)

    # Unprivileged users must be able to run lockwipectl. A build tree below a 0700
    # directory is not reachable for them: then they get a copy in a 0755 directory.
    ctl = bin_dir / "lockwipectl"
    probe = run_as(nobody(), ["test", "-x", ctl])
    copy_dir = None
    if probe.returncode != 0:
        copy_dir = tempfile.mkdtemp(prefix="lockwipe-it-bin-", dir="/tmp")
        os.chmod(copy_dir, 0o755)
        shutil.copy2(ctl, os.path.join(copy_dir, "lockwipectl"))
        os.chmod(os.path.join(copy_dir, "lockwipectl"), 0o755)
        ctl = Path(copy_dir) / "lockwipectl"
    try:
        yield Binaries(bin_dir, ctl, lib)
    finally:
        if copy_dir:
            shutil.rmtree(copy_dir, ignore_errors=True)


# --------------------------------------------------------------------------- processes


class Processes:
    """Processes a test started (user processes, hooks it knows of); all ended at
    teardown, by pid, only if they are still the process that was started."""

    def __init__(self):
        self.popens: list[subprocess.Popen] = []
        self.pids: list[tuple[int, bytes]] = []

    def spawn(self, user, argv, **kw):
        kw.setdefault("stdin", subprocess.DEVNULL)
        kw.setdefault("env", child_env())
        p = subprocess.Popen(as_user_argv(user, argv), **kw)
        self.popens.append(p)
        return p

    def adopt_pid(self, pid: int):
        """Remember a process the test did not spawn itself (e.g. a hook); it is
        killed at teardown if its command line is still the same."""
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmdline = f.read()
        except OSError:
            return
        self.pids.append((pid, cmdline))

    def cleanup(self):
        for p in self.popens:
            if p.poll() is None:
                p.kill()
                try:
                    p.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    pass
            for s in (p.stdout, p.stderr):
                if s:
                    s.close()
        for pid, cmdline in self.pids:
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    if f.read() != cmdline:
                        continue
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass


@pytest.fixture
def procs():
    tracker = Processes()
    try:
        yield tracker
    finally:
        tracker.cleanup()


# --------------------------------------------------------------------------- users


@pytest.fixture
def make_group():
    created = []

    def make(prefix="lwt-g"):
        name = f"{prefix}-{secrets.token_hex(4)}"
        subprocess.run(["groupadd", name], check=True, capture_output=True)
        created.append(name)
        return name

    try:
        yield make
    finally:
        for name in created:
            subprocess.run(["groupdel", name], capture_output=True)


@pytest.fixture
def make_user(procs, make_group):
    """Factory for throwaway Unix users (no home, nologin shell); removed at teardown
    after every process the test started has been ended."""
    created = []

    def make(groups=()):
        name = f"lwt-{secrets.token_hex(4)}"
        argv = ["useradd", "--no-create-home", "--shell", "/usr/sbin/nologin"]
        if groups:
            argv += ["-G", ",".join(groups)]
        r = subprocess.run(argv + [name], capture_output=True, text=True)
        if r.returncode != 0:
            pytest.fail(f"could not create test user {name}: {r.stderr}")
        created.append(name)
        return User(name)

    try:
        yield make
    finally:
        procs.cleanup()
        problems = []
        for name in created:
            r = subprocess.run(["userdel", name], capture_output=True, text=True)
            if r.returncode != 0:
                r = subprocess.run(["userdel", "-f", name], capture_output=True, text=True)
                if r.returncode != 0:
                    problems.append(f"userdel {name}: {r.stderr.strip()}")
        if problems:
            pytest.fail("could not remove test users: " + "; ".join(problems))


# --------------------------------------------------------------------------- daemon


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
        self._log_offset = 0
        self.starts = 0

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
        env = child_env({"LOCKWIPE_LOG": "stderr"})
        if faketime is not None:
            env["LD_PRELOAD"] = self.bins.faketime_lib
            env["FAKETIME"] = faketime
            # Only the wall clock moves: libfaketime would report CLOCK_MONOTONIC and
            # CLOCK_BOOTTIME as the faked wall-clock value, which breaks timers (their
            # deadlines land decades ahead) and is not what a real machine does.
            env["FAKETIME_DONT_FAKE_MONOTONIC"] = "1"
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

            def preexec():
                if limit is not None:
                    import resource
                    resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit))

            self.proc = subprocess.Popen(
                self.argv(),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                env=self._env(faketime),
                preexec_fn=preexec,
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
                last = self.ctl("status", timeout=5)
                if last.code == 0:
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
        r = self.ok(*args, user=as_user)
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


def mounts_under(root) -> list[str]:
    """Mount points at or below `root`, deepest first (from /proc/self/mountinfo)."""
    root = os.path.realpath(root)
    found = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            point = line.split()[4].encode().decode("unicode_escape")
            if point == root or point.startswith(root + "/"):
                found.append(point)
    return sorted(found, key=len, reverse=True)


def remove_tree(root):
    """Removes a test's temporary directory, whatever a failed test left in it:
    mounts (unmounted first, so nothing on them is touched), immutable or append-only
    attributes, and trees deeper than Python's recursion limit (rm handles those)."""
    if not os.path.lexists(root):
        return
    for point in mounts_under(root):
        subprocess.run(["umount", "-l", point], capture_output=True)
    subprocess.run(["chattr", "-R", "-f", "-i", "-a", str(root)], capture_output=True)
    subprocess.run(["rm", "-rf", "--one-file-system", "--", str(root)], capture_output=True)


@pytest.fixture
def make_daemon(bins, procs):
    """Factory: make_daemon(config=..., hooks={name: body}, faketime=None, start=True)."""
    daemons = []
    roots = []

    def make(config=DEFAULT_CONFIG, hooks=None, faketime=None, start=True):
        root = Path(tempfile.mkdtemp(prefix="lockwipe-it-", dir="/tmp"))
        roots.append(root)
        os.chmod(root, 0o755)
        d = Daemon(bins, root, procs)
        daemons.append(d)
        if config is not None:
            d.write_config(config)
        for name, body in (hooks or {}).items():
            d.write_hook(name, body)
        if start:
            d.start(faketime=faketime)
        return d

    try:
        yield make
    finally:
        errors = []
        for d in daemons:
            try:
                d.stop()
            except BaseException as e:  # pytest.fail raises a BaseException subclass
                errors.append(str(e))
        procs.cleanup()
        for root in roots:
            remove_tree(root)
        if errors:
            pytest.fail("\n".join(errors))


@pytest.fixture
def daemon(make_daemon):
    return make_daemon()


def config_text(lock=0, wipe=0, grace=1, hook_timeout=5, admin_group=None, extra=""):
    text = (
        f"[policy]\noffline_days_before_lock = {lock}\noffline_days_before_wipe = {wipe}\n"
        f"\n[lock]\nterminate_processes = true\nterminate_grace_seconds = {grace}\n"
        f"\n[hooks]\ntimeout_seconds = {hook_timeout}\n"
    )
    if admin_group is not None:
        text += f'\n[control]\nadmin_group = "{admin_group}"\n'
    return text + extra


def can_list(user: User, path) -> bool:
    return run_as(user, ["ls", "-A", path]).returncode == 0


def empty_or_absent(path) -> bool:
    return not os.path.lexists(path) or (
        os.path.isdir(path) and not os.path.islink(path) and os.listdir(path) == []
    )


# --------------------------------------------------------------------------- policy server


class DemoServer:
    """scripts/lockwipe-demo-server on a free loopback port: the real HTTP server the
    daemon checks in with, told per registration how to answer."""

    def __init__(self, procs: Processes, root: Path, extra_args=()):
        self.procs = procs
        self.root = root
        self.extra_args = list(extra_args)
        self.proc = None
        self.url = None
        self.log_path = root / "demo-server.log"

    def start(self, port=0):
        assert self.proc is None
        url_file = self.root / f"url-{secrets.token_hex(3)}"
        self.log = open(self.log_path, "ab")
        self.proc = self.procs.spawn(None, [
            "/usr/bin/env", "python3", REPO / "scripts" / "lockwipe-demo-server",
            "--port", str(port), "--url-file", url_file, "--state", self.root / "demo-state.json",
            *self.extra_args,
        ], stdout=self.log, stderr=self.log)
        self.url = wait_until(
            lambda: url_file.exists() and url_file.read_text().strip(), 10,
            "the demo policy server did not start", details=lambda: self.log_path.read_text())
        return self

    def stop(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)
        self.proc = None
        if getattr(self, "log", None):
            self.log.close()
            self.log = None

    @property
    def port(self):
        return int(self.url.rsplit(":", 1)[1])

    def _request(self, method, path, body=None):
        import urllib.request
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(
            self.url + path, data=data, method=method,
            headers={"Content-Type": "application/json", "Connection": "close"})
        ctx = None
        if self.url.startswith("https"):
            import ssl
            ctx = ssl.create_default_context()
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        with urllib.request.urlopen(req, timeout=10, context=ctx) as r:
            return json.loads(r.read())

    def set(self, user, **config):
        """How the server answers `user` (a User, a name, or "*" for everyone else)."""
        name = user if isinstance(user, str) else user.name
        return self._request("POST", f"/control/{name}", config)

    def stats(self, user=None):
        if user is None:
            return self._request("GET", "/control")
        name = user if isinstance(user, str) else user.name
        return self._request("GET", f"/control/{name}")["stats"] or {"requests": 0, "answers": {}}

    def reset_stats(self):
        return self._request("POST", "/control/_stats/reset", {})


@pytest.fixture
def make_server(procs):
    servers = []
    roots = []

    def make(extra_args=(), start=True):
        root = Path(tempfile.mkdtemp(prefix="lockwipe-srv-", dir="/tmp"))
        roots.append(root)
        s = DemoServer(procs, root, extra_args)
        servers.append(s)
        if start:
            s.start()
        return s

    try:
        yield make
    finally:
        for s in servers:
            s.stop()
        for root in roots:
            shutil.rmtree(root, ignore_errors=True)


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
