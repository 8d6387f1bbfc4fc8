"""lockwipectl shaped like systemd's tools (homectl, loginctl, systemctl): positional user
names, plain `lockwipectl` = `status`, "Unknown verb", global options anywhere, the
`--json=` forms, `--no-legend`/`--no-pager`, an ordinary user's verbs defaulting to
herself, `status`'s exit code 3, and errors in the user's words (issue 27, items 8 and 9)."""

import datetime
import json
import os
import pty
import re
import select
import shlex
import signal
import subprocess
import time

from daemon_harness import config_text, server_config
from host_helpers import child_env, nobody, owner_of, wait_until


def registered(d, make_user, name="vault"):
    user = make_user()
    user.vault = d.make_vault(user, f"{name}-{user.name}")
    d.ok("register", "--user", user.name, "--dir", user.vault)
    return user


def ctl_raw(d, *args, **kw):
    """lockwipectl with the arguments exactly as given (the socket where the test puts it)."""
    return d.ctl(*args, socket=False, **kw)


# --------------------------------------------------------------------------- names


def test_positional_user_names_and_user_option_both_work(daemon, make_user):
    alice = registered(daemon, make_user, "a")
    bob = registered(daemon, make_user, "b")
    carol = registered(daemon, make_user, "c")

    daemon.ok("lock", alice.name, bob.name)
    assert daemon.state_of(alice) == "locked" and daemon.state_of(bob) == "locked"
    assert daemon.state_of(carol) == "active"
    assert owner_of(alice.vault) == (0, 0, 0) and owner_of(bob.vault) == (0, 0, 0)

    daemon.ok("unlock", alice.name)
    daemon.ok("unlock", "--user", bob.name)
    assert daemon.state_of(alice) == "active" and daemon.state_of(bob) == "active"

    doc = json.loads(daemon.ok("status", "--json", alice.name, carol.name).out)
    assert sorted(r["user"] for r in doc["registrations"]) == sorted([alice.name, carol.name]), doc
    one = json.loads(daemon.ok("status", bob.name, "--json").out)
    assert [r["user"] for r in one["registrations"]] == [bob.name]

    # One name that has no registration fails that name, not the others.
    r = daemon.ctl("lock", "no-such-user-here", carol.name)
    assert r.code == 1, r.describe()
    assert "no-such-user-here" in r.err and "no registration" in r.err, r.describe()
    assert daemon.state_of(carol) == "locked", "the lock of the second name was skipped after the first failed"

    r = daemon.ctl("lock", alice.name, "--all")
    assert r.code == 2 and "not both" in r.err, r.describe()


# --------------------------------------------------------------------------- verbs


def test_plain_lockwipectl_is_status(daemon, make_user):
    alice = registered(daemon, make_user)
    plain = daemon.ok()
    assert "Policy:" in plain.out and alice.name in plain.out, plain.describe()
    # The same output, but for the times, which may tick between the two calls.
    assert re.sub(r"\d", "#", plain.out) == re.sub(r"\d", "#", daemon.ok("status").out)

    # Global options with no verb: still status.
    doc = json.loads(ctl_raw(daemon, "--json", "--socket", daemon.socket).out)
    assert [r["user"] for r in doc["registrations"]] == [alice.name]
    r = ctl_raw(daemon, "--no-legend", f"--socket={daemon.socket}")
    assert r.code == 0 and alice.name in r.out and "USER" not in r.out, r.describe()


def test_unknown_verb_says_so_and_suggests_the_nearest(daemon):
    r = daemon.ctl("stauts")
    assert r.code == 2, r.describe()
    assert "Unknown verb 'stauts'" in r.err and "'status'" in r.err, r.describe()
    r = daemon.ctl("frobnicate")
    assert r.code == 2 and "Unknown verb 'frobnicate'" in r.err, r.describe()
    assert "did you mean" not in r.err, r.describe()


