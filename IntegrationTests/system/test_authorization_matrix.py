"""Every method of the control socket × every kind of caller: what is allowed, what is
refused (NotPermitted), what is hidden (another user's registration is reported as not
existing), and that every refusal is logged with the peer's uid and pid.

Callers: root; a member of the admin group; the registered user themselves; another
user; and a user who was a member of the configured admin group after that group was
deleted (a configured group that does not exist grants nothing).
"""

import json
import re
import subprocess
import textwrap

import pytest

from daemon_harness import config_text
from host_helpers import run_as

OK, DENIED, HIDDEN = "ok", "denied", "hidden"
CALLERS = ("root", "admin", "self", "other", "ghost")

# method, parameters (with {user}, {vault}, {new}, {newvault}), expected per caller.
# Calls that change state are followed by one that restores it (run as root).
MATRIX = [
    ("org.varlink.service.GetInfo", {}, dict.fromkeys(CALLERS, OK)),
    ("org.varlink.service.GetInterfaceDescription", {"interface": "io.lockwipe.Manager"},
     dict.fromkeys(CALLERS, OK)),
    ("io.lockwipe.Manager.GetPolicy", {}, dict.fromkeys(CALLERS, OK)),
    ("io.lockwipe.Manager.GetStatus", {"user": "{user}"},
     dict(root=OK, admin=OK, self=OK, other=HIDDEN, ghost=HIDDEN)),
    ("io.lockwipe.Manager.GetHistory", {"user": "{user}"},
     dict(root=OK, admin=OK, self=OK, other=DENIED, ghost=DENIED)),
    # No wipe yet: an allowed caller is told there is no certificate (NoSuchCertificate).
    ("io.lockwipe.Manager.GetCertificate", {"user": "{user}"},
     dict(root=OK, admin=OK, self=OK, other=DENIED, ghost=DENIED)),
    ("io.lockwipe.Manager.CheckIn", {"user": "{user}"},
     dict(root=OK, admin=OK, self=OK, other=DENIED, ghost=DENIED)),
    # No user: every registration for administrators, her own for a user (none: denied).
    ("io.lockwipe.Manager.CheckIn", {},
     dict(root=OK, admin=OK, self=OK, other=DENIED, ghost=DENIED)),
    ("io.lockwipe.Manager.Lock", {"user": "{user}"},
     dict(root=OK, admin=OK, self=OK, other=DENIED, ghost=DENIED)),
    ("io.lockwipe.Manager.Lock", {"all": True},
     dict(root=OK, admin=OK, self=DENIED, other=DENIED, ghost=DENIED)),
    # No user: a user's own registration (an administrator must name one or all).
    ("io.lockwipe.Manager.Lock", {},
     dict(root="error org.varlink.service.InvalidParameter", admin="error org.varlink.service.InvalidParameter",
          self=OK, other=DENIED, ghost=DENIED)),
    # What a lock would end: whoever may lock.
    ("io.lockwipe.Manager.Lock", {"user": "{user}", "preview": True},
     dict(root=OK, admin=OK, self=OK, other=DENIED, ghost=DENIED)),
    # A permission lock: only administrators lift it (encrypted vaults: test_vault.py).
    ("io.lockwipe.Manager.Unlock", {"user": "{user}"},
     dict(root=OK, admin=OK, self=DENIED, other=DENIED, ghost=DENIED)),
    # Allowed for the user themselves; on this permission vault the Manager then says
    # there is no passcode to set (ActionFailed), which counts as allowed here.
    ("io.lockwipe.Manager.SetPasscode", {"user": "{user}", "new": "Correct-Horse-9"},
     dict(root=OK, admin=OK, self=OK, other=DENIED, ghost=DENIED)),
    ("io.lockwipe.Manager.SetCredentials", {"user": "{user}", "token": "t0ken"},
     dict(root=OK, admin=OK, self=DENIED, other=DENIED, ghost=DENIED)),
    ("io.lockwipe.Manager.Register", {"user": "{new}", "directories": ["{newvault}"]},
     dict(root=OK, admin=OK, self=DENIED, other=DENIED, ghost=DENIED)),
    ("io.lockwipe.Manager.Unregister", {"user": "{user}"},
     dict(root=OK, admin=OK, self=DENIED, other=DENIED, ghost=DENIED)),
    # A user may survey her own vault whatever its protection (a permission vault here,
    # which only administrators may wipe).
    ("io.lockwipe.Manager.PreviewWipe", {"user": "{user}"},
     dict(root=OK, admin=OK, self=OK, other=DENIED, ghost=DENIED)),
    ("io.lockwipe.Manager.PreviewWipe", {"all": True},
     dict(root=OK, admin=OK, self=DENIED, other=DENIED, ghost=DENIED)),
    ("io.lockwipe.Manager.Wipe", {"user": "{user}"},
     dict(root=OK, admin=OK, self=DENIED, other=DENIED, ghost=DENIED)),
    ("io.lockwipe.Manager.Wipe", {"all": True},
     dict(root=OK, admin=OK, self=DENIED, other=DENIED, ghost=DENIED)),
    # Offline codes (not provisioned here: an allowed challenge fails with ActionFailed;
    # an allowed code finds no outstanding challenge, ActionFailed too).
    ("io.lockwipe.Manager.OfflineCodeChallenge", {"user": "{user}"},
     dict(root=OK, admin=OK, self=OK, other=DENIED, ghost=DENIED)),
    ("io.lockwipe.Manager.OfflineCodeEnter", {"user": "{user}", "code": "22222-22222"},
     dict(root=OK, admin=OK, self=OK, other=DENIED, ghost=DENIED)),
    # Allowed for administrators, who are then told the key is not for this machine.
    ("io.lockwipe.Manager.ProvisionOfflineCodes", {"machine": "0000000000", "machine_key": "00" * 32},
     dict(root="error org.varlink.service.InvalidParameter", admin="error org.varlink.service.InvalidParameter",
          self=DENIED, other=DENIED, ghost=DENIED)),
    # The PAM auth stack's password (issue 29): root only, not the admin group, since the
    # password is tried as a passcode without counting (here a uid with no registration).
    ("io.lockwipe.Manager.LiftAtLogin", {"uid": 65534, "password": "not-checked"},
     dict(root=OK, admin=DENIED, self=DENIED, other=DENIED, ghost=DENIED)),
    # The organisation's recovery key (issue 43): administrators only, her own vault too.
    # Allowed, this permission vault has no recovery wrap (listed as missing), and a key
    # for a registration id that is not the user's is refused (ActionFailed).
    ("io.lockwipe.Manager.GetRecoveryWraps", {"user": "{user}"},
     dict(root=OK, admin=OK, self=DENIED, other=DENIED, ghost=DENIED)),
    ("io.lockwipe.Manager.Recover", {"user": "{user}", "registration_id": "00", "key": "AAAA"},
     dict(root=OK, admin=OK, self=DENIED, other=DENIED, ghost=DENIED)),
]

