"""Register, status, lock, unlock, wipe, unregister and history, end to end."""

import json
import os
import signal
import stat
import subprocess
import time

import pytest

from host_helpers import (
    can_list,
    empty_or_absent,
    fingerprint,
    fmt_owner,
    owner_of,
    parse_time,
    wait_until,
)

STATUS_KEYS = {"version", "server", "policy", "registrations", "warnings"}
REGISTRATION_KEYS = {
    "user", "uid", "state", "protection", "directories", "blocked",
    "last_contact", "offline_seconds", "next_action",
}


def register(daemon, user, *dirs, **kw):
    args = ["register", "--user", user.name]
    for d in dirs:
        args += ["--dir", str(d)]
    return daemon.ctl(*args, **kw)


@pytest.fixture
def alice(daemon, make_user):
    """A user with two registered directories: one that existed (mode 0750, files),
    one the daemon had to create."""
    user = make_user()
    existing = daemon.make_vault(user, "alice-work")
    created = daemon.data / "alice-new"
    r = register(daemon, user, existing, created)
    assert r.code == 0, "registering a user with two directories failed: " + r.describe()
    user.dirs = [existing, created]
    return user


# --------------------------------------------------------------------------- status


def test_status_of_an_empty_daemon(daemon):
    human = daemon.ctl("status")
    assert human.code == 0, human.describe()
    assert human.out.strip(), "`lockwipectl status` printed nothing"

    r = daemon.ok("status", "--json")
    doc = json.loads(r.out)
    missing = STATUS_KEYS - doc.keys()
    assert not missing, f"status --json lacks the contract keys {sorted(missing)}: {doc}"
    assert doc["registrations"] == [], f"a fresh daemon reports registrations: {doc}"
    assert doc["server"]["configured"] is False, f"no server is configured, yet: {doc['server']}"
    assert doc["server"]["url"] is None, doc["server"]
    assert doc["policy"]["offline_days_before_lock"] == 0, doc["policy"]
    assert doc["policy"]["offline_days_before_wipe"] == 0, doc["policy"]
    assert doc["policy"]["source"] == "local", doc["policy"]
    assert isinstance(doc["version"], str) and doc["version"], doc
    assert isinstance(doc["warnings"], list) and all(isinstance(w, str) for w in doc["warnings"])
    assert any("server" in w.lower() for w in doc["warnings"]), (
        f"status does not warn that no server is configured: warnings={doc['warnings']}"
    )


def test_socket_is_reachable_by_every_local_user(daemon):
    mode = stat.S_IMODE(os.stat(daemon.socket).st_mode)
    assert mode == 0o666, f"control socket has mode {mode:o}, expected 666"


def test_socket_from_environment(daemon):
    r = daemon.ctl("status", socket=False, env={"LOCKWIPE_SOCKET": str(daemon.socket)})
    assert r.code == 0, "LOCKWIPE_SOCKET is not honoured: " + r.describe()


def test_unreachable_daemon_is_exit_69(daemon):
    r = daemon.ctl("--socket", "/nonexistent/lockwipe.sock", "status", socket=False)
    assert r.code == 69, "a missing daemon must be exit 69 (unavailable): " + r.describe()
    assert r.err.strip(), "no message explains that the daemon is unreachable"


@pytest.mark.parametrize(
    "args",
    [
        ["frobnicate"],
        ["lock"],
        ["lock", "--user", "root", "--all"],
        ["status", "--no-such-option"],
        ["register", "--user", "root"],
    ],
    ids=["unknown-verb", "lock-without-target", "lock-user-and-all", "bad-option",
         "register-without-dir"],
)
def test_bad_arguments_are_exit_2(daemon, args):
    r = daemon.ctl(*args)
    assert r.code == 2, f"bad command line {args} must be exit 2 (usage): " + r.describe()
    assert r.err.strip(), "a usage error printed no explanation on stderr"


def test_check_in_without_server(daemon, alice):
    r = daemon.ctl("check-in", "--user", alice.name)
    assert r.code == 1, "check-in without a server must fail: " + r.describe()
    assert "no server configured" in r.text.lower(), r.describe()


# --------------------------------------------------------------------------- register


