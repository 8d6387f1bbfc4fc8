"""Warnings before offline locks and wipes (`[notify] warn_before`) with the real daemon,
the real demo policy server and libfaketime: the warnLock / warnWipe hooks run once per
threshold (not again further inside the window or after a restart, again after a contact
moved the threshold), the daemon wakes by itself when a registration enters its window,
the journal entry has its MESSAGE_ID, `status` and the login gate show the warning, and
the login is still allowed.

The window is set to open a few seconds after the contact (warn_before = one day minus
WAKE_AFTER seconds with a one-day threshold), so the daemon must wake on its own, while
"later inside the window" is a restart under faketime (wall clock only, as
daemon_harness.py explains).
"""

import re
import time
from datetime import timedelta

import pytest

from daemon_harness import config_text, server_config
from host_helpers import DAY, parse_time, wait_until

# systemd/lockwipe.catalog explains it; MessageID.warning.
ID_WARNING = "5eced5a4f22c4178ba24f2447d4af383"
WAKE_AFTER = 8

RECORDER = """#!/bin/bash
printf '%s|%s|%s|%s|%s|%s|%s|%s\\n' "$1" "$2" "$LOCKWIPE_EVENT" "$LOCKWIPE_ACTION" "$LOCKWIPE_USER" \\
  "$LOCKWIPE_TRIGGER" "$LOCKWIPE_DUE" "$LOCKWIPE_DUE_ISO" >> {out}
"""
FIELDS = ["arg1", "arg2", "event", "action", "user", "trigger", "due", "due_iso"]


def records(path, event=None):
    if not path.exists():
        return []
    rows = [dict(zip(FIELDS, line.split("|"))) for line in path.read_text().splitlines()]
    return [r for r in rows if event is None or r["event"] == event]


def notify(warn_before):
    return f"\n[notify]\nwarn_before = {warn_before}\n"


def gate(d, name):
    """lockwipectl pam-account as pam_exec runs it (test_login_gate.py)."""
    env = {"PAM_USER": name, "PAM_TYPE": "account", "PAM_SERVICE": "login"}
    return d.ctl("pam-account", env=env)


# lock: the server's policy locks after 1 day; wipe: it wipes after 1 day, never locks.
CASES = {
    "lock": dict(days=("1", "0"), local=dict(lock=1, wipe=0)),
    "wipe": dict(days=("0", "1"), local=dict(lock=0, wipe=1)),
}


