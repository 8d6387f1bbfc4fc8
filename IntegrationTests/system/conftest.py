"""pytest fixtures for lockwipe's system tests (black-box tests of the real binaries).

The suite runs the real `lockwiped` and `lockwipectl` binaries found in
$LOCKWIPE_BIN_DIR (scripts/test sets it to `swift build --show-bin-path`). It must
run as root: it creates throwaway Unix users and groups, and the daemon changes
ownership of directories. Everything a test creates lives in its own temporary
directory under /tmp (mode 0755 so that throwaway users can reach their vaults),
and every user, group, process and directory is removed at teardown, also when the
test fails.

This file holds only fixtures; what they build on, and what tests import, is in plain
modules beside it (pytest puts this directory on sys.path, as it does for the tests):
host_helpers.py (users, processes, file trees, polling), daemon_harness.py (the
daemon, lockwipectl runs, config texts, and why time travel moves only the wall
clock) and demo_server.py (the loopback policy server).
"""

from __future__ import annotations

import os
import pwd
import secrets
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

# pytest rewrites the asserts of tests and conftest.py only; these modules' asserts
# (Daemon.ok's and others) get the same detailed failure reports if registered before
# they are imported.
pytest.register_assert_rewrite("host_helpers", "daemon_harness", "demo_server")

from daemon_harness import DEFAULT_CONFIG, Binaries, Daemon, find_faketime_lib
from demo_server import DemoServer
from host_helpers import (
    CHILD_PATH,
    REPO,
    Processes,
    User,
    nobody,
    remove_tree,
    run_as,
)


# --------------------------------------------------------------------------- session


@pytest.fixture(scope="session")
def bins(tmp_path_factory):
    if os.geteuid() != 0:
        pytest.exit(
            "the lockwipe system tests must run as root: they create throwaway "
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
    lib = find_faketime_lib()
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
            # What the test did not start itself (a fork-and-exit chain, a daemon of hers)
            # ends too: kill(-1) as her reaches all of her processes at once, as a scan
            # by pid does not.
            try:
                uid = pwd.getpwnam(name).pw_uid
                subprocess.run(["setpriv", f"--reuid={uid}", "--regid=65534", "--clear-groups", "--",
                                "kill", "-KILL", "-1"], capture_output=True, timeout=10)
            except (KeyError, subprocess.TimeoutExpired):
                pass
            r = subprocess.run(["userdel", name], capture_output=True, text=True)
            if r.returncode != 0:
                r = subprocess.run(["userdel", "-f", name], capture_output=True, text=True)
                if r.returncode != 0:
                    problems.append(f"userdel {name}: {r.stderr.strip()}")
        if problems:
            pytest.fail("could not remove test users: " + "; ".join(problems))


# --------------------------------------------------------------------------- daemon


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


# --------------------------------------------------------------------------- policy server


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