def test_register_two_directories(daemon, make_user):
    user = make_user()
    existing = daemon.make_vault(user, "work")
    before = fingerprint(existing)
    created = daemon.data / "new-vault"
    r = register(daemon, user, existing, created)
    assert r.code == 0, r.describe()

    assert fingerprint(existing) == before, "registering changed the existing directory"
    assert created.is_dir(), f"the missing directory {created} was not created"
    uid, gid, mode = owner_of(created)
    assert (uid, gid) == (user.uid, user.gid), (
        f"created vault is owned by {uid}:{gid}, not by {user.name} ({user.uid}:{user.gid})"
    )
    assert mode == 0o700, f"created vault has mode {mode:o}, expected 700"
    assert can_list(user, created) and can_list(user, existing), (
        "the user cannot use their own freshly registered vault"
    )

    reg = daemon.registration(user)
    assert reg is not None, f"{user.name} is not in status after register"
    missing = REGISTRATION_KEYS - reg.keys()
    assert not missing, f"registration lacks the contract keys {sorted(missing)}: {reg}"
    assert reg["state"] == "active", reg
    assert reg["protection"] == "permissions", reg
    assert reg["uid"] == user.uid, reg
    assert sorted(reg["directories"]) == sorted([str(existing), str(created)]), reg
    assert reg["blocked"] is False, reg
    assert reg["next_action"] is None, f"policy 0/0 never locks, yet next_action={reg}"
    assert 0 <= reg["offline_seconds"] < 600, reg
    parse_time(reg["last_contact"])

    human = daemon.ok("status")
    assert user.name in human.out, f"human status does not show {user.name}:\n{human.out}"
    assert "active" in human.out, f"human status does not say active:\n{human.out}"

    only = daemon.ok("status", "--user", user.name, "--json")
    assert [x["user"] for x in json.loads(only.out)["registrations"]] == [user.name]


def assert_refused(daemon, r, user, would_create, *names):
    assert r.code == 1, "a bad registration must be refused with exit 1: " + r.describe()
    msg = r.text
    assert msg.strip(), "the refusal gives no reason"
    for n in names:
        assert n in msg, f"the refusal does not name {n!r}: {r.describe()}"
    assert not os.path.lexists(would_create), (
        f"refused registration still created {would_create} (not all-or-nothing)"
    )
    assert daemon.registration(user) is None, (
        f"refused registration of {user.name} still appears in status"
    )


def test_register_refuses_root_directory(daemon, make_user):
    user = make_user()
    new = daemon.root / "would-be-created"
    r = register(daemon, user, new, "/")
    assert_refused(daemon, r, user, new)


def test_register_refuses_system_directory(daemon, make_user):
    user = make_user()
    new = daemon.root / "would-be-created"
    before = owner_of("/etc")
    r = register(daemon, user, new, "/etc")
    assert_refused(daemon, r, user, new, "/etc")
    assert owner_of("/etc") == before, "/etc was modified by a refused registration"


@pytest.mark.parametrize("area", ["/var/lib", "/var/spool", "/var/cache", "/var/log", "/root", "/opt"])
def test_register_refuses_where_programs_keep_their_data(daemon, make_user, area):
    """A vault in /var/lib (a database), /root or /opt would let a wipe take another
    program's data with it: refused, with the key that would allow it named, and nothing
    created there."""
    user = make_user()
    new = daemon.root / "would-be-created"
    inside = f"{area}/lwt-never-created-{user.name}"
    r = register(daemon, user, new, inside)
    assert_refused(daemon, r, user, new, inside, "allow_under")
    assert not os.path.lexists(inside), f"a refused registration created {inside}"


def test_register_refuses_symlinked_directory(daemon, make_user):
    user = make_user()
    target = daemon.make_vault(user, "real")
    before = fingerprint(target)
    link = daemon.data / "link"
    link.symlink_to(target)
    new = daemon.root / "would-be-created"
    r = register(daemon, user, new, link)
    assert_refused(daemon, r, user, new, str(link))
    assert fingerprint(target) == before, "the symlink's target was modified"


def test_register_refuses_unknown_unix_user(daemon, make_user):
    class Ghost:
        name = "lwt-no-such-user"

    new = daemon.data / "ghost"
    r = daemon.ctl("register", "--user", Ghost.name, "--dir", new)
    assert_refused(daemon, r, Ghost, new, Ghost.name)


@pytest.mark.parametrize("relation", ["child", "parent", "same"])
def test_register_refuses_overlapping_directories(daemon, alice, make_user, relation):
    other = make_user()
    first = alice.dirs[0]
    before = fingerprint(first)
    if relation == "child":
        bad = first / "sub"
    elif relation == "parent":
        bad = daemon.data
    else:
        bad = first
    new = daemon.root / "would-be-created"
    r = register(daemon, other, new, bad)
    assert_refused(daemon, r, other, new, str(bad))
    assert fingerprint(first) == before, f"{alice.name}'s vault was modified"
    assert daemon.state_of(alice) == "active"


# --------------------------------------------------------------------------- lock / unlock


