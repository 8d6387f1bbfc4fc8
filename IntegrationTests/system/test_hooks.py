"""Operator hooks in hooks.d: order, environment, timeouts, failures."""

import os
import re
import time

from daemon_harness import config_text
from host_helpers import empty_or_absent, owner_of, wait_until

# systemd/lockwipe.catalog explains it; MessageID.hookFailed.
ID_HOOK_FAILED = "6634976ae3844318b46a7223893d3ee4"

RECORDER = """#!/bin/bash
first=$(printf '%s\\n' "$LOCKWIPE_DIRECTORIES" | head -n 1)
mode=$(stat -c %a -- "$first" 2>/dev/null || echo missing)
count=$(printf '%s\\n' "$LOCKWIPE_DIRECTORIES" | grep -c .)
printf '%s|%s|%s|%s|%s|%s|%s|%s|%s\\n' "$(basename "$0")" "$1" "$2" \\
  "$LOCKWIPE_EVENT" "$LOCKWIPE_USER" "$LOCKWIPE_UID" "$LOCKWIPE_TRIGGER" "$mode" "$count" \\
  >> {out}
"""

FIELDS = ["hook", "arg1", "arg2", "event", "user", "uid", "trigger", "mode", "dirs"]


def read_records(path):
    if not os.path.exists(path):
        return []
    return [dict(zip(FIELDS, line.split("|"))) for line in open(path).read().splitlines()]


def setup_user(d, make_user, n_dirs=2):
    user = make_user()
    dirs = [d.make_vault(user, f"{user.name}-{i}") for i in range(n_dirs)]
    args = ["register", "--user", user.name]
    for v in dirs:
        args += ["--dir", v]
    d.ok(*args)
    return user, dirs


def test_lock_hooks_run_in_order_around_the_lock(make_daemon, make_user):
    d = make_daemon(start=False)
    out = d.root / "hook-records"
    d.write_hook("10-first", RECORDER.format(out=out))
    d.write_hook("20-second", RECORDER.format(out=out))
    d.write_hook("not-run.sh", "#!/bin/sh\necho dotted >> %s\n" % out)
    d.write_hook("30-not-executable", "#!/bin/sh\necho noexec >> %s\n" % out, mode=0o644)
    d.start()
    user, dirs = setup_user(d, make_user)

    d.ok("lock", "--user", user.name)
    wait_until(lambda: len(read_records(out)) >= 4, 10,
                      "the lock hooks did not all run",
                      details=lambda: open(out).read() if out.exists() else "(no output)")
    time.sleep(0.3)  # let any extra (wrong) hook invocation show up
    recs = read_records(out)
    seen = [(r["hook"], r["arg1"]) for r in recs]
    assert seen == [
        ("10-first", "willLock"), ("20-second", "willLock"),
        ("10-first", "didLock"), ("20-second", "didLock"),
    ], f"hooks ran as {seen} (a .sh name or a non-executable must not run)"
    for r in recs:
        assert r["arg1"] == r["event"], f"argument 1 and LOCKWIPE_EVENT disagree: {r}"
        assert r["arg2"] == user.name and r["user"] == user.name, r
        assert r["uid"] == str(user.uid), r
        assert r["trigger"] == "admin", r
        assert r["dirs"] == "2", f"LOCKWIPE_DIRECTORIES did not list both vaults: {r}"
    will, did = recs[0], recs[2]
    assert will["mode"] == "750", f"at willLock the vault was already mode {will['mode']}"
    assert did["mode"] == "0", f"at didLock the vault was mode {did['mode']}, not locked"


def test_wipe_hooks_see_data_before_and_none_after(make_daemon, make_user):
    d = make_daemon(start=False)
    out = d.root / "hook-records"
    upload = d.root / "uploaded"
    d.write_hook("10-record", RECORDER.format(out=out))
    d.write_hook(
        "20-upload",
        "#!/bin/bash\n"
        'if [ "$1" = willWipe ]; then\n'
        '  cat "$(printf "%s\\n" "$LOCKWIPE_DIRECTORIES" | head -n 1)/notes.txt" >> '
        f"{upload}\nfi\n",
    )
    d.start()
    user, dirs = setup_user(d, make_user, n_dirs=1)
    d.ok("wipe", "--user", user.name, "--yes")
    wait_until(lambda: len(read_records(out)) >= 2, 10, "the wipe hooks did not run")
    events = [r["event"] for r in read_records(out)]
    assert events == ["willWipe", "didWipe"], f"wipe hooks ran as {events}"
    assert upload.exists() and upload.read_text() == "field notes\n", (
        "a willWipe hook could not read the user's data to upload it"
    )
    assert empty_or_absent(dirs[0])


