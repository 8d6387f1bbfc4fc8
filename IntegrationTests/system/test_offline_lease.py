"""Offline leases (issue 30): a lease granted by the policy server in its settings answer
(`"offlineLease": {"until": ...}`, lockwipe's own protocol) holds the offline lock and
wipe off until it ends; then the lock comes at its end and the wipe the policy's
lock-to-wipe gap later. A lease past `[offline_codes] max_lease_days` is refused and
changes nothing. Grants, refusals and ends are in history and the journal; status, the
metrics file and the certificate of a later wipe show the lease.

Daemon runs that travel in time are under libfaketime (wall clock only, see
daemon_harness.py); the demo server runs in real time and fixes the lease's end when it is
told to send one (`lease_days`).
"""

import json
import os
import re
import subprocess
from datetime import timedelta

from daemon_harness import config_text, server_config
from host_helpers import DAY, child_env, empty_or_absent, fingerprint, owner_of, parse_time, wait_until

ID_LEASE_GRANTED = "226413ba10b84a32aa252e01a478b240"
ID_LEASE_ENDED = "d33b28c5d9384feca899185e88826f9f"
ID_LEASE_REFUSED = "6090f04e397c47c8a78e5dc4cc4c09df"
SLACK = timedelta(minutes=5)
LEASE_GAUGE = "lockwipe_registration_offline_lease_end_timestamp_seconds"


def near(actual, expected, what):
    got = parse_time(actual)
    assert abs(got - expected) <= SLACK, f"{what} is {got}, expected about {expected}"


def leased_daemon(make_daemon, srv, lock=2, wipe=5, extra=""):
    """A daemon checking in with `srv` (which serves the policy lock/wipe days), writing
    the metrics file, under faketime "+0"."""
    d = make_daemon(config=None, start=False)
    d.metrics_dir = d.root / "textfile"
    d.metrics_dir.mkdir(mode=0o755)
    d.metrics_file = d.metrics_dir / "lockwipe.prom"
    d.write_config(config_text(lock=lock, wipe=wipe, extra=server_config(srv.url, timeout=2)
                               + f'\n[metrics]\ntextfile = "{d.metrics_file}"\n' + extra))
    d.start(faketime="+0")
    return d


def register(d, user):
    user.vault = d.make_vault(user, f"vault-{user.name}")
    d.ok("register", "--user", user.name, "--dir", user.vault)
    wait_until(lambda: d.registration(user).get("last_attempt"), 10,
               "the check-in a registration makes at once was not answered")
    return d.registration(user)


def lease_samples(d, user):
    text = d.metrics_file.read_text() if d.metrics_file.exists() else ""
    return re.findall(rf'^{LEASE_GAUGE}{{user="{user.name}",uid="{user.uid}",source="([a-z-]+)"}} (\d+)$', text, re.M)


def kinds(d, user, kind):
    return [e for e in d.history(user) if e["kind"] == kind]