def test_lock_and_unlock_restore_exact_permissions(daemon, alice, procs):
    canary = daemon.outside / "canary.txt"
    canary.write_text("outside\n")
    os.chown(canary, alice.uid, alice.gid)
    os.chmod(canary, 0o640)
    (alice.dirs[0] / "link-out").symlink_to(canary)
    os.lchown(alice.dirs[0] / "link-out", alice.uid, alice.gid)
    canary_before = fingerprint(daemon.outside)

    originals = {d: owner_of(d) for d in alice.dirs}
    contents = {d: fingerprint(d) for d in alice.dirs}
    assert originals[alice.dirs[0]][2] == 0o750
    for d in alice.dirs:
        assert can_list(alice, d), f"{alice.name} cannot list {d} even before the lock"

    # A process of the user that holds a file of the vault open.
    holder = procs.spawn(
        alice,
        ["bash", "-c", 'exec 3<"$1" || exit 9; echo ready; exec sleep 300', "_",
         alice.dirs[0] / "notes.txt"],
        stdout=subprocess.PIPE, text=True,
    )
    assert holder.stdout.readline().strip() == "ready", "the user could not open their file"

    r = daemon.ctl("lock", "--user", alice.name)
    assert r.code == 0, r.describe()

    for d in alice.dirs:
        uid, gid, mode = owner_of(d)
        assert (uid, gid, mode) == (0, 0, 0), (
            f"locked vault {d} is {uid}:{gid} mode {mode:o}, expected root:root 0000"
        )
        assert not can_list(alice, d), f"{alice.name} can still list locked vault {d}"
    assert daemon.state_of(alice) == "locked"
    human = daemon.ok("status").out
    assert "locked" in human, f"human status does not say locked:\n{human}"

    wait_until(lambda: holder.poll() is not None, 10,
               f"{alice.name}'s process holding a vault file open survived the lock",
               details=daemon.log_tail)

    r = daemon.ctl("unlock", "--user", alice.name)
    assert r.code == 0, r.describe()
    for d in alice.dirs:
        got = owner_of(d)
        assert got == originals[d], (
            f"unlock restored {d} as {fmt_owner(got)}, originally {fmt_owner(originals[d])}"
        )
        assert fingerprint(d) == contents[d], f"lock/unlock changed the contents of {d}"
        assert can_list(alice, d), f"{alice.name} cannot list {d} after unlock"
    assert daemon.state_of(alice) == "active"
    assert fingerprint(daemon.outside) == canary_before, (
        "lock/unlock changed a file outside the vault reached by a symlink"
    )


def test_lock_all(daemon, alice, make_user):
    bob = make_user()
    vault = daemon.make_vault(bob, "bob")
    daemon.ok("register", "--user", bob.name, "--dir", vault)
    daemon.ok("lock", "--all", "--yes")
    assert daemon.state_of(alice) == "locked"
    assert daemon.state_of(bob) == "locked"
    assert owner_of(vault) == (0, 0, 0)


# --------------------------------------------------------------------------- wipe


def make_canaries(daemon, user, vault):
    """Canary file and directory outside the vault, reached from inside by two
    symlinks and a hard link. Returns the fingerprint to compare after the wipe."""
    out = daemon.outside
    (out / "canary.txt").write_bytes(b"must survive\n" * 100)
    (out / "hardlinked.txt").write_bytes(b"shared inode, must survive\n" * 100)
    (out / "canary-dir").mkdir()
    (out / "canary-dir" / "inner.txt").write_bytes(b"inner canary\n")
    (out / "canary-dir" / "deeper").mkdir()
    (out / "canary-dir" / "deeper" / "x.bin").write_bytes(os.urandom(4096))
    for dirpath, dirnames, filenames in os.walk(out):
        for n in dirnames + filenames:
            os.lchown(os.path.join(dirpath, n), user.uid, user.gid)
    (vault / "link-to-file").symlink_to(out / "canary.txt")
    (vault / "link-to-dir").symlink_to(out / "canary-dir")
    os.link(out / "hardlinked.txt", vault / "hardlink.txt")
    for n in ("link-to-file", "link-to-dir"):
        os.lchown(vault / n, user.uid, user.gid)
    return fingerprint(out)


def fill_vault(vault, user):
    (vault / "deep" / "er" / "est").mkdir(parents=True)
    (vault / "deep" / "er" / "est" / "big.bin").write_bytes(os.urandom(300_000))
    (vault / "read-only.txt").write_text("ro")
    os.chmod(vault / "read-only.txt", 0o400)
    (vault / "locked-subdir").mkdir()
    (vault / "locked-subdir" / "inside.txt").write_text("x")
    (vault / "name with spaces – ü.txt").write_text("y")
    for dirpath, dirnames, filenames in os.walk(vault):
        for n in dirnames + filenames:
            os.lchown(os.path.join(dirpath, n), user.uid, user.gid)
    os.chmod(vault / "locked-subdir", 0o500)


