"""The user a lock is aimed at, trying to keep her data or to slow enforcement down
(issue 26, findings 4 and 5).

A permission lock ends every process of hers, wherever it runs: one that reaches the vault
through a bind mount in a user and mount namespace of her own (its /proc links print
another path), or that parked descriptors of the vault's directories in a socket message
(SCM_RIGHTS: in flight, held by no process's descriptor table). After `lockwipectl lock`
neither may list, read or create anything in the vault.

Her own dry-runs (`wipe --dry-run` of her encrypted vault, as many as her connection
quota allows) do not delay root's lock of another user.
"""

import json
import os
import select
import shutil
import subprocess
import threading
import time

import pytest

from host_helpers import as_user_argv, child_env, fingerprint, processes_of, run_as, wait_until
from test_vault import encrypted_fs, register_encrypted

# Runs as the user. Mode "cwd": its working directory is a subdirectory of the vault,
# reached through a bind mount elsewhere. Mode "scm": it opens the vault and its
# subdirectory, sends both descriptors over a socketpair it keeps, and closes them.
# Prints "ready", waits for a line on stdin, then tries to list, read and create through
# what it kept, and prints what worked as JSON. Killed, it prints nothing more.
HOLDER = r"""
import array, json, os, socket, sys
mode, vault = sys.argv[1], sys.argv[2]
if mode == "scm":
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    fds = [os.open(vault, os.O_RDONLY | os.O_DIRECTORY), os.open(vault + "/sub", os.O_RDONLY | os.O_DIRECTORY)]
    a.sendmsg([b"x"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))])
    for fd in fds:
        os.close(fd)
    def target(p):
        try:
            return os.readlink("/proc/self/fd/" + p)
        except OSError:
            return ""
    held = [p for p in os.listdir("/proc/self/fd") if target(p).startswith(vault)]
    assert not held, held
print("ready", flush=True)
sys.stdin.readline()
if mode == "scm":
    _, anc, _, _ = b.recvmsg(1, socket.CMSG_SPACE(2 * 4))
    dirs = list(array.array("i", anc[0][2]))
else:
    dirs = [os.open(".", os.O_RDONLY | os.O_DIRECTORY)]
worked = {}
for i, d in enumerate(dirs):
    for what, act in (
        ("list", lambda d: os.listdir(d)),
        ("read", lambda d: open("report.csv", "rb", opener=lambda p, f: os.open(p, f, dir_fd=d)).read()),
        ("create", lambda d: os.close(os.open("created-after-lock", os.O_CREAT | os.O_WRONLY, 0o600, dir_fd=d))),
    ):
        try:
            worked[f"{what} through descriptor {i}"] = repr(act(d))[:60]
        except OSError as e:
            pass
print(json.dumps(worked), flush=True)
"""


