"""kill -9 in the middle of lock, unlock, register and reload: after a restart the
state is consistent (database, history and filesystem agree), nothing is lost.

Each trial keeps the action running in a loop on one connection and kills the daemon
at a random moment, so the kill lands at a random point inside an action rather than
between two. Seeds are fixed: a failure names its seed.
"""

import json
import os
import random
import socket
import sqlite3
import threading
import time

import pytest

from daemon_harness import config_text
from host_helpers import owner_of

TRIALS = 20


class Looper:
    """Calls `calls` (a list of varlink calls, cycled) on one connection until stopped
    or the connection breaks; counts the answers."""

    def __init__(self, d, calls):
        self.d = d
        self.calls = calls
        self.answers = 0
        self.errors = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        try:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.settimeout(10)
            s.connect(str(self.d.socket))
            i = 0
            buf = b""
            while not self._stop.is_set():
                s.sendall(json.dumps(self.calls[i % len(self.calls)]).encode() + b"\0")
                while b"\0" not in buf:
                    chunk = s.recv(65536)
                    if not chunk:
                        return
                    buf += chunk
                reply, _, buf = buf.partition(b"\0")
                answer = json.loads(reply)
                if "error" in answer:
                    self.errors.append(answer)
                self.answers += 1
                i += 1
        except OSError:
            return  # the daemon was killed

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join(15)


def call(method, **parameters):
    return {"method": f"io.lockwipe.Manager.{method}", "parameters": parameters}


def integrity_ok(d):
    db = sqlite3.connect(f"file:{d.state_dir / 'state.sqlite'}?mode=ro", uri=True)
    try:
        return db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    finally:
        db.close()


def kill_at_random(d, rng, looper, low=0.05, high=0.4):
    time.sleep(rng.uniform(low, high))
    d.kill9()
    return looper.answers


def assert_consistent(d, user, vault, original_mode, seed):
    state = d.state_of(user)
    owner = owner_of(vault)
    if state == "locked":
        assert owner == (0, 0, 0), \
            f"seed {seed}: locked in the database but the vault is {owner}"
    elif state == "active":
        assert owner == (user.uid, user.gid, original_mode), \
            f"seed {seed}: active in the database but the vault is {owner} " \
            f"(expected {(user.uid, user.gid, original_mode)})"
    else:
        pytest.fail(f"seed {seed}: state {state!r} after a crash during lock/unlock")
    kinds = [e["kind"] for e in d.history(user) if e["kind"] in ("lock", "unlock")]
    if kinds:
        assert (kinds[-1] == "lock") == (state == "locked"), \
            f"seed {seed}: history ends with {kinds[-1]} but the state is {state}"


@pytest.mark.parametrize("seed", range(TRIALS))
def test_kill9_during_lock_and_unlock(make_daemon, make_user, seed):
    rng = random.Random(1000 + seed)
    d = make_daemon(config=config_text())
    user = make_user()
    vault = d.make_vault(user, "vault", mode=0o750)
    d.ok("register", "--user", user.name, "--dir", vault)
    if seed % 2:
        d.ok("lock", "--user", user.name)  # start from locked: the first call unlocks
    first = ["Unlock", "Lock"] if seed % 2 else ["Lock", "Unlock"]
    with Looper(d, [call(m, user=user.name) for m in first]) as looper:
        answered = kill_at_random(d, rng, looper)
    d.start()
    assert integrity_ok(d), f"seed {seed}: the database failed its integrity check"
    assert_consistent(d, user, vault, 0o750, seed)
    # And the registration still works both ways.
    d.ok("lock", "--user", user.name)
    assert owner_of(vault) == (0, 0, 0)
    d.ok("unlock", "--user", user.name)
    assert owner_of(vault) == (user.uid, user.gid, 0o750)
    print(f" seed {seed}: killed after {answered} answers")


@pytest.mark.parametrize("seed", range(TRIALS))
def test_kill9_during_register_and_unregister(make_daemon, make_user, seed):
    rng = random.Random(2000 + seed)
    d = make_daemon(config=config_text())
    user = make_user()
    vault = d.make_vault(user, "vault", mode=0o750)
    calls = [call("Register", user=user.name, directories=[str(vault)]),
             call("Unregister", user=user.name)]
    with Looper(d, calls) as looper:
        answered = kill_at_random(d, rng, looper)
    d.start()
    assert integrity_ok(d), f"seed {seed}: the database failed its integrity check"
    regs = [r for r in d.status()["registrations"] if r["user"] == user.name]
    if regs:
        assert regs[0]["state"] == "active" and regs[0]["directories"] == [str(vault)], \
            f"seed {seed}: half a registration after the crash: {regs[0]}"
        d.ok("unregister", "--user", user.name)
    assert owner_of(vault) == (user.uid, user.gid, 0o750), \
        f"seed {seed}: registering changed the vault: {owner_of(vault)}"
    assert sorted(os.listdir(vault)) == ["notes.txt", "sub"], f"seed {seed}: vault contents changed"
    d.ok("register", "--user", user.name, "--dir", vault)  # and it registers again
    print(f" seed {seed}: killed after {answered} answers")


@pytest.mark.parametrize("seed", range(TRIALS))
def test_kill9_during_reload(make_daemon, make_user, seed):
    rng = random.Random(3000 + seed)
    d = make_daemon(config=config_text(lock=7, wipe=30))
    user = make_user()
    vault = d.make_vault(user, "vault", mode=0o750)
    d.ok("register", "--user", user.name, "--dir", vault)
    configs = [config_text(lock=7, wipe=30), config_text(lock=8, wipe=31)]
    stop = threading.Event()
    reloads = 0

    def reloader():
        nonlocal reloads
        i = 0
        while not stop.is_set() and d.running():
            tmp = d.config.with_suffix(".tmp")
            tmp.write_text(configs[i % 2])
            os.replace(tmp, d.config)  # atomically, as a package manager or editor does
            try:
                d.proc.send_signal(1)  # SIGHUP
            except (AttributeError, ProcessLookupError):
                return
            reloads += 1
            i += 1
            time.sleep(0.005)

    t = threading.Thread(target=reloader, daemon=True)
    # Requests keep arriving while it reloads.
    with Looper(d, [call("GetStatus"), call("GetPolicy")]) as looper:
        t.start()
        kill_at_random(d, rng, looper)
        stop.set()
    t.join(10)
    d.start()
    policy = d.status()["policy"]
    expected = 7 if "= 7" in d.config.read_text() else 8
    assert policy["offline_days_before_lock"] == expected, \
        f"seed {seed}: after restart the policy is {policy}, the file says lock after {expected}"
    assert d.state_of(user) == "active"
    assert owner_of(vault) == (user.uid, user.gid, 0o750)
    print(f" seed {seed}: killed after {reloads} reloads, {looper.answers} answers")
