"""Start-up: one daemon per state directory, honest failures, the start-up pass."""

import os
import re
import stat
import time
import subprocess

import pytest

from host_helpers import as_user_argv, child_env


def show(r):
    return f"exit {r.returncode}\n--- stdout ---\n{r.stdout}--- stderr ---\n{r.stderr}"


def run_daemon_once(d, argv=None, user=None, timeout=15, env=None):
    """Runs lockwiped with `d`'s paths (or `argv`) and waits for it to exit; one that
    keeps running is stopped and the test fails."""
    argv = as_user_argv(user, argv or d.argv())
    environment = d._env(None)
    environment.update(env or {})
    p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, env=environment)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
        pytest.fail(f"`{' '.join(argv)}` kept running instead of exiting\n"
                    f"--- stdout ---\n{out}--- stderr ---\n{err}")
    return subprocess.CompletedProcess(argv, p.returncode, out, err)


def socket_identity(path):
    st = os.lstat(path)
    assert stat.S_ISSOCK(st.st_mode), f"{path} is not a socket"
    return (st.st_dev, st.st_ino)


# --------------------------------------------------------------------------- one daemon


def test_a_second_daemon_on_the_same_state_directory_exits_1_naming_the_first(make_daemon):
    d = make_daemon()
    first = d.proc.pid
    before = socket_identity(d.socket)

    r = run_daemon_once(d)
    assert r.returncode == 1, "a second lockwiped on the same state directory did not exit 1: " + show(r)
    assert f"pid {first}" in r.stderr, f"the refusal does not name the running daemon (pid {first}): " + show(r)
    assert str(d.state_dir) in r.stderr, "the refusal does not name the state directory: " + show(r)
    assert not re.search(r"\bready\b", r.stderr), "the second daemon said ready: " + show(r)

    assert d.running(), "the first daemon died\n" + d.log_tail()
    assert socket_identity(d.socket) == before, "the second daemon replaced or removed the first one's socket"
    d.ok("status")

    # The same with another socket: it is the state directory that is taken.
    other = d.root / "run" / "other.sock"
    r = run_daemon_once(d, argv=[str(d.bins.lockwiped), "--config", str(d.config), "--state-dir",
                                 str(d.state_dir), "--socket", str(other), "--hooks-dir",
                                 str(d.hooks_dir)])
    assert r.returncode == 1 and f"pid {first}" in r.stderr, show(r)
    assert not other.exists(), "the refused daemon bound its socket"
    d.ok("status")


def test_a_daemon_does_not_take_over_a_socket_another_daemon_serves(make_daemon):
    """Another state directory, the same socket path: the second daemon exits 1 naming
    the first one's pid, does nothing, and the first stays reachable."""
    a = make_daemon()
    first = socket_identity(a.socket)
    b = make_daemon(start=False)
    r = run_daemon_once(b, argv=[str(b.bins.lockwiped), "--config", str(b.config), "--state-dir",
                                 str(b.state_dir), "--socket", str(a.socket), "--hooks-dir",
                                 str(b.hooks_dir)])
    assert r.returncode == 1 and f"pid {a.proc.pid}" in r.stderr and "serving the control socket" in r.stderr, show(r)
    assert " ready" not in r.stderr, show(r)
    assert socket_identity(a.socket) == first, "the refused daemon replaced the socket"
    a.ok("status")


def test_a_socket_path_that_is_not_a_socket_fails_after_the_pass_without_a_crash(make_daemon):
    """A file that is not a socket at the socket's path is left alone: the daemon still
    enforces (the pass does not wait for the socket), then exits 1 saying why."""
    d = make_daemon(start=False)
    d.socket.parent.mkdir(parents=True, exist_ok=True)
    d.socket.write_text("not a socket\n")
    r = run_daemon_once(d)
    assert r.returncode == 1, show(r)
    assert "is not a socket is there" in r.stderr and "Fatal error" not in r.stderr, show(r)
    assert d.socket.read_text() == "not a socket\n"


