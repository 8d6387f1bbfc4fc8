"""History a user cannot weaponise (issue 40, findings 5 and 9; docs/security.md).

Finding 5: a refused offline code used to be recorded with the offending "character"
quoted, a grapheme cluster as long as the user liked; refusals were neither aggregated
nor pruned, and `GetHistory` built its whole reply in memory. Here a user sends many
codes of 60 KB each, every one a single grapheme cluster, straight to the socket: the
state database must stay small, her refusals must be one aggregated event that names a
code point, and `lockwipectl history` must still answer with a bounded reply.

Finding 9: a debug build trapped on "ß" (`Character("ß".uppercased())` is two
characters): lockwipectl and lockwiped must refuse it in words that name U+00DF, and the
daemon must stay up.
"""

import contextlib
import json
import os
import textwrap

from daemon_harness import config_text
from host_helpers import run_as
from test_offline_codes import setup as offline_codes_setup

# A client that sends one request `count` times on one connection, as whoever runs it,
# and prints the first and the last reply (the user's own uid is what the daemon sees).
CLIENT = textwrap.dedent("""
    import json, socket, sys
    path, message, count = sys.argv[1], sys.argv[2].encode(), int(sys.argv[3])
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(60)
    s.connect(path)
    replies = []
    buf = b""
    for i in range(count):
        s.sendall(message + b"\\0")
        while b"\\0" not in buf:
            chunk = s.recv(1 << 20)
            if not chunk:
                print(json.dumps({"sent": i + 1, "replies": replies, "closed": True}))
                sys.exit(0)
            buf += chunk
        reply, _, buf = buf.partition(b"\\0")
        if i == 0 or i == count - 1:
            replies.append(json.loads(reply))
    print(json.dumps({"sent": count, "replies": replies, "closed": False}))
""")

# One grapheme cluster of about 60 KB: "A" (in the codes' alphabet) and 30,000 combining
# acute accents, which all attach to it.
HUGE = "A" + "\u0301" * 30_000


def send_as(d, user, method, parameters, count):
    script = d.root / "client.py"
    script.write_text(CLIENT)
    script.chmod(0o644)
    # Raw UTF-8 in the JSON (not \\u escapes): 60 KB, under max_message_bytes (64 KiB).
    message = json.dumps({"method": method, "parameters": parameters}, ensure_ascii=False)
    r = run_as(user, ["/usr/bin/python3", str(script), str(d.socket), message, str(count)], timeout=300)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def setup(d, make_user):
    secret, user, _ = offline_codes_setup(d, make_user)
    d.ok("offline-code", "provision", "--fleet-key-file", secret)
    # An outstanding challenge: only then is an entered code read at all.
    r = d.ctl("offline-code", "challenge", "--extend", "1", user=user)
    assert r.code == 0, r.describe()
    return user


@contextlib.contextmanager
def memory_cgroup(pid, limit):
    """`pid` moved into a memory cgroup of its own limited to `limit` bytes, as the unit's
    MemoryMax= puts lockwiped: cgroup v2 where this process's cgroup is one, else v1's
    memory controller. Yields a function that reads the peak usage so far, or None where
    neither can be made here. The cgroup is removed afterwards (its process moved back)."""
    made = None
    try:
        with open("/proc/self/cgroup") as f:
            lines = [line.rstrip("\n").split(":", 2) for line in f]
        v1 = next((path for _, controllers, path in lines if "memory" in controllers.split(",")), None)
        if v1 is not None and os.path.isdir(f"/sys/fs/cgroup/memory{v1}"):
            parent, limit_file, peak_file = f"/sys/fs/cgroup/memory{v1}", "memory.limit_in_bytes", "memory.max_usage_in_bytes"
        else:
            v2 = next((path for hierarchy, _, path in lines if hierarchy == "0"), None)
            parent, limit_file, peak_file = f"/sys/fs/cgroup{v2}", "memory.max", "memory.peak"
        made = os.path.join(parent, f"lockwipe-test-{os.getpid()}")
        os.mkdir(made)
        with open(os.path.join(made, limit_file), "w") as f:
            f.write(str(limit))
        with open(os.path.join(made, "cgroup.procs"), "w") as f:
            f.write(str(pid))
    except OSError:
        if made and os.path.isdir(made):
            os.rmdir(made)
        yield None
        return
    try:
        yield lambda: int(open(os.path.join(made, peak_file)).read())
    finally:
        # Back to where this test runs, then the cgroup goes.
        try:
            with open(os.path.join(parent, "cgroup.procs"), "w") as f:
                f.write(str(pid))
        except OSError:
            pass
        try:
            os.rmdir(made)
        except OSError:
            pass


