"""The offline policy over (faked) time: lock and wipe at start-up, while running,
after SIGHUP, and clock rollback.

Every daemon run in these tests is under libfaketime (`+0` for "now"), which moves
the wall clock only; daemon_harness.py says why BOOTTIME is not moved.
"""

import json
import math
import os
import time
from datetime import timedelta

from daemon_harness import config_text
from host_helpers import (
    DAY,
    can_list,
    empty_or_absent,
    fingerprint,
    fmt_owner,
    owner_of,
    parse_time,
    wait_until,
)

SLACK = timedelta(minutes=5)


def registered(d, make_user):
    user = make_user()
    vault = d.make_vault(user, "vault")
    d.outside.joinpath("canary.txt").write_text("outside the vault\n")
    (d.outside / "canary-dir").mkdir()
    (d.outside / "canary-dir" / "keep.txt").write_text("keep\n")
    (vault / "link-file").symlink_to(d.outside / "canary.txt")
    (vault / "link-dir").symlink_to(d.outside / "canary-dir")
    (d.outside / "hard.txt").write_text("hard linked\n")
    (vault / "hard.txt").hardlink_to(d.outside / "hard.txt")
    d.ok("register", "--user", user.name, "--dir", vault)
    return user, vault


def near(actual: str, expected, what):
    got = parse_time(actual)
    assert abs(got - expected) <= SLACK, f"{what} is {got}, expected about {expected}"


def test_offline_lock_then_wipe_enforced_at_startup(make_daemon, make_user):
    d = make_daemon(config=config_text(lock=2, wipe=5), faketime="+0")
    user, vault = registered(d, make_user)
    canaries = fingerprint(d.outside)
    reg = d.registration(user)
    contact = parse_time(reg["last_contact"])
    assert reg["state"] == "active"
    assert reg["next_action"] and reg["next_action"]["action"] == "lock", reg
    near(reg["next_action"]["at"], contact + timedelta(days=2), "the announced lock time")

    # Three days later (machine was off): locked before anyone could use it.
    d.restart(faketime="+3d")
    reg = d.registration(user)
    assert reg["state"] == "locked", (
        f"3 days offline with lock after 2: first status after start-up says {reg}"
    )
    assert owner_of(vault) == (0, 0, 0), f"vault is {fmt_owner(owner_of(vault))} after an offline lock"
    assert not can_list(user, vault), "the user can still read the offline-locked vault"
    assert reg["offline_seconds"] >= 3 * DAY - 300, reg
    assert reg["next_action"] and reg["next_action"]["action"] == "wipe", reg
    near(reg["next_action"]["at"], contact + timedelta(days=5), "the announced wipe time")
    locks = [e for e in d.history(user) if e["kind"] == "lock"]
    assert locks and locks[-1]["trigger"] == "offline", f"lock events: {locks}"
    assert [l for l in d.log().splitlines()
            if "LOCKWIPE_ACTION=lock" in l and f"LOCKWIPE_USER={user.name}" in l], (
        "the offline lock has no journal entry with LOCKWIPE_ACTION=lock\n" + d.log_tail()
    )

    # Six days: wiped at start-up, nothing outside touched.
    d.restart(faketime="+6d")
    reg = d.registration(user)
    assert reg["state"] == "wiped", f"6 days offline with wipe after 5: status says {reg}"
    assert empty_or_absent(vault), f"the offline wipe left {os.listdir(vault)}"
    assert fingerprint(d.outside) == canaries, "the offline wipe changed files outside the vault"
    assert reg["next_action"] is None, reg
    wipes = [e for e in d.history(user) if e["kind"] == "wipe"]
    assert wipes and wipes[-1]["trigger"] == "offline", f"wipe events: {wipes}"
    # Its certificate names the policy that ordered it.
    request = wipes[-1]["certificate"]["request"]
    assert request["trigger"] == "offline", request
    assert request["requester"]["policy"] == "local policy: lock after 2 days offline, wipe after 5 days", request


