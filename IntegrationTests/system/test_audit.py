"""Who did it, clean paths, and a way forward after a wipe (issue 27): the requester in
the journal and in history, one spelling of elapsed time, `history --limit 0`; control
characters refused at registration and the hooks' directories; what to do after a wipe
and registering an existing directory; errors in words."""

import json
import os
import re
import socket
import stat
import subprocess

import pytest

from daemon_harness import config_text, server_config
from host_helpers import wait_until

# The harness runs lockwiped with LOCKWIPE_LOG=stderr: each journal entry is one line of
# `FIELD=value` pairs (values with spaces are quoted), the same fields the journal gets.
FIELD = re.compile(r'\b(LOCKWIPE_[A-Z0-9_]+)=("(?:[^"\\]|\\.)*"|\S+)')


def fields_of(line):
    return {k: v[1:-1] if v.startswith('"') else v for k, v in FIELD.findall(line)}


def entries(daemon, *needles):
    return [fields_of(line) for line in daemon.log_lines(*needles)]


def register(daemon, user, *dirs, **kw):
    args = ["register", "--user", user.name]
    for d in dirs:
        args += ["--dir", str(d)]
    return daemon.ctl(*args, **kw)


# --------------------------------------------------------------------------- who asked


def test_an_admin_lock_and_wipe_name_their_requester_in_the_journal(daemon, make_user):
    """`journalctl LOCKWIPE_PEER_UID=0 LOCKWIPE_ACTION=wipe` finds root's wipe: every
    entry of a control request carries the client's uid, pid and comm."""
    user = make_user()
    register(daemon, user, daemon.make_vault(user, "v"))
    lock = daemon.ok("lock", "--user", user.name)
    wipe = daemon.ok("wipe", "--user", user.name, "--yes")

    for action, r in (("lock", lock), ("wipe", wipe)):
        found = entries(daemon, f"LOCKWIPE_ACTION={action}", f"LOCKWIPE_USER={user.name}")
        assert found, f"no {action} entry\n" + daemon.log_tail()
        for f in found:
            assert f.get("LOCKWIPE_PEER_UID") == "0", (action, f)
            assert f.get("LOCKWIPE_PEER_PID") == str(r.pid), (action, r.pid, f)
            assert f.get("LOCKWIPE_PEER_COMM") == "lockwipectl", (action, f)
    # The wipe's report entry among them, and its elapsed time in microseconds.
    report = [f for f in entries(daemon, "LOCKWIPE_ACTION=wipe", f"LOCKWIPE_USER={user.name}") if "LOCKWIPE_FILES" in f]
    assert report and int(report[-1]["LOCKWIPE_ELAPSED_USEC"]) > 0, report
    assert not daemon.log_lines("LOCKWIPE_ELAPSED_SECONDS="), "an elapsed time still spelled in seconds"


def test_a_users_own_lock_names_her(daemon, make_user):
    user = make_user()
    register(daemon, user, daemon.make_vault(user, "v"))
    r = daemon.ctl("lock", "--user", user.name, "--yes", user=user)
    assert r.code == 0, r.describe()
    found = entries(daemon, "LOCKWIPE_ACTION=lock", f"LOCKWIPE_USER={user.name}")
    assert found and all(f.get("LOCKWIPE_PEER_UID") == str(user.uid) for f in found), found
    assert all(f.get("LOCKWIPE_PEER_PID") == str(r.pid) for f in found), (r.pid, found)


def test_history_names_the_requester_and_keeps_two_registrations_of_one_user_apart(daemon, make_user):
    user = make_user()
    first = daemon.ok("register", "--user", user.name, "--dir", daemon.make_vault(user, "one"))
    lock = daemon.ok("lock", "--user", user.name)
    daemon.ok("unlock", "--user", user.name)
    unregister = daemon.ok("unregister", "--user", user.name)
    second = daemon.ok("register", "--user", user.name, "--dir", daemon.make_vault(user, "two"))
    own = daemon.ctl("lock", "--user", user.name, "--yes", user=user)
    assert own.code == 0, own.describe()

    events = daemon.history(user)
    kinds = [e["kind"] for e in events]
    assert kinds == ["register", "lock", "unlock", "unregister", "register", "lock"], events
    ids = [e.get("registration_id") for e in events]
    assert ids[0] and ids[:4] == [ids[0]] * 4, events
    assert ids[4] and ids[4:] == [ids[4]] * 2 and ids[4] != ids[0], events
    pids = [first.pid, lock.pid, None, unregister.pid, second.pid, own.pid]
    for e, pid in zip(events, pids):
        req = e.get("requester")
        assert req and req["comm"] == "lockwipectl", e
        assert req["uid"] == (user.uid if e is events[-1] else 0), e
        if pid is not None:
            assert req["pid"] == pid, (e, pid)

    table = daemon.ok("history", "--user", user.name).out.splitlines()
    header = table[0].split()
    assert "BY" in header and "REGISTRATION" in header, table[0]
    rows = [line.split() for line in table[1:]]
    by = header.index("BY")
    regs = header.index("REGISTRATION")
    assert [row[by] for row in rows] == ["root"] * 5 + [user.name], table
    assert len({row[regs] for row in rows}) == 2, table