def start_holder(procs, user, argv):
    p = procs.spawn(user, argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    ready, _, _ = select.select([p.stdout], [], [], 10)
    line = p.stdout.readline() if ready else ""
    if line.strip() != "ready":
        p.kill()
        pytest.fail(f"the holder did not start: {line!r} {p.stderr.read()}")
    return p


def what_worked(p):
    """What the holder could still do after the lock ({} when it was ended)."""
    try:
        p.stdin.write("go\n")
        p.stdin.flush()
    except (BrokenPipeError, OSError):
        return {}
    try:
        out, err = p.communicate(timeout=10)
    except subprocess.TimeoutExpired:
        p.kill()
        pytest.fail("the holder neither answered nor ended")
    return json.loads(out.strip().splitlines()[-1]) if out.strip() else {}


def unshare_works(user):
    r = run_as(user, ["unshare", "-Urm", "true"])
    return r.returncode == 0, r.stderr.strip()


def test_permission_lock_ends_holders_in_their_own_namespace_and_of_parked_descriptors(daemon, make_user, procs):
    user = make_user()
    ok, why = unshare_works(user)
    if not ok:
        pytest.skip(f"an unprivileged user cannot make a user namespace here: {why}")
    vault = daemon.make_vault(user, "vault")
    daemon.ok("register", "--user", user.name, "--dir", str(vault))
    assert daemon.registration(user)["protection"] == "permissions"
    elsewhere = daemon.root / "elsewhere"
    elsewhere.mkdir(mode=0o755)
    canary = daemon.outside / "canary.txt"
    canary.write_text("outside the vault\n")
    before = fingerprint(daemon.outside)

    # Her namespace: the vault bind-mounted at `elsewhere`, her working directory in it.
    bound = start_holder(procs, user, [
        "unshare", "-Urm", "sh", "-c",
        'mount --bind "$1" "$2" && cd "$2/sub" && exec python3 -c "$3" cwd "$1"',
        "sh", str(vault), str(elsewhere), HOLDER])
    cwd = os.readlink(f"/proc/{bound.pid}/cwd")
    assert not cwd.startswith(str(vault)), f"the bind mount did not hide the vault's path: {cwd}"
    # Descriptors of the vault and its subdirectory, parked in a socket message.
    parked = start_holder(procs, user, ["python3", "-c", HOLDER, "scm", str(vault)])

    r = daemon.ok("lock", "--user", user.name)
    assert daemon.state_of(user) == "locked"
    worked = {name: what_worked(p) for name, p in (("the holder in its own namespace", bound),
                                                    ("the holder of parked descriptors", parked))}
    still = {name: w for name, w in worked.items() if w}
    assert not still, f"after `lockwipectl lock`, still possible: {still}\n{r.describe()}"
    found = [os.path.join(d, f) for d, _, files in os.walk(vault) for f in files if f == "created-after-lock"]
    assert not found, f"files created in the locked vault: {found}"
    assert fingerprint(daemon.outside) == before


def test_own_lock_answers_her_client_and_ends_her_other_processes(daemon, make_user, procs):
    """A user who locks herself reads the answer; her other processes are ended (the
    client too, once it has answered)."""
    user = make_user()
    vault = daemon.make_vault(user, "vault")
    daemon.ok("register", "--user", user.name, "--dir", str(vault))
    other = procs.spawn(user, ["sleep", "600"])
    r = daemon.ok("lock", "--user", user.name, "--yes", user=user)
    assert "locked" in r.out, r.describe()
    wait_until(lambda: other.poll() is not None, 10, f"{user.name}'s other process survived her own lock")


def make_files(user, vault, count):
    script = (
        "import os, sys\n"
        "v, n = sys.argv[1], int(sys.argv[2])\n"
        "for i in range(n):\n"
        "    d = os.path.join(v, f'd{i // 500}')\n"
        "    if i % 500 == 0: os.mkdir(d)\n"
        "    os.close(os.open(os.path.join(d, f'f{i}'), os.O_CREAT | os.O_WRONLY, 0o600))\n"
    )
    r = run_as(user, ["python3", "-c", script, str(vault), str(count)], timeout=300)
    assert r.returncode == 0, r.stderr


def test_her_concurrent_dry_runs_do_not_delay_roots_lock_of_another_user(daemon, make_user, procs):
    her, other, idle = make_user(), make_user(), make_user()
    with encrypted_fs(daemon, size="512M") as fs:
        vault = fs / "big"
        register_encrypted(daemon, her, vault)
        # About as many as the filesystem's inodes allow: one dry-run takes a few hundred ms.
        make_files(her, vault, 90000)
        theirs = daemon.make_vault(other, "theirs")
        daemon.ok("register", "--user", other.name, "--dir", str(theirs))
        daemon.ok("register", "--user", idle.name, "--dir", str(daemon.make_vault(idle, "idle")))
        started = time.monotonic()
        daemon.ok("lock", "--user", idle.name)
        print(f"root's lock of {idle.name} with no dry-run running (reference): {time.monotonic() - started:.3f} s")

        argv = as_user_argv(her, [daemon.bins.ctl_for_others, "--socket", daemon.socket,
                                  "wipe", "--user", her.name, "--dry-run"])
        started = time.monotonic()
        single = subprocess.run(argv, capture_output=True, text=True, env=child_env(), timeout=60)
        one = time.monotonic() - started
        assert single.returncode == 0, single.stderr
        print(f"one dry-run of {her.name}'s vault: {one:.3f} s")

        dry = [subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=child_env())
               for _ in range(16)]
        try:
            time.sleep(0.3)
            started = time.monotonic()
            daemon.ok("lock", "--user", other.name)
            took = time.monotonic() - started
        finally:
            results = [p.communicate(timeout=120) + (p.returncode,) for p in dry]
        print(f"root's lock of {other.name} during 16 dry-runs: {took:.3f} s")
        assert daemon.state_of(other) == "locked"
        assert took < 1.0, f"root's lock of another user took {took:.2f} s while {her.name} ran 16 dry-runs (one takes {one:.2f} s)"
        refused = [err for out, err, code in results if code != 0]
        assert all("already running" in err for err in refused), refused
        assert len(refused) < 16, "every dry-run was refused"


def test_her_processes_are_ended_even_when_the_vault_cannot_be_opened(daemon, make_user, procs):
    user = make_user()
    vault = daemon.make_vault(user, "vault")
    daemon.ok("register", "--user", user.name, "--dir", str(vault))
    away = daemon.root / "renamed-away"
    os.rename(vault, away)  # the recorded inode is no longer at the vault's path
    try:
        busy = procs.spawn(user, ["sleep", "600"])
        r = daemon.ctl("lock", "--user", user.name)
        assert r.code != 0, "a lock of a vault that cannot be opened was reported done: " + r.describe()
        wait_until(lambda: busy.poll() is not None, 10,
                   f"{user.name}'s process survived a lock whose vault could not be opened",
                   details=daemon.log_tail)
    finally:
        os.rename(away, vault)