def test_a_socket_directory_that_cannot_be_created_is_named(make_daemon):
    """The socket's directory cannot be created (a file is where a parent should be): the
    daemon still enforces, then exits 1 naming the directory and why, without a crash."""
    d = make_daemon(start=False)
    blocker = d.root / "blocker"
    blocker.write_text("a file, not a directory\n")
    socket = blocker / "run" / "io.lockwipe.Manager"
    r = run_daemon_once(d, argv=[str(d.bins.lockwiped), "--config", str(d.config), "--state-dir",
                                 str(d.state_dir), "--socket", str(socket), "--hooks-dir",
                                 str(d.hooks_dir)])
    assert r.returncode == 1, show(r)
    assert f"cannot create the control socket's directory {blocker / 'run'}" in r.stderr, show(r)
    assert "Fatal error" not in r.stderr, show(r)
    assert blocker.read_text() == "a file, not a directory\n"


def test_the_socket_is_removed_only_by_the_daemon_that_bound_it(make_daemon):
    """A daemon whose socket path was taken over since it bound it (the file removed and
    another socket bound there) leaves that other socket in place when it stops."""
    import socket as sockets

    a = make_daemon()
    a.socket.unlink()
    other = sockets.socket(sockets.AF_UNIX, sockets.SOCK_STREAM)
    try:
        other.bind(str(a.socket))
        other.listen(1)
        taken = socket_identity(a.socket)
        a.stop()
        assert a.socket.exists(), "the stopping daemon removed a socket another process had bound since"
        assert socket_identity(a.socket) == taken
    finally:
        other.close()
    a.socket.unlink()
    c = make_daemon()
    c.stop()
    assert not c.socket.exists(), "a daemon did not remove its own socket at exit"


# --------------------------------------------------------------------------- permissions


@pytest.mark.parametrize("case", ["root-only-state-directory", "database-still-roots"])
def test_a_daemon_without_permission_on_the_state_says_so_and_exits_1(make_daemon, make_user, case):
    d = make_daemon()  # root's daemon creates its database, then stops
    d.stop()
    db = d.state_dir / "state.sqlite"
    assert db.exists()
    before = sorted(os.listdir(d.state_dir))
    user = make_user()
    os.chown(d.root / "run", user.uid, user.gid)  # it could bind its socket
    if case == "database-still-roots":
        # Handed to the user by hand, but for the database.
        os.chown(d.state_dir, user.uid, user.gid)
        for name in os.listdir(d.state_dir):
            if name != "state.sqlite" and not name.startswith("state.sqlite-"):
                os.chown(d.state_dir / name, user.uid, user.gid)

    r = run_daemon_once(d, user=user)
    assert r.returncode == 1, f"lockwiped as {user.name} on root's state did not exit 1: " + show(r)
    text = r.stderr.lower()
    assert "damaged" not in text, "a permission problem is reported as damage: " + show(r)
    assert "permission" in text, "the failure does not say it is about permissions: " + show(r)
    assert "not running as root" in text, "a daemon not running as root does not warn: " + show(r)
    named = str(d.state_dir) if case == "root-only-state-directory" else str(db)
    assert named in r.stderr, f"the failure does not name {named}: " + show(r)
    assert not re.search(r"\bready\b", text), show(r)

    # Nothing was moved aside; root's daemon starts on it as before.
    os.chown(d.state_dir, 0, 0)
    for name in os.listdir(d.state_dir):
        os.chown(d.state_dir / name, 0, 0)
    assert sorted(os.listdir(d.state_dir)) == before, "the state directory changed"
    d.start()  # and answers status (exit 0: not in the damaged mode)


# --------------------------------------------------------------------------- start-up pass


class NotifyListener:
    """A NOTIFY_SOCKET of the test's own: what lockwiped tells systemd (sd_notify)."""

    def __init__(self, path):
        import socket
        self.path = str(path)
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(self.path)
        self.sock.setblocking(False)
        self.messages = []

    def poll(self):
        while True:
            try:
                self.messages.append(self.sock.recv(4096).decode(errors="replace"))
            except BlockingIOError:
                return self.messages

    def ready(self):
        return any(l == "READY=1" for m in self.poll() for l in m.splitlines())

    def close(self):
        self.sock.close()