def test_history_limit_zero_shows_no_event(daemon, make_user):
    user = make_user()
    register(daemon, user, daemon.make_vault(user, "v"))
    daemon.ok("lock", "--user", user.name)
    assert json.loads(daemon.ok("history", "--json", "--limit", "0").out)["events"] == []
    assert [e["kind"] for e in json.loads(daemon.ok("history", "--json", "--limit", "1").out)["events"]] == ["lock"]
    text = daemon.ok("history", "--limit", "0").out
    assert "register" not in text and "lock" not in text, text


# --------------------------------------------------------------------------- clean paths


def test_a_path_with_a_newline_is_refused_naming_it(daemon, make_user):
    user = make_user()
    bad = daemon.data / "field\nother"
    r = register(daemon, user, daemon.make_vault(user, "fine"), bad)
    assert r.code == 1, r.describe()
    shown = str(bad).replace("\n", "\\n")
    assert f'directory "{shown}" contains a control character (a newline, U+000A)' in r.err, r.describe()
    assert "\n" not in r.err.strip(), f"the refusal itself breaks the line: {r.err!r}"
    assert daemon.registration(user) is None
    assert not bad.exists(), "a refused registration created the directory"


@pytest.mark.parametrize("char, code", [("\x1b", "U+001B"), ("\x7f", "U+007F"), ("\u009b", "U+009B")])
def test_other_control_characters_in_a_path_are_refused(daemon, make_user, char, code):
    user = make_user()
    r = register(daemon, user, daemon.data / f"x{char}y")
    assert r.code == 1 and f"contains a control character ({code})" in r.err, r.describe()
    assert char not in r.err, repr(r.err)


def test_a_user_name_with_a_control_character_is_refused_naming_the_field(daemon):
    r = daemon.ctl("register", "--user", "eve\nroot", "--dir", daemon.data / "eve")
    assert r.code == 1, r.describe()
    assert 'user name "eve\\nroot" contains a control character (a newline, U+000A)' in r.err, r.describe()


HOOK = """#!/bin/bash
{{
  printf 'count=%s\\n' "$LOCKWIPE_DIRECTORY_COUNT"
  for ((i = 1; i <= LOCKWIPE_DIRECTORY_COUNT; i++)); do
    v="LOCKWIPE_DIRECTORY_$i"; printf 'dir=%s\\n' "${{!v}}"
  done
  printf '%s\\n' "$LOCKWIPE_DIRECTORIES" | sed 's/^/line=/'
}} >> {out}
"""


def test_hooks_get_each_directory_exactly(make_daemon, make_user):
    d = make_daemon(start=False)
    out = d.root / "hook-dirs"
    d.write_hook("10-dirs", HOOK.format(out=out))
    d.start()
    user = make_user()
    dirs = [d.make_vault(user, "with space"), d.make_vault(user, "plain")]
    register(d, user, *dirs)
    d.ok("lock", "--user", user.name)
    wait_until(lambda: out.exists() and out.read_text().count("count=") >= 2, 10, "the lock hooks did not run")
    first = out.read_text().split("count=")[1]
    lines = ["count=" + first.splitlines()[0]] + first.splitlines()[1:]
    assert lines == [
        "count=2", f"dir={dirs[0]}", f"dir={dirs[1]}", f"line={dirs[0]}", f"line={dirs[1]}",
    ], out.read_text()


# --------------------------------------------------------------------------- after a wipe


def as_user(user, *argv):
    """Runs argv as `user` through runuser (a real other Unix user, no capabilities)."""
    return subprocess.run(["runuser", "-u", user.name, "--", *map(str, argv)], capture_output=True, text=True, timeout=30)