def test_wipe_removes_vault_and_nothing_else(daemon, alice):
    vault, created = alice.dirs
    fill_vault(vault, alice)
    (created / "made-later.txt").write_text("z")
    canaries = make_canaries(daemon, alice, vault)
    assert any(os.scandir(vault))

    r = daemon.ctl("wipe", "--user", alice.name, "--yes")
    assert r.code == 0, r.describe() + "\n" + daemon.log_tail()

    for d in alice.dirs:
        left = os.listdir(d) if os.path.isdir(d) else []
        assert empty_or_absent(d), f"wipe left files behind in {d}: {left}"
    assert fingerprint(daemon.outside) == canaries, (
        "wipe modified data outside the vault (through a symlink or a hard link)"
    )
    assert daemon.state_of(alice) == "wiped"


def test_wipe_removes_files_with_non_utf8_names(daemon, alice):
    vault = alice.dirs[0]
    bad = os.path.join(os.fsencode(vault), b"latin1-\xe9t\xe9.txt")
    with open(bad, "wb") as f:
        f.write(b"secret")
    os.chown(bad, alice.uid, alice.gid)
    r = daemon.ctl("wipe", "--user", alice.name, "--yes")
    if r.code == 0:
        assert empty_or_absent(vault), (
            f"wipe reported success but left {os.listdir(os.fsencode(vault))} behind"
        )
    else:
        pytest.fail("wipe could not remove a file with a non-UTF-8 name: " + r.describe())


def test_wipe_without_yes_and_no_terminal_is_refused(daemon, alice):
    before = fingerprint(alice.dirs[0])
    r = daemon.ctl("wipe", "--user", alice.name)
    assert r.code == 2, "wipe without --yes and no terminal must be exit 2: " + r.describe()
    assert fingerprint(alice.dirs[0]) == before, "wipe without --yes touched the vault"
    assert daemon.state_of(alice) == "active"


# --------------------------------------------------------------------------- unregister / history


def test_history_and_unregister(daemon, alice):
    daemon.ok("lock", "--user", alice.name)
    daemon.ok("unlock", "--user", alice.name)
    daemon.ok("wipe", "--user", alice.name, "--yes")
    daemon.ok("unregister", "--user", alice.name)
    assert daemon.registration(alice) is None, "unregistered user still in status"

    events = daemon.history(alice)
    wanted = ["register", "lock", "unlock", "wipe", "unregister"]
    events = [e for e in events if e.get("kind") in wanted]
    kinds = [e["kind"] for e in events]
    assert kinds == wanted, (
        f"history of {alice.name} shows {kinds}, expected {wanted} in this order: "
        f"{json.dumps(daemon.history(alice), indent=1)}"
    )
    for e in events:
        assert e["trigger"] == "admin", f"root's action recorded with trigger {e}"
        assert isinstance(e.get("detail", ""), str)
    times = [parse_time(e["time"]) for e in events]
    assert times == sorted(times), f"history is not oldest first: {[e['time'] for e in events]}"

    human = daemon.ok("history", "--user", alice.name)
    assert "wipe" in human.out, f"human history does not show the wipe:\n{human.out}"



def test_daemon_leaves_no_core_dump(make_daemon, procs):
    """lockwiped holds vault keys: it makes itself non-dumpable (prctl PR_SET_DUMPABLE 0),
    so even with RLIMIT_CORE unlimited a crash leaves no core file with its memory. The
    control, under the same limit, directory and signal, does dump (core_pattern here
    writes `core` into the working directory)."""
    pattern = open("/proc/sys/kernel/core_pattern").read().strip()
    if pattern.startswith("|") or "/" in pattern:
        pytest.skip(f"core_pattern is {pattern!r}: cores do not go to the working directory")
    daemon = make_daemon(start=False)

    def wrapper(directory):
        directory.mkdir()
        # SWIFT_BACKTRACE=enable=no: the Swift runtime's crash handler would print a
        # backtrace first; the kernel's default action (a core dump) is what is tested.
        return ["sh", "-c", f'ulimit -c unlimited; cd "{directory}" && SWIFT_BACKTRACE=enable=no exec "$@"', "sh"]

    control_dir = daemon.root / "control-cwd"
    control = procs.spawn(None, wrapper(control_dir) + ["sleep", "60"])
    time.sleep(0.3)
    control.send_signal(signal.SIGSEGV)
    control.wait(timeout=10)
    if not os.listdir(control_dir):
        pytest.skip("a crashing process leaves no core file on this machine: nothing to compare with")

    daemon_dir = daemon.root / "daemon-cwd"
    daemon.wrapper = wrapper(daemon_dir)
    daemon.start()
    p = daemon.proc
    assert os.readlink(f"/proc/{p.pid}/exe").endswith("lockwiped")
    p.send_signal(signal.SIGSEGV)
    assert p.wait(timeout=10) == -signal.SIGSEGV
    daemon.proc = None
    assert os.listdir(daemon_dir) == [], "lockwiped left a core dump"