def test_clock_rollback_never_shortens_offline_time(make_daemon, make_user):
    d = make_daemon(config=config_text(lock=2, wipe=5), faketime="+0")
    user, vault = registered(d, make_user)
    o0 = d.registration(user)["offline_seconds"]

    d.restart(faketime="+1d")
    reg = d.registration(user)
    assert reg["state"] == "active", reg
    o1 = reg["offline_seconds"]
    assert o1 >= DAY - 300, f"one day later offline_seconds is {o1}"

    d.restart(faketime="-10d")
    reg = d.registration(user)
    o2 = reg["offline_seconds"]
    assert reg["state"] == "active", f"setting the clock back locked the vault: {reg}"
    assert owner_of(vault)[2] == 0o750, "setting the clock back changed the vault"
    assert o0 <= o1 <= o2, (
        f"offline_seconds went {o0} -> {o1} -> {o2}: setting the clock back shortened it"
    )
    assert [l for l in d.log().splitlines() if "clock rollback" in l.lower()], (
        "the daemon did not log a clock-rollback warning after the clock went back 11 days\n"
        + d.log_tail()
    )


def test_running_daemon_locks_when_threshold_passes(make_daemon, make_user):
    d = make_daemon(config=config_text(lock=2, wipe=5), faketime="+0")
    user, vault = registered(d, make_user)
    # Start 8 s before the lock threshold; the daemon must wake up by itself.
    d.restart(faketime=f"+{2 * DAY - 8}")
    reg = d.registration(user)
    if reg["offline_seconds"] < 2 * DAY - 1:
        assert reg["state"] == "active", f"locked before the threshold: {reg}"
    # Watch the directory, not `status`: the daemon must act on its own timer, not
    # because someone asked.
    wait_until(lambda: owner_of(vault) == (0, 0, 0), 25,
               "the running daemon did not lock the vault when the offline threshold "
               "passed", details=d.log_tail)
    assert d.state_of(user) == "locked"
    locks = [e for e in d.history(user) if e["kind"] == "lock"]
    assert locks and locks[-1]["trigger"] == "offline", locks


def test_running_daemon_locks_on_the_second_the_threshold_is_reached(make_daemon, make_user):
    """The wake-up is planned for the exact second at which the offline count reaches the
    threshold, not whole seconds after the timer was armed (up to a second later).

    The daemon's clock ticks at CLOCK_BOOTTIME's whole seconds (its wall time is BOOTTIME's
    whole seconds plus the whole seconds of the wall/boot offset), so the count reaches the
    threshold at a BOOTTIME second boundary, computed here from the offset given to
    libfaketime (its sub-second part set to 0.5 s, well clear of a boundary). The daemon
    is started three quarters of the way through a BOOTTIME second, so a timer armed for
    whole seconds from its plan would come about 0.75 s late; a lock within 0.45 s is on
    the second, with room for a loaded CI machine's scheduling (0.32 s was seen)."""
    d = make_daemon(config=config_text(lock=2, wipe=5), faketime="+0")
    user, vault = registered(d, make_user)
    lock_at = int(parse_time(d.registration(user)["last_contact"]).timestamp()) + 2 * DAY
    d.stop()

    def boot():
        return time.clock_gettime(time.CLOCK_BOOTTIME)

    real_minus_boot = min((time.time() - boot() for _ in range(5)), key=abs)
    crossing = math.floor(boot()) + 5  # the BOOTTIME second at which the count reaches it
    # The daemon's wall second at BOOTTIME `crossing` is lock_at: fake wall - boot = lock_at - crossing + 0.5.
    offset = lock_at - crossing + 0.5 - real_minus_boot
    while boot() % 1 < 0.70 or boot() % 1 > 0.75 or boot() > crossing - 3:
        time.sleep(0.005)
    d.start(faketime=f"{offset:+.3f}")
    assert boot() < crossing - 0.5, "the daemon took too long to start for this test"
    assert d.state_of(user) == "active", "locked before the threshold"
    while owner_of(vault) != (0, 0, 0) and boot() < crossing + 10:
        time.sleep(0.002)
    late = boot() - crossing
    assert owner_of(vault) == (0, 0, 0), "the running daemon did not lock the vault: " + d.log_tail()
    assert late <= 0.45, f"locked {late:.3f} s after the second the offline threshold was reached"
    assert d.state_of(user) == "locked"
    locks = [e for e in d.history(user) if e["kind"] == "lock"]
    assert locks and locks[-1]["trigger"] == "offline", locks
    assert parse_time(locks[-1]["time"]).timestamp() == lock_at, locks[-1]