# --------------------------------------------------------------------------- issue 40, findings 3 and 4

# Runs as the user: a fork-and-exit chain. Each generation appends its pid to `held` (a file
# of the vault, through the descriptor every generation inherits), sleeps a millisecond,
# forks and exits: about a thousand pids a second, none of them alive for long.
CHAIN = r"""
import os, sys, time
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_APPEND)
print("ready", flush=True)
os.close(1)
while True:
    if os.fork():
        os._exit(0)
    os.write(fd, b"%d\n" % os.getpid())
    time.sleep(0.001)
"""


def size_settles(path, seconds=1.0):
    """The size of `path` now and `seconds` later."""
    before = os.stat(path).st_size
    time.sleep(seconds)
    return before, os.stat(path).st_size


def test_a_fork_and_exit_chain_does_not_outlive_the_lock(daemon, make_user, procs):
    """Finding 3: every pid a scan of /proc found was gone when signalled, the scan found
    none, the lock was reported, and the chain read and wrote on through the descriptor it
    inherited. Another account's process beside it is not touched."""
    user, victim = make_user(), make_user()
    vault = daemon.make_vault(user, "vault")
    held = vault / "held.log"
    assert run_as(user, ["touch", str(held)]).returncode == 0
    daemon.ok("register", "--user", user.name, "--dir", str(vault))
    canary = daemon.outside / "canary.txt"
    canary.write_text("outside the vault\n")
    before = fingerprint(daemon.outside)
    bystander = procs.spawn(victim, ["sleep", "600"])

    chain = procs.spawn(user, ["python3", "-c", CHAIN, str(held)], stdout=subprocess.PIPE, text=True)
    ready, _, _ = select.select([chain.stdout], [], [], 10)
    assert ready and chain.stdout.readline().strip() == "ready", "the chain did not start"
    wait_until(lambda: held.stat().st_size > 5000, 10, "the chain does not run")
    generations = held.read_text().count("\n")

    r = daemon.ctl("lock", "--user", user.name)
    assert r.code == 0, r.describe()
    assert daemon.state_of(user) == "locked", daemon.registration(user)
    survivors = processes_of(user.uid)
    grew = size_settles(held)
    assert not survivors and grew[0] == grew[1], (
        f"after a lock reported done, {user.name} still runs {survivors} and the vault file grew "
        f"{grew[0]} -> {grew[1]} bytes ({generations} generations before the lock)\n{r.describe()}")
    assert bystander.poll() is None, "another account's process was ended"
    assert fingerprint(daemon.outside) == before


# Runs as the user: holds a descriptor of a file in her vault, asks lockwiped for a check-in
# of her own registration on the control socket, and once answered forks a child that writes
# on through the inherited descriptor. Spared as the client of "her own" request, it keeps the
# vault after the lock the server ordered in the answer.
CHECK_IN_CLIENT = r"""
import json, os, socket, sys, time
sock, user, held = sys.argv[1:4]
fd = os.open(held, os.O_WRONLY | os.O_APPEND)
s = socket.socket(socket.AF_UNIX)
s.connect(sock)
s.sendall(json.dumps({"method": "io.lockwipe.Manager.CheckIn", "parameters": {"user": user}}).encode() + b"\0")
reply = b""
while not reply.endswith(b"\0"):
    chunk = s.recv(65536)
    if not chunk:
        break
    reply += chunk
if os.fork() == 0:
    os.setsid()
    while True:
        os.write(fd, b"after the lock\n")
        time.sleep(0.05)
print(reply.decode(errors="replace").rstrip("\0"), flush=True)
"""


def test_a_lock_the_server_orders_spares_nothing_of_the_user_who_asked_the_check_in(make_daemon, make_server, make_user, procs):
    """Finding 4: a check-in she asked ran the server's answer in her request's context, so
    the lock the server ordered spared her client, which forked and kept the vault."""
    from test_server import registered, served_daemon

    srv = make_server()
    d = served_daemon(make_daemon, srv)
    user = registered(d, make_user)
    held = user.vault / "held.log"
    assert run_as(user, ["touch", str(held)]).returncode == 0
    srv.set(user, mode="lock")

    client = procs.spawn(user, ["python3", "-c", CHECK_IN_CLIENT, d.socket, user.name, str(held)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = client.communicate(timeout=60)
    assert d.state_of(user) == "locked", d.registration(user)
    assert d.registration(user)["lock_trigger"] == "server"
    wait_until(lambda: not processes_of(user.uid), 10,
               f"{user.name}'s processes outlived the lock the server ordered: {processes_of(user.uid)}")
    grew = size_settles(held)
    assert grew[0] == grew[1] == 0, f"written after the lock: {held.read_text()[:200]!r}; client said {out!r} {err!r}"