def test_global_options_stand_anywhere(daemon, make_user):
    alice = registered(daemon, make_user)
    for args in (
        ["--socket", daemon.socket, "lock", alice.name],
        ["unlock", alice.name, "--socket", daemon.socket],
        ["lock", "--socket", daemon.socket, "--user", alice.name],
        ["unlock", "--user", alice.name, f"--socket={daemon.socket}"],
    ):
        r = ctl_raw(daemon, *args)
        assert r.code == 0, r.describe()
    assert daemon.state_of(alice) == "active"
    for args in (
        ["--json", "history", "--socket", daemon.socket],
        ["--socket", daemon.socket, "history", "--json"],
        ["history", "--socket", daemon.socket, "--json=short"],
        ["--no-pager", "--json", "--socket", daemon.socket, "status", "--no-legend"],
    ):
        r = ctl_raw(daemon, *args)
        assert r.code == 0, r.describe()
        json.loads(r.out)
    # Every verb takes them, also one that needs no daemon (issue 42: `offline-code
    # respond` refused --socket): the challenge is what it reads next.
    r = ctl_raw(daemon, "--socket", daemon.socket, "offline-code", "respond", "--fleet-key-file", "/nonexistent", "NOT-A-CHALLENGE")
    assert r.code == 2 and "the challenge does not read" in r.err and "nknown option" not in r.err, r.describe()


def timeless(value):
    """A status without its counts of seconds (offline_seconds, next_action.in_seconds, ...)."""
    if isinstance(value, dict):
        return {k: timeless(v) for k, v in value.items() if not k.endswith("_seconds")}
    if isinstance(value, list):
        return [timeless(v) for v in value]
    return value


def test_json_forms(daemon, make_user):
    registered(daemon, make_user)
    pretty = daemon.ok("status", "--json=pretty").out
    plain = daemon.ok("status", "--json").out
    short = daemon.ok("status", "--json=short").out
    assert short.count("\n") == 1 and pretty.count("\n") > 5, (short, pretty)
    # Three calls may straddle a second: the counts of seconds may differ, nothing else.
    assert timeless(json.loads(short)) == timeless(json.loads(pretty)) == timeless(json.loads(plain))
    assert plain.count("\n") > 5, "plain --json is no longer indented"
    off = daemon.ok("status", "--json=off").out
    assert off.startswith("Policy:"), off
    r = daemon.ctl("status", "--json=yaml")
    assert r.code == 2 and "pretty, short or off" in r.err, r.describe()
    assert json.loads(daemon.ok("history", "--json=short").out)["events"]
    assert json.loads(daemon.ok("policy", "--json=short").out)["source"] == "local"


def test_no_legend_drops_headers_and_no_pager_is_accepted(daemon, make_user):
    alice = registered(daemon, make_user)
    r = daemon.ok("status")
    assert "USER" in r.out and alice.name in r.out
    r = daemon.ok("status", "--no-legend", "--no-pager")
    assert "USER" not in r.out and alice.name in r.out, r.out
    h = daemon.ok("history", "--no-legend")
    assert "TIME" not in h.out and alice.name in h.out, h.out
    for args in (["history"], ["policy"], ["lock", alice.name], ["unlock", alice.name]):
        daemon.ok(*args, "--no-pager", "--no-legend")


# --------------------------------------------------------------------------- herself


def test_an_ordinary_users_verbs_default_to_herself(make_daemon, make_server, make_user):
    srv = make_server()
    srv.set("*", mode="ok")
    d = make_daemon(config=config_text(extra=server_config(srv.url)))
    alice = registered(d, make_user, "a")
    bob = registered(d, make_user, "b")

    r = d.ctl("check-in", user=alice)
    assert r.code == 0, "an ordinary user's check-in without a name is refused: " + r.describe()
    assert alice.name in r.out and bob.name not in r.out, r.describe()

    # Her own lock of a permission vault, which only an administrator lifts: said first and
    # asked for (issue 42, item 3: she locked herself out, warned by nothing). Without a
    # terminal to confirm on, --yes.
    r = d.ctl("lock", user=alice)
    assert r.code == 2 and "refusing without --yes" in r.err, r.describe()
    assert f"{alice.name}: once locked, only an administrator can unlock it (lockwipectl unlock {alice.name}" in r.out, r.describe()
    assert "you cannot undo this lock yourself" in r.out, r.describe()
    assert d.state_of(alice) == "active"
    r = d.ctl("lock", "--yes", user=alice)
    assert r.code == 0, "an ordinary user's lock without a name is refused: " + r.describe()
    assert d.state_of(alice) == "locked" and d.state_of(bob) == "active"
    assert owner_of(alice.vault) == (0, 0, 0)
    # The way back it named: an administrator's unlock.
    r = d.ctl("unlock", user=alice)
    assert r.code == 77, r.describe()
    d.ok("unlock", alice.name)
    assert d.state_of(alice) == "active"
    # An administrator's lock asks nothing: she can undo it.
    r = d.ok("lock", alice.name)
    assert "once locked" not in r.out, r.describe()
    d.ok("unlock", alice.name)
    r = d.ctl("lock", "--yes", user=alice)
    assert r.code == 0, r.describe()

    # Root names someone (or --all): no default for an administrator.
    r = d.ctl("lock")
    assert r.code == 2 and "give the users to lock" in r.err, r.describe()