def test_sighup_with_lower_threshold_locks(make_daemon, make_user):
    d = make_daemon(config=config_text(lock=2, wipe=5), faketime="+0")
    user, vault = registered(d, make_user)
    d.restart(faketime="+36h")
    assert d.state_of(user) == "active", "locked after 36 h with lock after 2 days"

    d.write_config(config_text(lock=1, wipe=5))
    d.hup()
    wait_until(lambda: owner_of(vault) == (0, 0, 0), 10,
               "after SIGHUP with offline_days_before_lock = 1 the vault offline for "
               "36 h was not locked", details=d.log_tail)
    assert d.state_of(user) == "locked"
    assert d.status()["policy"]["offline_days_before_lock"] == 1
    assert d.running(), "the daemon exited on SIGHUP"


def test_policy_plan_says_what_comes_when_and_what_n_more_days_offline_do(make_daemon, make_user):
    """Issue 42, item 6: an operator tries a policy without touching the clock. `policy
    --plan` lists each registration's warnings, lock and wipe with their times, from the
    daemon's planner; `--offline-days N` says what each would be after N more days. It
    changes nothing; the same plan is what the daemon then does (a day's faketime shows
    the lock where the plan put it)."""
    d = make_daemon(config=config_text(lock=2, wipe=5), faketime="+0")
    user, vault = registered(d, make_user)
    before = fingerprint(vault)
    r = d.ok("policy", "--plan", "--json")
    plans = {p["user"]: p for p in json.loads(r.out)}
    plan = plans[user.name]
    assert [s["step"] for s in plan["steps"]] == ["warn-lock", "lock", "warn-wipe", "wipe"], plan
    contact = parse_time(d.registration(user)["last_contact"])
    at = {s["step"]: parse_time(s["at"]) for s in plan["steps"]}
    near(plan["steps"][1]["at"], contact + timedelta(days=2), "the planned lock")
    near(plan["steps"][3]["at"], contact + timedelta(days=5), "the planned wipe")
    # [notify] warn_before is 2 days: the lock's warning is due now, the wipe's after the lock.
    assert plan["steps"][0]["in_seconds"] == 0 and at["warn-wipe"] >= at["lock"], plan

    for days, state in ((1, "active"), (3, "locked"), (6, "wiped")):
        r = d.ok("policy", "--plan", user.name, "--offline-days", str(days))
        assert f"{user.name}: after {days} more day{'s' if days > 1 else ''} offline: {state}" in r.out, r.describe()
        assert f"{user.name}  lock" in r.out or f"{user.name} lock" in r.out.replace("  ", " "), r.describe()
    # Nothing changed: the registration, its vault.
    assert d.state_of(user) == "active" and fingerprint(vault) == before
    # Bad input says what was wrong.
    r = d.ctl("policy", "--plan", "--offline-days", "-3")
    assert r.code == 2 and "--offline-days" in r.err, r.describe()
    r = d.ctl("policy", "--offline-days", "3")
    assert r.code == 2 and "go with --plan" in r.err, r.describe()

    # The daemon does what the plan said: three days on, locked (planned on day 2).
    d.restart(faketime="+3d")
    assert d.state_of(user) == "locked"
    r = d.ok("policy", "--plan", "--json", user.name)
    steps = json.loads(r.out)[0]["steps"]
    assert [s["step"] for s in steps] == ["warn-wipe", "wipe"], steps