CLIENT = textwrap.dedent("""
    import json, socket, sys, os
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(60)
    s.connect(sys.argv[1])
    s.sendall(sys.argv[2].encode() + b"\\0")
    buf = b""
    while b"\\0" not in buf:
        chunk = s.recv(65536)
        if not chunk:
            break
        buf += chunk
    print(json.dumps({"pid": os.getpid(), "reply": json.loads(buf.partition(b"\\0")[0] or b"null")}))
""")


def fill(value, names):
    if isinstance(value, str):
        return value.format(**names)
    if isinstance(value, list):
        return [fill(v, names) for v in value]
    if isinstance(value, dict):
        return {k: fill(v, names) for k, v in value.items()}
    return value


def outcome(reply):
    if reply is None:
        return "closed"
    error = reply.get("error")
    if error is None:
        return OK
    if error == "io.lockwipe.Manager.NotPermitted":
        return DENIED
    if error == "io.lockwipe.Manager.NoSuchRegistration":
        return HIDDEN
    if error == "io.lockwipe.Manager.NoSuchCertificate":
        return OK  # allowed; there is nothing to show yet
    if error == "io.lockwipe.Manager.ActionFailed":
        return OK  # allowed; the action itself failed (e.g. CheckIn with no server configured)
    if error == "org.varlink.service.InvalidParameter":
        return f"error {error}"
    return f"error {error}: {reply.get('parameters')}"