def test_an_unregistered_user_is_told_she_has_no_registration(daemon, make_user):
    alice = registered(daemon, make_user)
    stranger = make_user()
    for args in (["lock", "--user", stranger.name], ["lock"], ["lock", alice.name], ["check-in"]):
        r = daemon.ctl(*args, user=stranger)
        assert r.code == 77, r.describe()
        assert "no registration" in r.err, r.describe()
        assert "only your own registration" not in r.err, r.describe()
    assert daemon.state_of(alice) == "active"


def test_a_user_may_dry_run_the_wipe_of_her_own_vault(daemon, make_user):
    alice = registered(daemon, make_user, "a")
    bob = registered(daemon, make_user, "b")
    r = daemon.ctl("wipe", "--dry-run", "--user", alice.name, user=alice)
    assert r.code == 0, "a user may survey her own vault: " + r.describe()
    assert str(alice.vault) in r.out and "nothing was changed" in r.out, r.describe()
    r = daemon.ctl("wipe", "--dry-run", "--user", bob.name, user=alice)
    assert r.code == 77, r.describe()
    assert str(bob.vault) not in r.out
    r = daemon.ctl("wipe", "--dry-run", "--all", user=alice)
    assert r.code == 77, r.describe()
    # Without a name, her own (issue 42: it asked for her own name), as lock does.
    r = daemon.ctl("wipe", "--dry-run", user=alice)
    assert r.code == 0, r.describe()
    assert str(alice.vault) in r.out and str(bob.vault) not in r.out and "nothing was changed" in r.out, r.describe()
    # Root has no registration of her own to mean; a real wipe always names whom it erases.
    r = daemon.ctl("wipe", "--dry-run")
    assert r.code == 2 and "give the users whose wipe to preview" in r.err, r.describe()
    r = daemon.ctl("wipe", "--yes", user=alice)
    assert r.code == 2 and "give the users whose data to wipe" in r.err, r.describe()
    # The real wipe of a permission-locked vault stays an administrator's.
    r = daemon.ctl("wipe", "--yes", alice.name, user=alice)
    assert r.code == 77, r.describe()
    assert daemon.state_of(alice) == "active"


def test_policy_and_status_agree_on_the_source(make_daemon, make_server, make_user):
    srv = make_server()
    srv.set("*", mode="ok", settings={
        "blockWipingPolicy": {"blockWipeEnabled": "true", "blockDisconnectedPeriod": "3", "wipeDisconnectedPeriod": 9}})
    d = make_daemon(config=config_text(lock=20, wipe=40, extra=server_config(srv.url)))
    alice = registered(d, make_user)
    d.ok("check-in", "--user", alice.name)
    wait_until(lambda: d.registration(alice).get("policy_source") == "server", 10, "the server's policy did not arrive")
    for who in (None, nobody()):
        policy = json.loads(d.ok("policy", "--json", user=who).out)
        status = json.loads(d.ok("status", "--json", user=who).out)["policy"]
        assert policy == status, f"as {who}: policy says {policy}, status says {status}"
        assert policy["source"] == "server"


# --------------------------------------------------------------------------- exit code