def test_status_is_answered_during_the_start_up_pass_and_everything_else_waits(make_daemon, make_user):
    """The offline wipe at boot can be watched: the socket answers status (showing the
    wipe) during the start-up pass; other verbs wait for the pass, saying so, and are then
    served (issue 42: a script running unregister then register right after a restart
    failed with StartingUp); the login gate refuses meanwhile; READY=1 comes only after
    the pass."""
    from daemon_harness import config_text, starting_up
    from host_helpers import wait_until

    d = make_daemon(config=config_text(lock=1, wipe=2, hook_timeout=20), faketime="+0")
    # The willWipe hook holds the start-up pass for a few seconds (a long wipe would).
    d.write_hook("50-slow", '#!/bin/sh\nif [ "$1" = willWipe ]; then sleep 4; fi\n')
    user = make_user()
    vault = d.make_vault(user, "vault")
    d.ok("register", "--user", user.name, "--dir", vault)
    d.stop()

    notify = NotifyListener(d.root / "notify.sock")
    d.extra_env = {"NOTIFY_SOCKET": notify.path}
    try:
        d.start(faketime="+3d", wait=False)  # 3 days offline: the start-up pass wipes

        def watched():
            if not d.running():
                pytest.fail("lockwiped exited during its start-up pass\n" + d.log_tail())
            r = d.ctl("status", "--json", timeout=5)
            return r if r.code == 0 and starting_up(r.out) else None

        r = wait_until(watched, 10, "status to be answered during the start-up pass", details=d.log_tail)
        import json
        doc = json.loads(r.out)
        reg = [x for x in doc["registrations"] if x["user"] == user.name]
        assert reg and reg[0]["state"] in ("wipe-pending", "wiping"), (
            f"status during the start-up pass does not show the wipe in progress: {doc}")
        assert any("start-up pass" in w for w in doc["warnings"]), doc["warnings"]
        assert not notify.ready(), "READY=1 was sent before the start-up pass ended"

        human = d.ctl("status")
        assert human.code == 0 and "start-up pass" in human.out + human.err, human.describe()

        # Asked during the pass: they wait for it, and are served once it has ended.
        import subprocess
        waiting = [subprocess.Popen([str(d.bins.lockwipectl), "--socket", str(d.socket), *verb], stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True) for verb in (["policy"], ["history", user.name])]
        gate = d.ctl("pam-account", "--user", user.name)
        assert gate.code == 1 and "start-up pass" in gate.out, (
            "the login gate did not refuse during the start-up pass: " + gate.describe())
        time.sleep(0.5)
        assert not notify.ready() and all(p.poll() is None for p in waiting), (
            "a request made during the start-up pass did not wait for it")

        d.wait_ready(timeout=30)
        assert notify.ready(), "no READY=1 after the start-up pass"
        for p in waiting:
            out, err = p.communicate(timeout=30)
            assert p.returncode == 0, (p.args, out, err)
            assert "waiting for lockwiped to finish its start-up pass" in err, (p.args, err)
        assert d.state_of(user) == "wiped"
        assert "starting_up" not in d.ok("status", "--json").out
    finally:
        notify.close()


# --------------------------------------------------------------------------- stderr


def test_stderr_lines_carry_priority_prefixes_only_on_a_journal_stream(make_daemon):
    """sd-daemon(3): `<N>` before each line when stderr is the journal stream systemd
    names in JOURNAL_STREAM (device:inode of fd 2); never on anything else."""
    d = make_daemon(start=False)
    d.log_path.touch()
    st = os.stat(d.log_path)
    d.extra_env = {"JOURNAL_STREAM": f"{st.st_dev}:{st.st_ino}"}
    d.start()
    d.stop()
    lines = [l for l in d.log().splitlines() if not l.startswith("###")]
    assert lines, d.log_tail()
    ready = [l for l in lines if "ready" in l]
    assert ready and all(l.startswith("<5>notice ") for l in ready), (
        "the ready line is not `<5>notice ...` on a journal stream:\n" + "\n".join(lines))
    unprefixed = [l for l in lines if not (l[:1] == "<" and l[1:2].isdigit() and l[2:3] == ">")]
    assert not unprefixed, "lines without a <N> prefix on a journal stream:\n" + "\n".join(unprefixed)

    # Another stream (as when stderr was redirected away from the journal): no prefixes.
    d.extra_env = {"JOURNAL_STREAM": f"{st.st_dev}:{st.st_ino + 1}"}
    d.start()
    d.stop()
    lines = [l for l in d.log().splitlines() if not l.startswith("###")]
    assert lines and not [l for l in lines if l.startswith("<")], (
        "a prefix on a stderr that is not the journal stream:\n" + "\n".join(lines))