@pytest.fixture
def world(make_daemon, make_user, make_group):
    admins = make_group()
    doomed = make_group()
    people = {
        "admin": make_user(groups=[admins]),
        "self": make_user(),
        "other": make_user(),
        "ghost": make_user(groups=[doomed]),
    }
    subprocess.run(["groupdel", doomed], check=True, capture_output=True)
    d = make_daemon(config=config_text(admin_group=admins))
    script = d.root / "client.py"
    script.write_text(CLIENT)
    script.chmod(0o644)
    return d, people, script, make_user


def test_the_matrix_covers_every_method_of_the_interface(daemon):
    r = daemon.ctl("status")  # the daemon is up
    client = daemon.root / "describe.py"
    client.write_text(CLIENT)
    call = {"method": "org.varlink.service.GetInterfaceDescription", "parameters": {"interface": "io.lockwipe.Manager"}}
    out = run_as(None, ["/usr/bin/python3", str(client), str(daemon.socket), json.dumps(call)])
    text = json.loads(out.stdout)["reply"]["parameters"]["description"]
    methods = {"io.lockwipe.Manager." + m for m in re.findall(r"^method (\w+)\(", text, re.M)}
    covered = {m for m, _, _ in MATRIX}
    assert methods and methods <= covered, f"methods without a row in MATRIX: {sorted(methods - covered)}"


def test_every_method_for_every_kind_of_caller(world):
    d, people, script, make_user = world
    me = people["self"]
    vault = d.make_vault(me, "self-vault")
    d.ok("register", "--user", me.name, "--dir", vault)
    results = {}
    for index, (method, params, expected) in enumerate(MATRIX):
        for caller in CALLERS:
            new = make_user() if method.endswith(".Register") else None
            names = {"user": me.name, "vault": str(vault),
                     "new": new.name if new else "", "newvault": str(d.data / f"new-{index}-{caller}")}
            if new:
                d.make_vault(new, f"new-{index}-{caller}")
            call = {"method": method, "parameters": fill(params, names)}
            if method.endswith(".Unlock"):
                d.ok("lock", "--user", me.name)  # something to unlock
            who = None if caller == "root" else people[caller]
            since = len(d.log().splitlines())
            r = run_as(who, ["/usr/bin/python3", str(script), str(d.socket), json.dumps(call)], timeout=90)
            assert r.returncode == 0, f"{caller} {method}: the client failed: {r.stderr}"
            answer = json.loads(r.stdout)
            got = outcome(answer["reply"])
            results[(method, json.dumps(params), caller)] = got
            want = expected[caller]
            assert got == want, f"{method} {params} as {caller}: expected {want}, got {got}: {answer['reply']}"
            if got == DENIED:
                lines = [l for l in d.log().splitlines()[since:]
                         if re.search(rf"\bLOCKWIPE_PEER_UID={who.uid}\b", l)
                         and re.search(rf"\bLOCKWIPE_PEER_PID={answer['pid']}\b", l)]
                assert lines, f"the refusal of {method} for {caller} was not logged with peer uid and pid"
            restore(d, method, me, vault, new)
    print("\n" + "\n".join(f"  {m} {p} {c}: {o}" for (m, p, c), o in results.items()))


def restore(d, method, me, vault, new):
    """Puts the registration back as it was before a call that succeeded."""
    state = d.state_of(me)
    if method.endswith((".Wipe", ".Unregister")) or state in ("wiped", "wipe-pending"):
        if d.registration(me) is not None:
            d.ok("unregister", "--user", me.name)
        if not vault.exists():
            vault.mkdir()
        d.ok("register", "--user", me.name, "--dir", vault)
    elif state == "locked":
        d.ok("unlock", "--user", me.name)
    if new is not None and d.registration(new) is not None:
        d.ok("unregister", "--user", new.name)