def test_status_exits_3_when_a_lock_failed(daemon, make_user):
    from test_vault_identity import Swap

    s = Swap(daemon, make_user)
    assert daemon.ctl("status").code == 0
    s.make_unsafe()
    s.attack()
    r = daemon.ctl("lock", "--user", s.alice.name)
    assert r.code != 0, r.describe()
    r = daemon.ctl("status")
    assert r.code == 3, r.describe()
    assert daemon.status()["registrations"]
    assert "LOCK FAILED" in r.out and s.alice.name in r.err, r.describe()
    r = daemon.ctl("status", "--json")
    assert r.code == 3 and json.loads(r.out)["registrations"], r.describe()
    # Another user's status is not failed by hers.
    assert daemon.ctl("status", s.bob.name).code == 0


# --------------------------------------------------------------------------- errors


INTERNALS = ("errno", "Error(", "Domain", "error 2", "DecodingError", "CommandFailure")


def assert_plain_words(r):
    for word in INTERNALS:
        assert word not in r.err, f"the message leaks {word!r}: " + r.describe()


def test_a_negative_limit_says_what_a_limit_is(daemon):
    for args in (["history", "--limit", "-5"], ["history", "-n", "-5"], ["history", "--limit=-5"]):
        r = daemon.ctl(*args)
        assert r.code == 2, r.describe()
        assert "must be a number ≥ 0" in r.err and "-5" in r.err, r.describe()
        assert "Missing value" not in r.err, r.describe()
    assert daemon.ctl("history", "-n", "3").code == 0


def test_token_file_errors_name_the_file_and_what_is_wrong(daemon, make_user):
    user = make_user()
    vault = daemon.make_vault(user, "v")
    empty = daemon.root / "empty-token"
    empty.write_text("")
    blank = daemon.root / "blank-token"
    blank.write_text("  \n")
    missing = daemon.root / "missing-token"
    for path, words in ((empty, "is empty"), (blank, "is empty"), (missing, "does not exist"), (daemon.root, "is a directory")):
        r = daemon.ctl("register", "--user", user.name, "--dir", vault, "--token-file", path)
        assert r.code == 2, r.describe()
        assert str(path) in r.err and words in r.err, r.describe()
        assert "cannot read the token\n" not in r.err
        assert_plain_words(r)
    assert daemon.registration(user) is None


def test_a_request_over_the_limit_says_the_limit(daemon, make_user):
    user = make_user()
    vault = daemon.make_vault(user, "v")
    files = []
    for name in ("token", "cert", "key"):
        f = daemon.root / name
        f.write_text("x" * 30_000)
        files.append(f)
    r = daemon.ctl("register", "--user", user.name, "--dir", vault, "--token-file", files[0], "--client-cert", files[1],
                   "--client-key", files[2])
    assert r.code != 0, r.describe()
    assert "65536 bytes" in r.err and "max_message_bytes" in r.err, r.describe()
    assert_plain_words(r)


def test_an_unreachable_daemon_is_said_in_words(daemon, tmp_path):
    r = ctl_raw(daemon, "--socket", tmp_path / "no-socket", "status")
    assert r.code == 69, r.describe()
    assert str(tmp_path / "no-socket") in r.err and "no socket there" in r.err, r.describe()
    assert "No such file" not in r.err
    assert_plain_words(r)


# --------------------------------------------------------------------------- lock


def test_lock_lists_the_processes_it_ends_first(daemon, make_user, procs):
    alice = registered(daemon, make_user)
    p = procs.spawn(alice, ["sleep", "300"])
    wait_until(lambda: os.path.exists(f"/proc/{p.pid}"), 5, "sleep did not start")
    r = daemon.ok("lock", "--user", alice.name)
    lines = r.out.splitlines()
    listing = [i for i, l in enumerate(lines) if l.startswith(f"{alice.name}: will end") and f"{p.pid} sleep" in l]
    assert listing, "the lock did not name the process it ends: " + r.describe()
    done = [i for i, l in enumerate(lines) if l.startswith(f"{alice.name}:") and i not in listing]
    assert done and listing[0] < done[0], "the listing must come before the result: " + r.describe()
    assert p.wait(timeout=10) is not None
    assert daemon.state_of(alice) == "locked"


