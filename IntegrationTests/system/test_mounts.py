"""The user a lock or wipe is aimed at mounts over her own vault (issue 26, findings 1
and 2), with real FUSE filesystems (fuse_helpers.py, fuse_passthrough.py):

- a pass-through FUSE filesystem she mounted on her vault, or on a directory inside it:
  root may not enter it, so before this lockwiped's lock ended "LOCK FAILED ...
  Permission denied" and its wipe "INCOMPLETE" with her files left, while she kept
  reading and writing them. Now the lock and the wipe take the vault back (detach the
  mount, end her processes, her server among them) and say so in the journal;
- a vault whose filesystem stops answering (its FUSE server stopped with SIGSTOP, as an
  NFS server that went away): before this, her own `lockwipectl lock` blocked the whole
  daemon. Now the call waits on a thread of its own with a deadline, root's status and
  another user's lock answer at once, her lock fails saying so, and SIGTERM stops the
  daemon.

Canary files outside the vaults (beside a symlink and a hard link into them) stay
byte-identical in every test.
"""

import os
import re
import select
import stat
import subprocess
import time

import pytest

from daemon_harness import config_text
from fuse_helpers import fuse_unavailable, mounts_at, root_fuse_mount, user_fuse_mount
from host_helpers import as_user_argv, child_env, fingerprint, processes_of, run_as, wait_until


VAULT_UNRESPONSIVE = "37d502997d734cffb215f7ecb262366c"
MOUNT_DETACHED = "aa93b7810de84f93b215f503fa022762"
WIPE_RESUMED = "4d6b87f5094a4c07aaddbfe576cf3b3c"


@pytest.fixture(autouse=True)
def _needs_fuse():
    why = fuse_unavailable()
    if why:
        pytest.skip(why)


def canaries(daemon, vault):
    """Files outside the vault, and links inside it that lead to them."""
    out = daemon.outside
    (out / "canary.txt").write_bytes(os.urandom(5000))
    (out / "hard.txt").write_bytes(b"shared inode, must survive\n" * 100)
    os.link(out / "hard.txt", vault / "hard-link")
    (vault / "to-canary").symlink_to(out / "canary.txt")
    (vault / "to-outside").symlink_to(out)
    for p in (vault / "hard-link", vault / "to-canary", vault / "to-outside"):
        os.lchown(p, os.stat(vault).st_uid, os.stat(vault).st_gid)
    return fingerprint(out)