@pytest.mark.parametrize("action", ["lock", "wipe"])
def test_a_warning_hook_runs_once_per_threshold_and_again_after_a_contact(make_daemon, make_server, make_user, action):
    case = CASES[action]
    event = "warnLock" if action == "lock" else "warnWipe"
    srv = make_server(extra_args=["--lock-days", case["days"][0], "--wipe-days", case["days"][1]])
    d = make_daemon(
        config=config_text(**case["local"], extra=server_config(srv.url) + notify(DAY - WAKE_AFTER)),
        faketime="+0", start=False)
    out = d.root / "hook-records"
    d.write_hook("10-record", RECORDER.format(out=out))
    d.start(faketime="+0")
    user = make_user()
    vault = d.make_vault(user, "vault")
    d.ok("register", "--user", user.name, "--dir", vault)
    wait_until(lambda: d.registration(user).get("last_attempt"), 10, "the first check-in was not answered")
    reg = d.registration(user)
    assert reg["policy"]["source"] == "server", reg
    assert reg["warning"] is None, f"warned before the window opened: {reg}"
    contact = parse_time(reg["last_contact"])

    # The window opens WAKE_AFTER seconds after the contact: the daemon wakes for it.
    wait_until(lambda: records(out, event), WAKE_AFTER + 15,
               f"the {event} hook did not run when the registration entered its window",
               details=d.log_tail)
    rec = records(out)
    assert [r["event"] for r in rec] == [event], f"hooks ran as {rec}"
    r = rec[0]
    assert r["arg1"] == event and r["arg2"] == user.name and r["user"] == user.name, r
    assert r["action"] == action and r["trigger"] == "offline", r
    due = parse_time(r["due_iso"])
    assert abs(due - (contact + timedelta(days=1))) <= timedelta(seconds=5), (
        f"LOCKWIPE_DUE_ISO is {r['due_iso']}, the {action} is due at about {contact + timedelta(days=1)}")
    assert abs(int(r["due"]) - int(due.timestamp())) <= 1, r

    reg = d.registration(user)
    assert reg["state"] == "active", reg
    assert reg["warning"] and reg["warning"]["action"] == action, f"status --json has no warning: {reg}"
    assert 0 < reg["warning"]["in_seconds"] <= DAY - WAKE_AFTER, reg
    human = d.ok("status").out
    assert f"{user.name}: warning: {'LOCKS' if action == 'lock' else 'WIPES'} in " in human, human
    journal = d.log_lines(f"MESSAGE_ID={ID_WARNING}", f"LOCKWIPE_USER={user.name}")
    assert len(journal) == 1, "not exactly one journal entry with the warning's MESSAGE_ID:\n" + d.log_tail()
    kinds = [e["kind"] for e in d.history(user)]
    assert kinds.count(f"warn-{action}") == 1, kinds

    # Later inside the same window, across a restart, with the server failing (no
    # contact): no second warning.
    srv.set(user, mode="500")
    d.restart(faketime="+6h")
    assert d.registration(user)["warning"]["action"] == action
    time.sleep(3)  # room for a wrong second run
    assert records(out, event) == rec, f"the {event} hook ran again for the same threshold: {records(out)}"
    assert not d.log_lines(f"MESSAGE_ID={ID_WARNING}"), "the warning was logged again after a restart"

    # A contact moves the threshold a day ahead of the new contact; its window opens
    # WAKE_AFTER seconds later and is warned about once more.
    srv.set(user, mode="ok")
    d.ok("check-in", "--user", user.name)
    reg = d.registration(user)
    assert reg["warning"] is None, f"still warned right after a contact: {reg}"
    new_contact = parse_time(reg["last_contact"])
    assert new_contact >= contact + timedelta(hours=6) - timedelta(minutes=1), reg
    wait_until(lambda: len(records(out, event)) >= 2, WAKE_AFTER + 15,
               f"the {event} hook did not run again in the window after the contact", details=d.log_tail)
    time.sleep(2)
    second = records(out, event)
    assert len(second) == 2, f"hooks ran as {second}"
    assert abs(parse_time(second[1]["due_iso"]) - (new_contact + timedelta(days=1))) <= timedelta(seconds=5), second


def test_the_login_gate_prints_the_warning_and_lets_the_user_in(make_daemon, make_user):
    # Locks after 2 days, warns 3 days ahead: in the window from the registration on.
    d = make_daemon(config=config_text(lock=2, wipe=5, extra=notify(3 * DAY)))
    user = make_user()
    d.ok("register", "--user", user.name, "--dir", d.make_vault(user, "vault"))
    reg = d.registration(user)
    assert reg["warning"] and reg["warning"]["action"] == "lock", reg
    r = gate(d, user.name)
    assert r.code == 0, "a warning refused the login: " + r.describe()
    # 2 days from the registration: "2d" within its first second, "1d 23h" after.
    assert re.search(rf"the data of {re.escape(user.name)} on this machine will be LOCKED in (2d|1d 23h) ", r.out), r.describe()
    # The due time, absolute: the one status gives (a second either way: each reading
    # counts offline time from its own clock reading).
    at = re.search(r"\(at (\S+)\)", r.out)
    assert at and abs(parse_time(at.group(1)) - parse_time(reg["warning"]["at"])) <= timedelta(seconds=2), r.describe()
    assert f"`lockwipectl check-in --user {user.name}` checks in now" in r.out, r.describe()


def test_warn_before_zero_never_warns(make_daemon, make_user):
    d = make_daemon(config=config_text(lock=2, wipe=5, extra=notify(0)), faketime="+0", start=False)
    out = d.root / "hook-records"
    d.write_hook("10-record", RECORDER.format(out=out))
    d.start(faketime="+0")
    user = make_user()
    d.ok("register", "--user", user.name, "--dir", d.make_vault(user, "vault"))
    d.restart(faketime="+47h")  # an hour before the lock
    reg = d.registration(user)
    assert reg["state"] == "active" and reg["warning"] is None, reg
    r = gate(d, user.name)
    assert r.code == 0 and r.out == "", r.describe()
    time.sleep(1)
    assert records(out) == [], f"hooks ran with warn_before = 0: {records(out)}"
    assert not d.log_lines(f"MESSAGE_ID={ID_WARNING}"), d.log_tail()