def test_lock_all_asks_first_and_needs_yes_without_a_terminal(daemon, make_user, bins):
    alice = registered(daemon, make_user, "a")
    bob = registered(daemon, make_user, "b")
    r = daemon.ctl("lock", "--all")
    assert r.code == 2 and "--yes" in r.err, r.describe()
    assert daemon.state_of(alice) == "active" and daemon.state_of(bob) == "active"

    out, code = run_in_pty([bins.lockwipectl, "--socket", daemon.socket, "lock", "--all"], answer=b"no\n")
    assert code == 1 and "EVERY registration" in out and "nothing was done" in out, out
    assert daemon.state_of(alice) == "active" and daemon.state_of(bob) == "active"

    out, code = run_in_pty([bins.lockwipectl, "--socket", daemon.socket, "lock", "--all"], answer=b"yes\n")
    assert code == 0, out
    assert daemon.state_of(alice) == "locked" and daemon.state_of(bob) == "locked"
    daemon.ok("unlock", alice.name, bob.name)
    daemon.ok("lock", "--all", "--yes")
    assert daemon.state_of(alice) == "locked" and daemon.state_of(bob) == "locked"


# --------------------------------------------------------------------------- pager, colour


def run_in_pty(argv, env=None, answer=None, timeout=30):
    """Runs argv with a pseudo-terminal as stdin, stdout and stderr; returns what it
    printed and its exit code. `answer` is typed once the program asks."""
    pid, fd = pty.fork()
    if pid == 0:
        try:
            extra = {k: v for k, v in (env or {}).items() if v is not None}
            os.execve(str(argv[0]), [str(a) for a in argv], child_env(extra))
        finally:
            os._exit(127)
    out = b""
    deadline = time.monotonic() + timeout
    answered = answer is None
    while time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.2)
        if ready:
            try:
                chunk = os.read(fd, 65536)
            except OSError:
                break
            if not chunk:
                break
            out += chunk
            if not answered and b"Type 'yes'" in out:
                os.write(fd, answer)
                answered = True
    else:
        os.kill(pid, signal.SIGKILL)
    _, status = os.waitpid(pid, 0)
    os.close(fd)
    return out.decode(errors="replace"), os.waitstatus_to_exitcode(status)


def pager_script(tmp_path, name):
    """A pager that records that it ran (and $LESS), and keeps what it was given."""
    script = tmp_path / name
    script.write_text(f'#!/bin/sh\necho "LESS=$LESS" > {tmp_path}/{name}.ran\ncat > {tmp_path}/{name}.got\n')
    script.chmod(0o755)
    return script


def test_a_pager_on_a_terminal_only_as_systemd_chooses_it(daemon, make_user, bins, tmp_path):
    alice = registered(daemon, make_user)
    first, second = pager_script(tmp_path, "first"), pager_script(tmp_path, "second")
    base = [bins.lockwipectl, "--socket", daemon.socket]
    clean = {"LESS": None, "SYSTEMD_PAGER": None}

    out, code = run_in_pty(base + ["status"], env={**clean, "PAGER": str(first)})
    assert code == 0, out
    assert (tmp_path / "first.ran").read_text().strip() == "LESS=FRXMK"
    assert alice.name in (tmp_path / "first.got").read_text()
    assert alice.name not in out, "the output went to the terminal, not the pager"

    run_in_pty(base + ["history"], env={"LESS": "X", "SYSTEMD_PAGER": str(second), "PAGER": str(first)})
    assert (tmp_path / "second.ran").read_text().strip() == "LESS=X"
    assert alice.name in (tmp_path / "second.got").read_text()

    for f in tmp_path.glob("*.ran"):
        f.unlink()
    out, code = run_in_pty(base + ["status", "--no-pager"], env={**clean, "PAGER": str(first)})
    assert code == 0 and alice.name in out, out
    out, code = run_in_pty(base + ["status"], env={**clean, "PAGER": ""})
    assert code == 0 and alice.name in out, out
    r = daemon.ctl("status", env={"PAGER": str(first)})
    assert r.code == 0 and alice.name in r.out
    assert not list(tmp_path.glob("*.ran")), "a pager ran without a terminal, or with --no-pager/PAGER="