def test_hanging_hook_is_killed_and_lock_happens(make_daemon, make_user, procs):
    d = make_daemon(config=config_text(hook_timeout=2), start=False)
    pids = d.root / "hook-pids"
    d.write_hook("10-hang", f"#!/bin/bash\necho $$ >> {pids}\nexec sleep 1000\n")
    d.start()
    user, dirs = setup_user(d, make_user, n_dirs=1)

    started = time.monotonic()
    r = d.ctl("lock", "--user", user.name, timeout=30)
    assert r.code == 0, r.describe()
    wait_until(lambda: owner_of(dirs[0]) == (0, 0, 0), 15,
               "the vault was not locked while a hook hung", details=d.log_tail)
    took = time.monotonic() - started
    assert took < 12, f"a hanging hook delayed the lock by {took:.1f} s (timeout is 2 s)"

    def hook_pids():
        return [int(x) for x in pids.read_text().split()] if pids.exists() else []

    for pid in hook_pids():
        procs.adopt_pid(pid)
    wait_until(lambda: len(hook_pids()) >= 1, 10, "the hook never ran")

    def all_gone():
        for pid in hook_pids():
            procs.adopt_pid(pid)
            try:
                with open(f"/proc/{pid}/stat") as f:
                    if f.read().split(") ")[-1].startswith("Z"):
                        continue
            except OSError:
                continue
            return False
        return True

    wait_until(all_gone, 15, "the hanging hook was not killed after its timeout",
               details=d.log_tail)
    assert d.log_lines("10-hang"), "the hook timeout is not in the daemon log\n" + d.log_tail()
    assert d.log_lines(f"MESSAGE_ID={ID_HOOK_FAILED}", "10-hang"), \
        "the hook timeout was not logged with the hook-failed MESSAGE_ID\n" + d.log_tail()
    assert d.state_of(user) == "locked"


def test_failing_hook_is_logged_and_lock_happens(make_daemon, make_user):
    d = make_daemon(start=False)
    d.write_hook("10-fail", "#!/bin/sh\necho hook-says-no >&2\nexit 3\n")
    d.start()
    user, dirs = setup_user(d, make_user, n_dirs=1)
    r = d.ctl("lock", "--user", user.name)
    assert r.code == 0, "a failing hook must not veto the lock: " + r.describe()
    assert owner_of(dirs[0]) == (0, 0, 0), "a failing hook prevented the lock"
    lines = d.wait_log(
        lambda l: "10-fail" in l and re.search(r"\b3\b", l), 10,
        "the daemon log does not say that hook 10-fail failed with status 3",
    )
    assert lines
    d.wait_log(lambda l: "hook-says-no" in l, 10,
               "the failing hook's stderr did not reach the daemon log")
    # Issue 42: what `journalctl -u lockwiped` shows is the message alone (the stderr
    # line's text before its KEY=value fields): it names the hook and its exit status, and
    # each line of the hook's output is an entry of its own.
    d.wait_log(lambda l: l.startswith("warning hook 10-fail (willLock " + user.name + ") failed with exit status 3;"), 10,
               "the message of the failure does not name the hook, its event and its exit status")
    d.wait_log(lambda l: l.startswith("warning hook 10-fail: hook-says-no"), 10,
               "the hook's output line is not an entry of its own")
    assert d.log_lines(f"MESSAGE_ID={ID_HOOK_FAILED}", "10-fail"), \
        "the failure was not logged with the hook-failed MESSAGE_ID, which the catalog explains\n" + d.log_tail()


def test_hooks_someone_else_could_change_are_refused_and_logged(make_daemon, make_user):
    """Hooks run as root: a hook owned by another user, writable by group or others, or a
    symlink (which could point anywhere later) would hand root to whoever can change it.
    Such hooks are not run, each refusal is logged with the reason, and the safe hooks and
    the lock itself go ahead."""
    d = make_daemon(start=False)
    out = d.root / "hook-records"
    other = make_user()
    d.write_hook("10-safe", RECORDER.format(out=out))
    d.write_hook("20-group-writable", RECORDER.format(out=out), mode=0o775)
    d.write_hook("30-other-writable", RECORDER.format(out=out), mode=0o757)
    owned = d.write_hook("40-user-owned", RECORDER.format(out=out))
    os.chown(owned, other.uid, other.uid)
    target = d.write_hook("50-target", RECORDER.format(out=out), mode=0o644)  # not executable: skipped by name rules
    os.symlink(target, d.hooks_dir / "60-symlink")
    d.start()
    user, dirs = setup_user(d, make_user, n_dirs=1)
    d.ok("lock", "--user", user.name)
    assert owner_of(dirs[0]) == (0, 0, 0), "refused hooks must not stop the lock"
    wait_until(lambda: len(read_records(out)) >= 2, 10, "the safe hook did not run for willLock and didLock")
    ran = {r["hook"] for r in read_records(out)}
    assert ran == {"10-safe"}, f"only the safe hook may run, ran: {sorted(ran)}"
    for name, why in [("20-group-writable", "group"), ("30-other-writable", "others"),
                      ("40-user-owned", f"uid {other.uid}"), ("60-symlink", "symlink")]:
        d.wait_log(lambda l, name=name, why=why: "hook refused" in l and name in l and why in l, 10,
                   f"the refusal of {name} ({why}) was not logged")


def test_a_hooks_directory_others_can_write_refuses_every_hook(make_daemon, make_user):
    d = make_daemon(start=False)
    out = d.root / "hook-records"
    d.write_hook("10-safe", RECORDER.format(out=out))
    os.chmod(d.hooks_dir, 0o777)
    d.start()
    user, dirs = setup_user(d, make_user, n_dirs=1)
    d.ok("lock", "--user", user.name)
    assert owner_of(dirs[0]) == (0, 0, 0)
    d.wait_log(lambda l: "hook refused" in l and "10-safe" in l and "hooks directory" in l, 10,
               "a hook in a world-writable hooks directory was not refused")
    assert read_records(out) == [], "a hook in a world-writable hooks directory ran"