def state_bytes(d):
    """The state database with its write-ahead log."""
    return sum(p.stat().st_size for p in d.state_dir.iterdir() if p.name.startswith("state.sqlite"))


def test_many_huge_refused_codes_leave_a_small_aggregated_history_that_still_answers(make_daemon, make_user):
    d = make_daemon(config=config_text())
    user = setup(d, make_user)
    before = state_bytes(d)
    count = 1_500

    # Under the unit's MemoryMax=512M, its memory (page cache of the state database
    # included) must stay far below: what she sends is not what the daemon keeps.
    with memory_cgroup(d.proc.pid, 512 << 20) as peak:
        sent = send_as(d, user, "io.lockwipe.Manager.OfflineCodeEnter", {"code": HUGE}, count)
        assert sent["sent"] == count and not sent["closed"], sent
        assert d.running(), d.log_tail()
        r = d.ok("history", "--json", "--user", user.name)
        assert d.running(), d.log_tail()
        if peak is not None:
            used = peak()
            print(f"lockwiped's peak memory in its cgroup over {count} refusals of 60 KB and a history: {used / 2**20:.1f} MiB")
            assert used < 128 << 20, f"lockwiped peaked at {used / 2**20:.1f} MiB for {count} refused codes"

    # 1,500 x 60 KB were sent; what is stored must not grow with what she typed.
    grown = state_bytes(d) - before
    assert grown < 4 << 20, f"the state database grew by {grown} bytes for {count} refused codes"

    for reply in sent["replies"]:
        assert reply.get("error") == "org.varlink.service.InvalidParameter", str(reply)[:500]
        reason = json.dumps(reply)
        # The offending character is named by its code point, and the reply stays short.
        assert "U+0301" in reason and len(reason) < 2_000, reason[:500]

    # Her refusals are one event (per hour) with a count, and the CLI still answers.
    r = d.ok("history", "--json", "--user", user.name)
    assert len(r.out) < 1 << 20, f"the history reply is {len(r.out)} bytes"
    events = json.loads(r.out)["events"]
    refused = [e for e in events if e["kind"] == "offline-code-refused"]
    assert 1 <= len(refused) <= 2, [(e["time"], e.get("repeats"), e["detail"][:200]) for e in refused]
    assert sum(e.get("repeats", 1) for e in refused) == count, refused
    assert all(len(e["detail"]) < 1_000 and "U+0301" in e["detail"] for e in refused), refused
    r = d.ok("history", "--user", user.name)
    assert "offline-code-refused" in r.out and len(r.out) < 1 << 20, r.describe()[:2000]
    assert d.running(), d.log_tail()

    # The journal has the run's first ten and every hundredth: one user refusing herself
    # codes cannot push lockwiped past journald's rate limit and silence everyone's audit.
    logged = d.log_lines("MESSAGE_ID=3cc3f7123d074828a313f128b6417438", f"LOCKWIPE_USER={user.name}")
    assert 10 + count // 100 - 1 <= len(logged) <= 10 + count // 100, len(logged)


def test_an_eszett_is_refused_in_words_by_lockwipectl_and_lockwiped(make_daemon, make_user):
    d = make_daemon(config=config_text())
    user = setup(d, make_user)

    for code, named in (("ß2345-6789A", "U+00DF"), ("ﬀ", "U+FB00"), ("A\u0301BCDE-FGHJK", "U+0301")):
        # lockwipectl reads the code first, and says what does not read.
        r = d.ctl("offline-code", "enter", code, user=user)
        assert r.code == 2 and named in r.err and "does not read" in r.err, r.describe()
        # lockwiped reads it too, for a client that does not.
        sent = send_as(d, user, "io.lockwipe.Manager.OfflineCodeEnter", {"code": code}, 1)
        assert not sent["closed"], sent
        reply = sent["replies"][0]
        assert reply.get("error") == "org.varlink.service.InvalidParameter" and named in json.dumps(reply), reply
        assert d.running(), "lockwiped ended on a code with " + named + "\n" + d.log_tail()
    # An ASCII character outside the alphabet is shown as itself.
    r = d.ctl("offline-code", "enter", "0ZZZZ-ZZZZZ", user=user)
    assert r.code == 2 and "'0' (character 1)" in r.err and "no 0, 1, O, I or L" in r.err, r.describe()