def test_under_sudo_only_a_secure_less_pages(daemon, make_user, bins, tmp_path):
    registered(daemon, make_user)
    pager = pager_script(tmp_path, "pager")
    base = [bins.lockwipectl, "--socket", daemon.socket, "status"]
    out, code = run_in_pty(base, env={"PAGER": str(pager), "SUDO_UID": "1000"})
    assert code == 0 and not (tmp_path / "pager.ran").exists(), "a pager that can run commands ran under sudo"
    out, code = run_in_pty(base, env={"PAGER": str(pager), "SUDO_UID": "1000", "SYSTEMD_PAGERSECURE": "0"})
    assert code == 0 and (tmp_path / "pager.ran").exists(), out


RED = "\x1b[1;31m"


def test_colour_only_on_a_terminal_and_never_with_no_color(daemon, make_user, bins):
    alice = registered(daemon, make_user)
    daemon.ok("wipe", "--user", alice.name, "--yes")
    base = [bins.lockwipectl, "--socket", daemon.socket, "status", "--no-pager"]
    out, code = run_in_pty(base, env={"NO_COLOR": None, "TERM": "xterm"})
    assert code == 0 and RED + "wiped" in out, repr(out)
    # The test machine has no `lockwipe` group: status warns about it, in yellow.
    assert "\x1b[1;33mwarning:" in out, repr(out)
    out, code = run_in_pty(base, env={"TERM": "dumb"})
    assert code == 0 and "wiped" in out and "\x1b[" not in out, repr(out)
    out, code = run_in_pty(base, env={"NO_COLOR": "1", "TERM": "xterm"})
    assert code == 0 and "wiped" in out and "\x1b[" not in out, repr(out)
    r = daemon.ctl("status", env={"TERM": "xterm"})
    assert "wiped" in r.out and "\x1b[" not in r.out, repr(r.out)


# --------------------------------------------------------------------------- completion


def bash_complete(bins, tmp_path, words, env=None, tool="lockwipectl"):
    """What bash offers for the last word of `words` (the tool's generated script, its
    completion function called as bash calls it); also the stderr and the time taken."""
    binary = bins.bin_dir / tool
    script = tmp_path / f"{tool}.bash"
    if not script.exists():
        script.write_text(subprocess.run([binary, "--generate-completion-script", "bash"],
                                         capture_output=True, text=True, check=True).stdout)
    words = [str(binary)] + [str(w) for w in words]
    line = " ".join(words)
    quoted = " ".join(shlex.quote(w) for w in words)
    program = (
        f"source {shlex.quote(str(script))}\n"
        f"COMP_WORDS=({quoted}); COMP_CWORD={len(words) - 1}\n"
        f"COMP_LINE={shlex.quote(line)}; COMP_POINT=${{#COMP_LINE}}\n"
        f"_{tool} {shlex.quote(words[0])} {shlex.quote(words[-1])} {shlex.quote(words[-2])}\n"
        'printf "%s\\n" "${COMPREPLY[@]}"\n'
    )
    started = time.monotonic()
    r = subprocess.run(["bash", "-c", program], capture_output=True, text=True, env=child_env(env), timeout=30)
    return [w for w in r.stdout.splitlines() if w], r.stderr, time.monotonic() - started


def test_bash_completes_files_for_path_options(daemon, bins, tmp_path):
    files = tmp_path / "files"
    files.mkdir()
    (files / "token-a").write_text("a")
    (files / "token-b").write_text("b")
    (files / "subdir").mkdir()
    for verb, option in (("register", "--token-file"), ("credentials", "--client-cert"), ("register", "--client-key")):
        got, _, _ = bash_complete(bins, tmp_path, [verb, option, f"{files}/tok"])
        assert sorted(got) == [f"{files}/token-a", f"{files}/token-b"], (verb, option, got)
    got, _, _ = bash_complete(bins, tmp_path, ["register", "--dir", f"{files}/"])
    assert f"{files}/subdir" in got and f"{files}/token-a" not in got, got
    got, _, _ = bash_complete(bins, tmp_path, ["status", "--socket", f"{files}/tok"])
    assert f"{files}/token-a" in got, got
    got, _, _ = bash_complete(bins, tmp_path, ["--config", f"{files}/tok"], tool="lockwiped")
    assert sorted(got) == [f"{files}/token-a", f"{files}/token-b"], got
    got, _, _ = bash_complete(bins, tmp_path, ["--state-dir", f"{files}/"], tool="lockwiped")
    assert got == [f"{files}/subdir"], got