def test_after_a_wipe_the_way_forward_is_said_and_the_directory_is_given_back(daemon, make_user):
    """A permission-mode wipe leaves the directory root:root 0000; unlock and status say
    what to do next, and unregister + register of the same directory gives it back: the
    user can write into the vault that status calls active."""
    user = make_user()
    vault = daemon.make_vault(user, "v")
    register(daemon, user, vault)
    daemon.ok("wipe", "--user", user.name, "--yes")
    st = os.stat(vault)
    assert (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (0, 0, 0), "the wipe did not leave root:root 0000"

    step = f"lockwipectl unregister --user {user.name}, then lockwipectl register --user {user.name} --dir DIR"
    r = daemon.ctl("unlock", "--user", user.name)
    assert r.code == 1 and "not locked (state: wiped)" in r.err and step in r.err, r.describe()
    r = daemon.ctl("lock", "--user", user.name)
    assert r.code == 1 and step in r.err, r.describe()
    status = daemon.ok("status").out
    assert step in status, status

    daemon.ok("unregister", "--user", user.name)
    r = daemon.ok("register", "--user", user.name, "--dir", vault)
    assert f"given to {user.name}" in r.out, r.describe()
    assert daemon.state_of(user) == "active"
    st = os.stat(vault)
    assert (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (user.uid, user.gid, 0o700), st
    w = as_user(user, "sh", "-c", f'echo new > "{vault}/after-wipe.txt" && cat "{vault}/after-wipe.txt"')
    assert w.returncode == 0 and w.stdout == "new\n", f"the user cannot use her active vault: {w.stderr}"


def test_an_existing_directory_of_someone_else_is_refused_with_the_reason(daemon, make_user):
    alice, bob = make_user(), make_user()
    bobs = daemon.make_vault(bob, "bobs")
    r = register(daemon, alice, bobs)
    assert r.code == 1 and f"belongs to uid {bob.uid}, not to {alice.name} (uid {alice.uid})" in r.err, r.describe()
    assert os.stat(bobs).st_uid == bob.uid, "a refused registration changed the owner"
    assert daemon.registration(alice) is None
    # All or nothing: a directory of root's given before the refusal is given back.
    roots = daemon.data / "roots"
    roots.mkdir(mode=0o751)
    r = register(daemon, alice, roots, bobs)
    assert r.code == 1 and "belongs to uid" in r.err, r.describe()
    st = os.stat(roots)
    assert (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (0, 0, 0o751), st
    assert daemon.registration(alice) is None


def test_an_existing_directory_of_roots_is_given_to_the_user_and_only_it(daemon, make_user):
    """Root's directory becomes hers through its descriptor: the directory itself, never
    what it holds (no recursive chown)."""
    user = make_user()
    prepared = daemon.data / "prepared"
    prepared.mkdir(mode=0o755)
    (prepared / "root-file").write_text("root's")
    os.chmod(prepared / "root-file", 0o600)
    daemon.ok("register", "--user", user.name, "--dir", prepared)
    st = os.stat(prepared)
    assert (st.st_uid, stat.S_IMODE(st.st_mode)) == (user.uid, 0o755), st
    assert os.stat(prepared / "root-file").st_uid == 0, "the content was chowned too"
    w = as_user(user, "touch", prepared / "mine")
    assert w.returncode == 0, w.stderr
    assert daemon.state_of(user) == "active"


# --------------------------------------------------------------------------- errors in words


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_check_in_to_a_closed_port_names_the_url_and_the_cause(make_daemon, make_user):
    url = f"http://127.0.0.1:{free_port()}/lockwipe"
    d = make_daemon(config=config_text(extra=server_config(url, timeout=3)))
    user = make_user()
    register(d, user, d.make_vault(user, "v"))
    r = d.ctl("check-in", "--user", user.name)
    text = r.out + r.err
    assert f"cannot connect to {url}" in text, r.describe()
    assert "the connection was refused" in text and "errno" not in text, r.describe()
    last = d.registration(user)["last_error"]
    assert url in last and "errno" not in last and "error set" not in last, last
    errors = [f["LOCKWIPE_ERROR"] for f in entries(d, "LOCKWIPE_ACTION=check-in", "LOCKWIPE_ERROR=")]
    assert errors and all(url in e and "errno" not in e for e in errors), errors
