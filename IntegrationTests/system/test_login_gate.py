"""The login gate (`lockwipectl pam-account`, as pam_exec runs it: PAM_USER in the
environment, the message on stdout) against the real daemon, for every registration
state; and what lock on logout does where logind cannot be watched.

A real PAM stack (pam-auth-update, pamtester) and real logind sessions are in
IntegrationTests/e2e/run, on a booted systemd.
"""

import os
import subprocess

import pytest

from daemon_harness import config_text, server_config
from host_helpers import wait_until

ID_LOGOUT_LOCK_UNAVAILABLE = "099c44df8d5c475ab516ef3467a47c3b"


def registered(d, make_user):
    user = make_user()
    user.vault = d.make_vault(user, f"vault-{user.name}")
    d.ok("register", "--user", user.name, "--dir", user.vault)
    return user


def gate(d, name, as_user=None, **kw):
    """lockwipectl pam-account with PAM_USER=name, as pam_exec runs it."""
    env = {"PAM_USER": name, "PAM_TYPE": "account", "PAM_SERVICE": "login"}
    return d.ctl("pam-account", user=as_user, env=env, **kw)


def test_unregistered_active_and_root_pass_silently(daemon, make_user):
    stranger = make_user()
    alice = registered(daemon, make_user)
    for name in (stranger.name, alice.name, "root"):
        r = gate(daemon, name)
        assert r.code == 0 and r.out == "", r.describe()


def test_a_lock_the_user_can_get_lifted_lets_them_in_with_a_notice(daemon, make_user):
    alice = registered(daemon, make_user)
    daemon.ok("lock", "--user", alice.name)
    r = gate(daemon, alice.name)
    assert r.code == 0, r.describe()
    assert r.out.startswith("lockwipe: your data on this machine is locked."), r.describe()
    assert "Ask your administrator to unlock it." in r.out, r.describe()


def test_a_server_lock_refuses_the_login_with_the_reason(make_daemon, make_server, make_user):
    srv = make_server()
    d = make_daemon(config=config_text(extra=server_config(srv.url)))
    alice = registered(d, make_user)
    bob = registered(d, make_user)
    srv.set(alice, mode="lock")
    d.ok("check-in", "--user", alice.name)
    assert d.registration(alice)["lock_trigger"] == "server", d.registration(alice)

    r = gate(d, alice.name)
    assert r.code == 1, r.describe()
    assert r.out.startswith(f"lockwipe: login refused: the policy server locked the data of {alice.name}"), r.describe()
    assert gate(d, bob.name).code == 0

    # The next contact makes the lock liftable (issue 29: lift_after_contact = "at-login"):
    # the gate lets her in, since her login is how she lifts it.
    srv.set(alice, mode="ok")
    d.ok("check-in", "--user", alice.name)
    r = gate(d, alice.name)
    assert r.code == 0 and "the policy server allows it to be unlocked: log in with your password" in r.out, r.describe()


def test_a_wiped_user_is_refused_also_when_they_ask_themselves(daemon, make_user):
    alice = registered(daemon, make_user)
    daemon.ok("wipe", "--user", alice.name, "--yes")
    r = gate(daemon, alice.name)
    assert r.code == 1, r.describe()
    assert f"the data of {alice.name} on this machine was wiped" in r.out, r.describe()
    # A screen locker runs the account stack as the user: they may read their own state.
    r = gate(daemon, alice.name, as_user=alice)
    assert r.code == 1 and "was wiped" in r.out, r.describe()


def test_the_gate_fails_open_when_the_daemon_is_down_and_never_asks_for_root(daemon, make_user):
    alice = registered(daemon, make_user)
    daemon.ok("wipe", "--user", alice.name, "--yes")
    assert gate(daemon, alice.name).code == 1
    daemon.stop()

    r = gate(daemon, alice.name, timeout=20)
    assert r.code == 0, r.describe()
    # Under PAM the reason goes to syslog alone: pam_lockwipe.so would log standard error
    # again, and an internal sentence is no business of the user's terminal (issue 42).
    assert r.out == "" and r.err == "", "nothing is shown to the user: " + r.describe()
    # Run by hand, the administrator reads it.
    r = daemon.ctl("pam-account", "--user", alice.name, timeout=20)
    assert r.code == 0, r.describe()
    assert "allowed without the lockwipe check" in r.err and "cannot reach lockwiped" in r.err, r.describe()
    r = gate(daemon, "root")
    assert r.code == 0 and r.out == "" and r.err == "", r.describe()


def test_a_daemon_that_does_not_answer_is_given_up_on_after_10_s(daemon, make_user, tmp_path):
    """A socket that accepts but never answers (a wedged daemon) must not hang logins."""
    import socket
    import time

    path = str(tmp_path / "silent.sock")
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.bind(path)
        s.listen(4)
        alice = make_user()
        started = time.monotonic()
        r = daemon.ctl("--socket", path, "pam-account", socket=False, env={"PAM_USER": alice.name}, timeout=30)
        took = time.monotonic() - started
    finally:
        s.close()
    assert r.code == 0, r.describe()
    assert "timed out" in r.err, r.describe()
    assert took < 15, f"the gate waited {took:.1f} s"


def test_without_pam_user_it_is_a_usage_error(daemon):
    r = daemon.ctl("pam-account")
    assert r.code == 2 and "PAM_USER" in r.err, r.describe()


@pytest.mark.skipif(os.path.exists("/run/systemd/system"), reason="booted with systemd: logind is watched (IntegrationTests/e2e/run covers it)")
def test_without_logind_lock_timeout_is_reported_and_nothing_breaks(make_daemon, make_user):
    d = make_daemon(config=config_text(extra="\n[passcode]\nlock_timeout = 1\n"))
    alice = registered(d, make_user)
    d.wait_log(lambda log: "lock on logout is disabled" in log, 5, "no notice that lock on logout is off")
    assert d.log_lines(f"MESSAGE_ID={ID_LOGOUT_LOCK_UNAVAILABLE}") or "lock on logout is disabled" in d.log(), d.log_tail()
    warnings = d.status()["warnings"]
    assert [w for w in warnings if f"lock_timeout is set for {alice.name} but lock on logout is disabled" in w], warnings
    import time
    time.sleep(2)
    assert d.state_of(alice) == "active"
    assert d.running()


def test_the_gate_judges_the_account_not_the_spelling_of_its_name(make_daemon, make_server, make_user):
    """A registration belongs to a Unix account. NSS may know that account under another
    name (an alias sharing its uid, a case-insensitive directory): logging in with that name
    must get the same refusal as with the registered one."""
    srv = make_server()
    d = make_daemon(config=config_text(extra=server_config(srv.url)))
    alice = registered(d, make_user)
    srv.set(alice, mode="lock")
    d.ok("check-in", "--user", alice.name)
    assert d.registration(alice)["lock_trigger"] == "server", d.registration(alice)

    alias = f"{alice.name}x"
    r = subprocess.run(["useradd", "--non-unique", "--uid", str(alice.uid), "--gid", str(alice.gid),
                        "--no-create-home", "--shell", "/usr/sbin/nologin", alias], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    try:
        r = gate(d, alias)
        assert r.code == 1, "an alias of a server-locked account was let in: " + r.describe()
        assert f"the policy server locked the data of {alice.name}" in r.out, r.describe()
    finally:
        subprocess.run(["userdel", alias], capture_output=True)