def test_bash_completes_registered_users_and_is_quiet_without_the_daemon(daemon, make_user, bins, tmp_path):
    alice = registered(daemon, make_user, "a")
    bob = registered(daemon, make_user, "b")
    for words in (["lock", "--socket", daemon.socket, ""], ["lock", "--socket", daemon.socket, "--user", ""],
                  ["wipe", "--socket", daemon.socket, alice.name[:-1]]):
        got, _, _ = bash_complete(bins, tmp_path, words)
        assert alice.name in got and (bob.name in got) == (words[-1] == ""), (words, got)
    got, _, _ = bash_complete(bins, tmp_path, ["status", ""], env={"LOCKWIPE_SOCKET": str(daemon.socket)})
    assert sorted(got) == sorted([alice.name, bob.name]), got

    got, err, took = bash_complete(bins, tmp_path, ["lock", "--socket", tmp_path / "none", ""])
    assert got == [] and err == "" and took < 10, (got, err, took)


# --------------------------------------------------------------------------- history


def test_history_since_and_n(daemon, make_user):
    alice = registered(daemon, make_user)
    daemon.ok("lock", "--user", alice.name)
    locked = [e for e in daemon.history(alice) if e["kind"] == "lock"][-1]["time"]
    cut = int(datetime.datetime.fromisoformat(locked.replace("Z", "+00:00")).timestamp()) + 1
    time.sleep(2.1)  # the unlock is recorded at a later second than the lock (whole seconds)
    daemon.ok("unlock", "--user", alice.name)
    kinds = lambda *args: [e["kind"] for e in json.loads(daemon.ok("history", "--json", *args).out)["events"]]
    assert "lock" in kinds() and "register" in kinds()
    since = kinds("--since", f"@{cut}")
    assert "unlock" in since and "lock" not in since and "register" not in since, since
    assert kinds("--since", "-1h") == kinds()
    assert kinds("--since", "1 day ago") == kinds()
    assert kinds("--since", "tomorrow") == []
    assert len(kinds("-n", "1")) == 1 and kinds("-n", "1") == kinds()[-1:]
    r = daemon.ctl("history", "--since", "last tuesday-ish")
    assert r.code == 2 and "--since" in r.err and "cannot read" in r.err, r.describe()


def test_history_follow_prints_new_events_as_they_come(daemon, make_user, bins):
    alice = registered(daemon, make_user)
    p = subprocess.Popen([bins.lockwipectl, "--socket", daemon.socket, "history", "-f"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, env=child_env())
    try:
        lines = []
        pending = [b""]

        def read_until(predicate, what):
            deadline = time.monotonic() + 15
            while time.monotonic() < deadline:
                if any(predicate(l) for l in lines):
                    return
                ready, _, _ = select.select([p.stdout], [], [], 0.5)
                if ready:
                    chunk = os.read(p.stdout.fileno(), 65536)
                    if not chunk:
                        break
                    *complete, pending[0] = (pending[0] + chunk).split(b"\n")
                    lines.extend(c.decode() for c in complete)
            if any(predicate(l) for l in lines):
                return
            raise AssertionError(f"history -f did not print {what}: {lines}\n{p.stderr.read() if p.poll() is not None else ''}")

        read_until(lambda l: "register" in l and alice.name in l, "the registration")
        daemon.ok("lock", "--user", alice.name)
        read_until(lambda l: " lock " in f" {l} " and alice.name in l, "the new lock")
        daemon.ok("unlock", "--user", alice.name)
        read_until(lambda l: "unlock" in l and alice.name in l, "the new unlock")
        assert p.poll() is None, "history -f ended"
        assert sum(1 for l in lines if l.startswith("TIME")) == 1, lines
        assert sum(1 for l in lines if "register" in l) == 1, f"an event was printed twice: {lines}"
    finally:
        p.kill()
        p.wait()