def test_a_server_lease_holds_lock_and_wipe_off_until_it_ends_then_lock_then_wipe(make_daemon, make_server, make_user):
    srv = make_server(extra_args=["--lock-days", "2", "--wipe-days", "5"])
    d = leased_daemon(make_daemon, srv)
    user = make_user()
    srv.set(user, mode="ok", lease_days=10)
    reg = register(d, user)
    canaries = fingerprint(d.outside)
    contact = parse_time(reg["last_contact"])
    assert reg["policy"]["source"] == "server" and reg["policy"]["offline_days_before_lock"] == 2, reg

    # Granted at the check-in: status, history, journal, metrics.
    lease = reg["lease"]
    assert lease and lease["source"] == "server" and lease["reference"] == srv.url, reg
    assert lease["in_force"] is True and lease["ended_at"] is None, lease
    until = parse_time(lease["until"])
    near(lease["until"], contact + timedelta(days=10), "the lease's end")
    assert reg["next_action"]["action"] == "lock", reg
    near(reg["next_action"]["at"], until, "the lock planned at the lease's end")
    human = d.ok("status").out
    assert f"{user.name}: offline lease until {lease['until']} (granted by the policy server, {srv.url})" in human, human
    granted = kinds(d, user, "lease-granted")
    assert len(granted) == 1 and granted[0]["trigger"] == "server", granted
    assert lease["until"] in granted[0]["detail"] and "policy server" in granted[0]["detail"], granted
    journal = d.log_lines(f"MESSAGE_ID={ID_LEASE_GRANTED}", f"LOCKWIPE_USER={user.name}")
    assert len(journal) == 1 and "LOCKWIPE_LEASE_SOURCE=server" in journal[0], d.log_tail()
    assert f"LOCKWIPE_LEASE_UNTIL={lease['until']}" in journal[0], journal
    wait_until(lambda: lease_samples(d, user), 10, "the metrics file to show the lease",
               details=lambda: d.metrics_file.read_text() if d.metrics_file.exists() else "(no file)")
    assert lease_samples(d, user) == [("server", str(int(until.timestamp())))], d.metrics_file.read_text()

    # The same lease in the next answer is not granted again.
    d.ok("check-in", "--user", user.name)
    assert len(kinds(d, user, "lease-granted")) == 1, kinds(d, user, "lease-granted")

    # From now on the server cannot be reached (no contact).
    srv.set(user, mode="500")

    # Six days offline, past lock (2) and wipe (5): the lease holds both off.
    d.restart(faketime="+6d")
    reg = d.registration(user)
    assert reg["state"] == "active" and reg["offline_seconds"] >= 6 * DAY - 300, reg
    assert owner_of(user.vault)[2] == 0o750, "the vault was touched while the lease was in force"
    assert reg["lease"]["in_force"] is True, reg
    near(reg["next_action"]["at"], until, "the lock planned at the lease's end")
    assert not kinds(d, user, "lock") and not kinds(d, user, "wipe"), d.history(user)

    # Nine days: within [notify] warn_before (2 days) of the lease's end: the warning of
    # the lock is planned from it and names the lease, at login too.
    d.restart(faketime="+9d")
    reg = d.registration(user)
    assert reg["state"] == "active" and reg["warning"] and reg["warning"]["action"] == "lock", reg
    near(reg["warning"]["at"], until, "the warning's lock time")
    # (The registration was warned at once, before its first check-in: the local lock after
    # 2 days was within warn_before.)
    warned = [e for e in kinds(d, user, "warn-lock") if f"offline lease until {lease['until']}" in e["detail"]]
    assert len(warned) == 1, kinds(d, user, "warn-lock")
    login = d.ctl("pam-account", env={"PAM_USER": user.name, "PAM_TYPE": "account", "PAM_SERVICE": "login"})
    assert login.code == 0 and "will be LOCKED" in login.out and f"offline lease until {lease['until']}" in login.out, login.describe()

    # Eleven days: the lease ended on day 10; the lock comes, the wipe not yet (the
    # policy's 3 days from lock to wipe count from the lease's end).
    d.restart(faketime="+11d")
    reg = d.registration(user)
    assert reg["state"] == "locked" and reg["lock_trigger"] == "offline", reg
    assert owner_of(user.vault) == (0, 0, 0), "the vault is not locked after the lease ended"
    assert reg["lease"]["in_force"] is False and reg["lease"]["ended_at"], reg
    assert reg["next_action"]["action"] == "wipe", reg
    near(reg["next_action"]["at"], until + timedelta(days=3), "the wipe planned the lock-to-wipe gap after the lease's end")
    history = d.history(user)
    ended = [i for i, e in enumerate(history) if e["kind"] == "lease-ended"]
    locks = [i for i, e in enumerate(history) if e["kind"] == "lock"]
    assert len(ended) == 1 and len(locks) == 1 and ended[0] < locks[0], [e["kind"] for e in history]
    assert "offline lease" in history[locks[0]]["detail"], history[locks[0]]
    assert d.log_lines(f"MESSAGE_ID={ID_LEASE_ENDED}", f"LOCKWIPE_USER={user.name}"), d.log_tail()
    assert not lease_samples(d, user), "the metrics file still shows a lease that ended"

    # Fourteen days: wiped; nothing outside changed; the certificate names the lease.
    d.restart(faketime="+14d")
    reg = d.registration(user)
    assert reg["state"] == "wiped", reg
    assert empty_or_absent(user.vault), os.listdir(user.vault)
    assert fingerprint(d.outside) == canaries, "the wipe changed files outside the vault"
    r = d.ok("certificate", "--user", user.name, "--json")
    cert = json.loads(r.out)
    assert cert["request"]["lease"] == {
        "until": lease["until"], "granted_at": lease["granted_at"], "source": "server", "reference": srv.url, "in_force": False,
    }, cert["request"]
    assert "ended before the wipe was requested" in d.ok("certificate", "--user", user.name).out