def test_a_fuse_mount_over_her_vault_is_taken_back_by_the_lock(daemon, make_user):
    alice = make_user()
    vault = daemon.make_vault(alice, "alice", {"notes.txt": b"field notes\n", "sub/report.csv": b"a,b\n"})
    before = canaries(daemon, vault)
    daemon.ok("register", "--user", alice.name, "--dir", str(vault))
    with user_fuse_mount(alice, vault) as server:
        # The attack works as the issue says: she reads and writes through it, root may not enter.
        assert run_as(alice, ["cat", f"{vault}/notes.txt"]).stdout == "field notes\n"
        with pytest.raises(PermissionError):
            os.listdir(vault)

        r = daemon.ctl("lock", "--user", alice.name)
        assert r.code == 0 and "FAILED" not in r.text, r.describe()
        assert server.wait(timeout=10) is not None, "her FUSE server was not ended"
        assert mounts_at(vault) == [], "the mount is still over the vault"
        st = os.stat(vault)
        assert (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (0, 0, 0), "the vault underneath is not locked"
        for argv in (["ls", str(vault)], ["cat", f"{vault}/notes.txt"], ["touch", f"{vault}/new"]):
            assert run_as(alice, argv).returncode != 0, f"{argv} worked after the lock"
        assert daemon.state_of(alice) == "locked"
        line = daemon.wait_log(lambda l: f"MESSAGE_ID={MOUNT_DETACHED}" in l, 5, "the detach in the journal")
        assert f"LOCKWIPE_MOUNT_OWNER_UID={alice.uid}" in line[-1] and "LOCKWIPE_MOUNT_FSTYPE=fuse.passthrough" in line[-1], line

    daemon.ok("unlock", "--user", alice.name)
    assert run_as(alice, ["cat", f"{vault}/notes.txt"]).stdout == "field notes\n"
    assert fingerprint(daemon.outside) == before


def test_a_fuse_mount_inside_her_vault_is_taken_back_by_the_wipe(daemon, make_user):
    alice = make_user()
    files = {"top.txt": os.urandom(3000), "inner/below.bin": os.urandom(70_000), "inner/deeper/x.txt": b"x\n"}
    vault = daemon.make_vault(alice, "alice", files)
    before = canaries(daemon, vault)
    daemon.ok("register", "--user", alice.name, "--dir", str(vault))
    with user_fuse_mount(alice, vault / "inner") as server:
        assert run_as(alice, ["cat", f"{vault}/inner/deeper/x.txt"]).stdout == "x\n"
        r = daemon.ctl("wipe", "--user", alice.name, "--yes")
        assert r.code == 0 and "INCOMPLETE" not in r.text, r.describe()
        assert server.wait(timeout=10) is not None, "her FUSE server was not ended"
    assert os.listdir(vault) == [], f"left in the vault: {os.listdir(vault)}"
    assert daemon.state_of(alice) == "wiped"
    assert fingerprint(daemon.outside) == before


def alices_source(daemon, alice):
    """What a pass-through FUSE filesystem serves as her vault: her directory (0700) and a
    file of hers in it."""
    source = daemon.root / "fuse-source"
    source.mkdir(mode=0o755)
    (source / "alice").mkdir()
    (source / "alice" / "notes.txt").write_text("alice's\n")
    for p in (source / "alice", source / "alice" / "notes.txt"):
        os.chown(p, alice.uid, alice.gid)
    os.chmod(source / "alice", 0o700)
    return source


def test_a_stalled_vault_filesystem_stalls_nobody_else_and_sigterm_stops_the_daemon(make_daemon, make_user):
    daemon = make_daemon(config_text(grace=1))
    alice, bob = make_user(), make_user()
    # Alice's vault lies on a filesystem whose server will stop answering.
    source = alices_source(daemon, alice)
    remote = daemon.data / "remote"
    remote.mkdir(mode=0o755)
    bob_vault = daemon.make_vault(bob, "bob")
    before = canaries(daemon, bob_vault)
    with root_fuse_mount(remote, source) as server:
        daemon.ok("register", "--user", alice.name, "--dir", str(remote / "alice"))
        daemon.ok("register", "--user", bob.name, "--dir", str(bob_vault))

        os.kill(server.pid, 19)  # SIGSTOP: every call into the filesystem now waits
        started = time.monotonic()
        her_lock = subprocess.Popen(
            as_user_argv(alice, [daemon.bins.ctl_for_others, "--socket", daemon.socket, "lock", "--user", alice.name, "--yes"]),
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=child_env())
        time.sleep(0.5)
        assert her_lock.poll() is None, "the stalled lock returned at once: the filesystem did not stall"

        t = time.monotonic()
        assert daemon.ctl("status", timeout=2).code == 0
        r = daemon.ctl("lock", "--user", bob.name, timeout=2)
        assert r.code == 0, r.describe()
        assert time.monotonic() - t < 2, "root's status and bob's lock waited for alice's stalled vault"
        assert daemon.state_of(bob) == "locked"

        out, err = her_lock.communicate(timeout=30)
        assert her_lock.returncode != 0 and "answer" in err, (out, err)
        assert time.monotonic() - started < 20
        reg = daemon.registration(alice)
        assert reg["state"] == "lock-failed" and "answer" in (reg.get("vault_error") or ""), reg
        assert daemon.log_lines(f"MESSAGE_ID={VAULT_UNRESPONSIVE}", f"LOCKWIPE_USER={alice.name}"), daemon.log_tail()
        # While it stalls, another action on her vault fails at once.
        t = time.monotonic()
        again = daemon.ctl("lock", "--user", alice.name, timeout=5)
        assert again.code != 0 and time.monotonic() - t < 3, again.describe()

        # SIGTERM stops the daemon although a thread of it still waits on the filesystem.
        t = time.monotonic()
        assert daemon.stop() == 0
        assert time.monotonic() - t < 5
        server.send_signal(18)  # SIGCONT
    assert fingerprint(daemon.outside) == before


# --------------------------------------------------------------------------- issue 40, finding 2


def test_a_wipe_left_pending_by_a_stalled_vault_runs_once_the_vault_answers_again(make_daemon, make_user):
    """Finding 2: a wipe whose vault stopped answering stayed pending and was retried only at
    the next start-up. Now it runs as soon as the stuck call returns."""
    daemon = make_daemon(config_text(grace=1))
    alice = make_user()
    source = alices_source(daemon, alice)
    remote = daemon.data / "remote"
    remote.mkdir(mode=0o755)
    before = fingerprint(daemon.outside)
    with root_fuse_mount(remote, source) as server:
        daemon.ok("register", "--user", alice.name, "--dir", str(remote / "alice"))
        os.kill(server.pid, 19)  # SIGSTOP: every call into the filesystem now waits
        try:
            r = daemon.ctl("wipe", "--user", alice.name, "--yes", timeout=60)
            assert r.code != 0 and "pending" in r.err, r.describe()
            assert daemon.state_of(alice) in ("wipe-pending", "wiping"), daemon.registration(alice)
        finally:
            server.send_signal(18)  # SIGCONT: the stuck call returns
        # The pass-through filesystem cannot unlink (ENOSYS): the retried wipe overwrites her
        # file and stays incomplete, saying so; what matters here is that it ran now.
        notes = source / "alice" / "notes.txt"
        wait_until(lambda: not notes.exists() or notes.read_bytes() != b"alice's\n", 30,
                   "the pending wipe did not run once the vault answered again", details=daemon.log_tail)
        assert daemon.log_lines("answers again", f"LOCKWIPE_USER={alice.name}"), daemon.log_tail()
        assert daemon.log_lines(f"MESSAGE_ID={WIPE_RESUMED}", f"LOCKWIPE_USER={alice.name}"), daemon.log_tail()
        assert daemon.running()
    assert fingerprint(daemon.outside) == before


# --------------------------------------------------------------------------- issue 40, finding 2: the waiter

# Runs as the user, on a /dev/fuse descriptor the test opened and mounted for her (as
# fusermount3 does). Answers FUSE_INIT, then forks the waiter: it holds a descriptor of her
# vault and of /dev/fuse (inherited), and looks a name up in the filesystem. The server
# reads that request and never answers it. A SIGKILL then leaves the waiter in an
# uninterruptible wait, and killing the server does not end it: the waiter's own copy of
# the /dev/fuse descriptor keeps the connection alive.
HANGING_FUSE = r"""
import os, struct, sys, time
fd, mnt, vault = int(sys.argv[1]), sys.argv[2], sys.argv[3]
FUSE_INIT = 26
sys.stdin.readline()  # mounted: the descriptor has a connection to read from
def request():
    data = os.read(fd, 1 << 20)
    length, opcode, unique = struct.unpack_from("<IIQ", data)
    return opcode, unique, data
opcode, unique, data = request()
assert opcode == FUSE_INIT, opcode
init_out = struct.pack("<IIIIHHIIHHII", 7, 31, 0, 0, 1, 1, 4096, 1, 1, 0, 0, 0) + bytes(4 * 6)
os.write(fd, struct.pack("<IiQ", 16 + len(init_out), 0, unique) + init_out)
held = os.open(vault, os.O_RDONLY | os.O_DIRECTORY)
if os.fork() == 0:
    os.setsid()
    try:
        os.stat(os.path.join(mnt, "never-answered"))
    finally:
        os._exit(0)
opcode, unique, data = request()
print("waiting", opcode, flush=True)
while True:
    time.sleep(3600)
"""


def fusectl_mounted():
    return os.path.exists("/sys/fs/fuse/connections") and any(
        line.split(" ")[4] == "/sys/fs/fuse/connections" for line in open("/proc/self/mountinfo"))


@pytest.mark.parametrize("detached", [False, True], ids=["mounted", "detached-lazily"])
def test_a_process_in_an_uninterruptible_fuse_wait_does_not_hold_the_lock_hostage(daemon, make_user, procs, detached):
    """Finding 2: a process of hers parked in an uninterruptible wait on a FUSE filesystem of
    her own, far from the vault, holding a vault descriptor: SIGKILL could not end it, and
    the lock failed for ever while it read and wrote through what it held. Now her FUSE
    connections are aborted, the wait ends, and the lock holds; also when she detached the
    filesystem lazily, so that no mount table shows it (`fusermount3 -u -z`)."""
    import ctypes

    from fuse_helpers import MS_NODEV, MS_NOSUID, _libc, detach

    user = make_user()
    vault = daemon.make_vault(user, "vault")
    daemon.ok("register", "--user", user.name, "--dir", str(vault))
    canary = daemon.outside / "canary.txt"
    canary.write_text("outside the vault\n")
    before = fingerprint(daemon.outside)
    mnt = vault.parent / f"fuse-of-{user.name}"  # where she can reach it, far from the vault
    mnt.mkdir()
    os.chown(mnt, user.uid, user.gid)

    mounted_fusectl = False
    if not fusectl_mounted():
        subprocess.run(["mount", "-t", "fusectl", "fusectl", "/sys/fs/fuse/connections"], check=True)
        mounted_fusectl = True
    fuse_fd = os.open("/dev/fuse", os.O_RDWR)
    minor = None
    try:
        server = procs.spawn(user, ["/usr/bin/python3", "-c", HANGING_FUSE, str(fuse_fd), str(mnt), str(vault)],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, pass_fds=[fuse_fd])
        options = f"fd={fuse_fd},rootmode=40000,user_id={user.uid},group_id={user.gid}"
        if _libc.mount(b"hanging", os.fsencode(str(mnt)), b"fuse.hanging", MS_NOSUID | MS_NODEV, options.encode()) != 0:
            pytest.fail(f"mount FUSE: {os.strerror(ctypes.get_errno())}")
        # Its connection, by the minor device number mountinfo shows (a stat would wait on it).
        minor = next(line.split(" ")[2].split(":")[1] for line in open("/proc/self/mountinfo")
                     if line.split(" ")[4] == str(mnt))
        os.close(fuse_fd)
        fuse_fd = -1
        server.stdin.write("go\n")
        server.stdin.flush()
        ready, _, _ = select.select([server.stdout], [], [], 10)
        assert ready and server.stdout.readline().startswith("waiting"), "the FUSE server did not get the waiter's request"
        if detached:
            detach(mnt)
            assert not mounts_at(mnt)
        # The waiter, as the audit left it: SIGKILLed in an uninterruptible wait.
        subprocess.run(["setpriv", f"--reuid={user.uid}", "--regid=65534", "--clear-groups", "--", "kill", "-KILL", "-1"])
        wait_until(lambda: processes_of(user.uid, state="D"), 10, "the waiter is not in an uninterruptible wait")
        waiter = processes_of(user.uid, state="D")[0]

        r = daemon.ctl("lock", "--user", user.name)
        assert r.code == 0 and daemon.state_of(user) == "locked", r.describe() + daemon.log_tail()
        wait_until(lambda: not os.path.exists(f"/proc/{waiter}") or "Z" in open(f"/proc/{waiter}/status").read().split("State:")[1][:4],
                   10, f"the waiter {waiter} still runs after the lock")
        assert fingerprint(daemon.outside) == before
    finally:
        if fuse_fd >= 0:
            os.close(fuse_fd)
        # Whatever the daemon did: no process of the test is left waiting.
        if minor is not None and os.path.exists(f"/sys/fs/fuse/connections/{minor}/abort"):
            with open(f"/sys/fs/fuse/connections/{minor}/abort", "w") as f:
                f.write("1")
        detach(mnt)
        if mounted_fusectl:
            subprocess.run(["umount", "/sys/fs/fuse/connections"])