def test_an_ended_lease_stays_ended_after_the_clock_is_set_back_and_a_contact(make_daemon, make_server, make_user):
    """Issue 42, item 8: a lease ends on the offline clock; setting the wall clock back and
    one contact must not bring it back (the README: setting the clock back does not
    lengthen it). At a contact the lease keeps what was left of it, and no more."""
    srv = make_server(extra_args=["--lock-days", "5", "--wipe-days", "10"])
    d = leased_daemon(make_daemon, srv, lock=5, wipe=10)
    user = make_user()
    srv.set(user, mode="ok", lease_days=2)
    reg = register(d, user)
    assert reg["lease"] and reg["lease"]["in_force"] is True, reg
    srv.set(user, mode="500")

    # Three days offline: the two-day lease ended, and that is recorded.
    d.restart(faketime="+3d")
    reg = d.registration(user)
    assert reg["lease"]["in_force"] is False and reg["lease"]["ended_at"], reg
    assert len(kinds(d, user, "lease-ended")) == 1, d.history(user)

    # The wall clock is set back three days; the server answers again, with no lease.
    d.restart(faketime="+0")
    srv.set(user, reset=True, mode="ok")
    d.ok("check-in", "--user", user.name)
    reg = d.registration(user)
    contact = parse_time(reg["last_contact"])
    assert reg["offline_seconds"] < 300, reg
    lease = reg["lease"]
    assert lease["in_force"] is False and lease["remaining_seconds"] == 0 and lease["ended_at"], reg
    # The policy counts from the contact alone: the lock after its five days.
    assert reg["next_action"]["action"] == "lock", reg
    near(reg["next_action"]["at"], contact + timedelta(days=5), "the lock planned by the policy, not by an ended lease")
    human = d.ok("status").out
    assert f"{user.name}: offline lease" not in human, human
    assert len(kinds(d, user, "lease-ended")) == 1 and len(kinds(d, user, "lease-granted")) == 1, d.history(user)


def test_a_server_lease_past_the_maximum_is_refused_once_and_changes_nothing(make_daemon, make_server, make_user):
    srv = make_server(extra_args=["--lock-days", "2", "--wipe-days", "5"])
    d = leased_daemon(make_daemon, srv)
    user = make_user()
    srv.set(user, mode="ok", lease_days=40)  # [offline_codes] max_lease_days is 30
    reg = register(d, user)
    contact = parse_time(reg["last_contact"])
    assert reg["lease"] is None, reg
    assert reg["next_action"]["action"] == "lock", reg
    near(reg["next_action"]["at"], contact + timedelta(days=2), "the lock of the policy")
    refused = kinds(d, user, "lease-refused")
    assert len(refused) == 1 and "max_lease_days" in refused[0]["detail"], refused
    warnings = d.status()["warnings"]
    assert [w for w in warnings if w.startswith(f"{user.name}: ") and "refused" in w and "max_lease_days" in w], warnings
    assert "max_lease_days" in d.ok("status").out
    assert len(d.log_lines(f"MESSAGE_ID={ID_LEASE_REFUSED}", f"LOCKWIPE_USER={user.name}")) == 1, d.log_tail()
    assert not d.log_lines(f"MESSAGE_ID={ID_LEASE_GRANTED}"), d.log_tail()

    # The server asks again: refused, but not recorded again.
    d.ok("check-in", "--user", user.name)
    assert len(kinds(d, user, "lease-refused")) == 1, kinds(d, user, "lease-refused")
    assert len(d.log_lines(f"MESSAGE_ID={ID_LEASE_REFUSED}")) == 1, d.log_tail()

    # With the server down, the policy locks on day 3 as if no lease had been asked for.
    srv.set(user, mode="500")
    d.restart(faketime="+3d")
    reg = d.registration(user)
    assert reg["state"] == "locked" and reg["lock_trigger"] == "offline", reg

    # A maximum that allows it: granted at the next contact, and the refusal is gone.
    srv.set(user, mode="ok")
    d.write_config(d.config.read_text() + "\n[offline_codes]\nmax_lease_days = 45\n")
    d.restart(faketime="+0")
    d.ok("check-in", "--user", user.name)
    reg = d.registration(user)
    assert reg["lease"] and reg["lease"]["source"] == "server" and reg["lease"]["in_force"], reg
    assert not [w for w in d.status()["warnings"] if "refused" in w], d.status()["warnings"]


def test_offline_codes_settings_are_checked_with_file_and_line(make_daemon):
    d = make_daemon(config=None, start=False)
    d.write_config(config_text(lock=2, wipe=5) + "\n[offline_codes]\nunlock_lease_days = 40\nmax_lease_days = 0\n")
    r = subprocess.run([str(d.bins.lockwiped), "--check-config", "--config", str(d.config)],
                       stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=30, env=child_env())
    lines = d.config.read_text().splitlines()
    at = lines.index("max_lease_days = 0") + 1
    assert r.returncode == 1, r.stderr
    assert f"{d.config}:{at}: offline_codes.max_lease_days: must be 1 or more, not 0" in r.stderr, r.stderr

    d.write_config(config_text(lock=2, wipe=5) + "\n[offline_codes]\nunlock_lease_days = 40\n")
    r = subprocess.run([str(d.bins.lockwiped), "--check-config", "--config", str(d.config)],
                       stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=30, env=child_env())
    at = d.config.read_text().splitlines().index("unlock_lease_days = 40") + 1
    assert r.returncode == 1 and f"{d.config}:{at}: offline_codes.unlock_lease_days: must not be more than max_lease_days (30)" in r.stderr, r.stderr
