"""A lock by the policy server or the offline policy is lifted by its user, not by the
network (issue 29, point 1): a contact makes it *liftable* ([lock] lift_after_contact =
"at-login", the default), and her next password login through PAM lifts it.

The login is a real PAM transaction: libpam's pam_start_confdir (Linux-PAM >= 1.4) with a
service file in the test's own temporary directory, shaped as Debian's common-auth with
the lockwipe profile enabled: pam_unix as the primary module, then the lines of the
shipped profile (packaging/pam-configs/lockwipe) as pam-auth-update adds them, pointed at
the built lockwipectl and the test's daemon (pam_lockwipe.so, compiled from
packaging/pam/pam_lockwipe.c into a temporary directory, as the Additional auth module
and as the login gate of the account stack), driven through a conversation in ctypes. The
throwaway users get passwords with chpasswd and are removed afterwards (make_user).
"""

import ctypes
import ctypes.util
import os
import shutil
import subprocess

import pytest

from daemon_harness import config_text, server_config
from host_helpers import REPO, can_list, fmt_owner, owner_of, wait_until
from test_vault import encrypted_fs, put_files, register_encrypted, set_passcode

ID_LIFTED_AT_LOGIN = "d197bcd72b20435092c745e4ee7c5ffd"
ID_LOCK_LIFTABLE = "2f5afe7a15e544cbb068d5de8094d6c6"
LOGIN_PASSWORD = "Login-Pass-42"

# --------------------------------------------------------------------------- PAM through ctypes

PAM_SUCCESS = 0
PAM_PROMPT_ECHO_OFF, PAM_PROMPT_ECHO_ON = 1, 2


class PamMessage(ctypes.Structure):
    _fields_ = [("msg_style", ctypes.c_int), ("msg", ctypes.c_char_p)]


class PamResponse(ctypes.Structure):
    _fields_ = [("resp", ctypes.c_void_p), ("resp_retcode", ctypes.c_int)]


CONV = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int, ctypes.POINTER(ctypes.POINTER(PamMessage)),
                        ctypes.POINTER(ctypes.POINTER(PamResponse)), ctypes.c_void_p)


class PamConv(ctypes.Structure):
    _fields_ = [("conv", CONV), ("appdata_ptr", ctypes.c_void_p)]


def libpam():
    path = ctypes.util.find_library("pam")
    if path is None:
        pytest.skip("libpam is not installed")
    lib = ctypes.CDLL(path)
    if not hasattr(lib, "pam_start_confdir"):
        pytest.skip("libpam has no pam_start_confdir (Linux-PAM < 1.4)")
    lib.pam_start_confdir.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.POINTER(PamConv), ctypes.c_char_p,
                                      ctypes.POINTER(ctypes.c_void_p)]
    for name in ("pam_authenticate", "pam_acct_mgmt"):
        getattr(lib, name).argtypes = [ctypes.c_void_p, ctypes.c_int]
    lib.pam_end.argtypes = [ctypes.c_void_p, ctypes.c_int]
    return lib


LIBC = ctypes.CDLL(None)
LIBC.calloc.restype = ctypes.c_void_p
LIBC.calloc.argtypes = [ctypes.c_size_t, ctypes.c_size_t]
LIBC.strdup.restype = ctypes.c_void_p
LIBC.strdup.argtypes = [ctypes.c_char_p]


def pam_login(confdir, user, password, prompts=None):
    """One login as login(1) makes it: authenticate, then the account stack. Returns
    (auth result, account result or None when auth failed). Every question the stacks
    ask (a prompt, not a notice) goes into `prompts` as (style, text)."""
    lib = libpam()

    def conversation(n, messages, responses, _):
        array = LIBC.calloc(n, ctypes.sizeof(PamResponse))
        answers = ctypes.cast(array, ctypes.POINTER(PamResponse))
        for i in range(n):
            if messages[i].contents.msg_style in (PAM_PROMPT_ECHO_OFF, PAM_PROMPT_ECHO_ON):
                if prompts is not None:
                    prompts.append((messages[i].contents.msg_style, (messages[i].contents.msg or b"").decode()))
                answers[i].resp = LIBC.strdup(password.encode())
        responses[0] = answers
        return PAM_SUCCESS

    conv = PamConv(CONV(conversation), None)
    handle = ctypes.c_void_p()
    rc = lib.pam_start_confdir(b"lockwipe-test", user.name.encode(), ctypes.byref(conv), str(confdir).encode(),
                               ctypes.byref(handle))
    assert rc == PAM_SUCCESS, f"pam_start_confdir: {rc}"
    try:
        auth = lib.pam_authenticate(handle, 0)
        account = lib.pam_acct_mgmt(handle, 0) if auth == PAM_SUCCESS else None
        return auth, account
    finally:
        lib.pam_end(handle, PAM_SUCCESS)


PROFILE = REPO / "packaging" / "pam-configs" / "lockwipe"
MODULE_SOURCE = REPO / "packaging" / "pam" / "pam_lockwipe.c"


@pytest.fixture(scope="module")
def pam_module(tmp_path_factory):
    """pam_lockwipe.so, compiled as the package build does (with the warnings errors)."""
    cc = shutil.which("gcc") or shutil.which("cc")
    assert cc, "no C compiler: scripts/install-deps --for test installs gcc and libpam0g-dev"
    out = tmp_path_factory.mktemp("pam-module") / "pam_lockwipe.so"
    r = subprocess.run([cc, "-Wall", "-Wextra", "-Werror", "-O2", "-fPIC", "-shared", "-o", str(out),
                        str(MODULE_SOURCE), "-lpam"], capture_output=True, text=True)
    assert r.returncode == 0, \
        f"{MODULE_SOURCE} does not compile (scripts/install-deps --for test installs libpam0g-dev):\n{r.stderr}"
    return out


def profile_lines(section):
    """(control, module and arguments) of each line of the shipped profile's section."""
    lines, current = [], None
    for line in PROFILE.read_text().splitlines():
        if line.strip() and not line[0].isspace():
            current = line.split(":", 1)[0]
        elif line.strip() and current == section:
            control, module = line.split(None, 1)
            lines.append((control, module))
    assert lines, f"{PROFILE} has no {section} lines"
    return lines


def pam_service(d, tmp_path, pam_module):
    """Debian's common-auth and common-account with the lockwipe profile enabled
    (pam-auth-update): the profile's lines as shipped, pointed at the built lockwipectl
    and the test's daemon. The Additional auth module runs only after pam_unix accepted
    the login."""
    def here(module):
        if module.split()[0] == "pam_lockwipe.so":
            return f"{pam_module}{module[len('pam_lockwipe.so'):]} lockwipectl={d.bins.lockwipectl} socket={d.socket}"
        local = module.replace("/usr/bin/lockwipectl", f"{d.bins.lockwipectl} --socket {d.socket}")
        assert local != module, f"{PROFILE}: a line with neither pam_lockwipe.so nor /usr/bin/lockwipectl: {module}"
        return local

    confdir = tmp_path / "pam.d"
    confdir.mkdir()
    (confdir / "lockwipe-test").write_text(
        "auth\t[success=1 default=ignore]\tpam_unix.so nullok\n"
        "auth\trequisite\tpam_deny.so\n"
        "auth\trequired\tpam_permit.so\n"
        + "".join(f"auth\t{control}\t{here(module)}\n" for control, module in profile_lines("Auth"))
        + "account\trequired\tpam_unix.so\n"
        + "".join(f"account\t{control}\t{here(module)}\n" for control, module in profile_lines("Account")))
    return confdir


def with_password(make_user, password=LOGIN_PASSWORD):
    user = make_user()
    subprocess.run(["chpasswd"], input=f"{user.name}:{password}\n", text=True, check=True, capture_output=True)
    return user


def served(make_daemon, srv, extra="", lift_after_contact=None):
    return make_daemon(config=config_text(extra=server_config(srv.url) + extra, lift_after_contact=lift_after_contact))


def server_locked(d, srv, user, vault=None):
    """Registered, then locked by the server (403 TRAFFIC_REG_LOCKED)."""
    if vault is None:
        user.vault = d.make_vault(user, f"vault-{user.name}")
        d.ok("register", "--user", user.name, "--dir", user.vault)
    srv.set(user, mode="lock")
    d.ok("check-in", "--user", user.name)
    reg = d.registration(user)
    assert reg["state"] == "locked" and reg["lock_trigger"] == "server", reg
    return reg


# --------------------------------------------------------------------------- tests


def test_a_contact_makes_a_server_lock_liftable_and_only_a_login_lifts_it(make_daemon, make_server, make_user, tmp_path,
                                                                          pam_module):
    srv = make_server()
    srv.set("*", mode="ok")
    d = served(make_daemon, srv)
    confdir = pam_service(d, tmp_path, pam_module)
    user = with_password(make_user)
    server_locked(d, srv, user)

    # A login before any contact: the password is right, the lock stays, the gate refuses.
    auth, account = pam_login(confdir, user, LOGIN_PASSWORD)
    assert auth == PAM_SUCCESS, f"pam_authenticate: {auth}"
    assert account != PAM_SUCCESS, "the login gate let a server lock that is not liftable through"
    reg = d.registration(user)
    assert reg["state"] == "locked" and reg["lock_liftable"] is False, reg
    assert "lifted at" in reg["lock_waits_for"] and "first login after a contact" in reg["lock_waits_for"], reg

    # The contact alone does not give the data back.
    srv.set(user, mode="ok")
    r = d.ok("check-in", "--user", user.name)
    assert "lock liftable" in r.out, r.describe()
    reg = d.registration(user)
    assert reg["state"] == "locked" and reg["lock_trigger"] == "server" and reg["lock_liftable"] is True, reg
    assert owner_of(user.vault) == (0, 0, 0), fmt_owner(owner_of(user.vault))
    assert not can_list(user, user.vault)
    assert d.log_lines(f"MESSAGE_ID={ID_LOCK_LIFTABLE}", f"LOCKWIPE_USER={user.name}"), d.log_tail()
    assert [e for e in d.history(user) if e["kind"] == "lock-liftable"], d.history(user)
    human = d.ok("status").out
    assert f"{user.name}: lock liftable: the policy server allows it: lifted at {user.name}'s next login" in human, human
    # A second contact changes nothing more.
    d.ok("check-in", "--user", user.name)
    assert d.registration(user)["state"] == "locked"

    # A wrong password: PAM refuses the login, and nothing is lifted.
    auth, _ = pam_login(confdir, user, "not-the-password")
    assert auth != PAM_SUCCESS
    assert d.registration(user)["state"] == "locked"

    # Her login lifts it.
    auth, account = pam_login(confdir, user, LOGIN_PASSWORD)
    assert auth == PAM_SUCCESS and account == PAM_SUCCESS, (auth, account)
    reg = d.registration(user)
    assert reg["state"] == "active" and "lock_liftable" not in reg and "lock_waits_for" not in reg, reg
    assert owner_of(user.vault) == (user.uid, user.gid, 0o750), fmt_owner(owner_of(user.vault))
    unlocks = [e for e in d.history(user) if e["kind"] == "unlock"]
    assert unlocks and unlocks[-1]["trigger"] == "user" and "login" in unlocks[-1]["detail"], unlocks
    assert d.log_lines(f"MESSAGE_ID={ID_LIFTED_AT_LOGIN}", f"LOCKWIPE_USER={user.name}"), d.log_tail()

    # A new lock is not liftable by the old contact.
    srv.set(user, mode="lock")
    d.ok("check-in", "--user", user.name)
    srv.set(user, mode="ok")
    auth, _ = pam_login(confdir, user, LOGIN_PASSWORD)
    reg = d.registration(user)
    assert reg["state"] == "locked" and reg["lock_liftable"] is False, reg


def test_only_root_may_hand_a_login_password_on(make_daemon, make_server, make_user):
    srv = make_server()
    srv.set("*", mode="ok")
    d = served(make_daemon, srv)
    user = with_password(make_user)
    server_locked(d, srv, user)
    srv.set(user, mode="ok")
    d.ok("check-in", "--user", user.name)
    # pam-auth as the user herself: refused by the daemon, the login never is (exit 0).
    r = d.ctl("pam-auth", "--user", user.name, input=LOGIN_PASSWORD + "\0", user=user)
    assert r.code == 0, r.describe()
    assert "only root may hand a login password" in r.err, r.describe()
    assert d.registration(user)["state"] == "locked"


def test_lift_after_contact_immediately_keeps_the_old_behaviour(make_daemon, make_server, make_user):
    srv = make_server()
    srv.set("*", mode="ok")
    d = served(make_daemon, srv, lift_after_contact="immediately")
    user = make_user()
    server_locked(d, srv, user)
    reg = d.registration(user)
    assert "lifted at the next contact with the policy server" in reg["lock_waits_for"], reg
    srv.set(user, mode="ok")
    d.ok("check-in", "--user", user.name)
    assert d.state_of(user) == "active", d.registration(user)
    assert owner_of(user.vault) == (user.uid, user.gid, 0o750)


def test_a_login_password_that_is_not_the_passcode_never_counts_toward_retry_limit(make_daemon, make_server, make_user,
                                                                                 tmp_path, pam_module):
    srv = make_server()
    srv.set("*", mode="ok")
    # One wrong passcode would wipe the vault: a login that counted would show at once.
    d = served(make_daemon, srv, extra="\n[passcode]\nretry_limit = 1\n")
    confdir = pam_service(d, tmp_path, pam_module)
    other = with_password(make_user)  # her vault's passcode is her login password
    user = with_password(make_user)  # her vault's passcode is not
    with encrypted_fs(d) as fs:
        vaults = {}
        for u, passcode in ((user, "Vault-Passcode-7"), (other, LOGIN_PASSWORD)):
            vaults[u.name] = fs / f"v-{u.name}"
            register_encrypted(d, u, vaults[u.name])
            set_passcode(d, u, passcode)
            u.files = put_files(u, vaults[u.name])
            server_locked(d, srv, u, vault=vaults[u.name])
            srv.set(u, mode="ok")
            d.ok("check-in", "--user", u.name)
            assert d.registration(u)["lock_liftable"] is True, d.registration(u)

        for _ in range(3):
            auth, _ = pam_login(confdir, user, LOGIN_PASSWORD)
            assert auth == PAM_SUCCESS
        reg = d.registration(user)
        # The server's lock is handed back to her passcode; nothing was counted.
        assert reg["state"] == "locked" and reg["lock_trigger"] == "user", reg
        assert reg["failed_unlocks"] == 0, reg
        assert not [e for e in d.history(user) if e["kind"] in ("unlock-failed", "wipe", "key-destroyed")], d.history(user)
        lifted = [e for e in d.history(user) if e["kind"] == "lock-lifted"]
        assert lifted and "not the vault passcode" in lifted[-1]["detail"], lifted
        # Her passcode opens it.
        r = d.ctl("unlock", "--user", user.name, "--passcode-stdin", input="Vault-Passcode-7\n", user=user)
        assert r.code == 0, r.describe()
        for rel, content in user.files.items():
            assert (vaults[user.name] / rel).read_bytes() == content

        # The login password is the other user's passcode: her login opens the vault.
        auth, account = pam_login(confdir, other, LOGIN_PASSWORD)
        assert auth == PAM_SUCCESS and account == PAM_SUCCESS, (auth, account)
        assert d.state_of(other) == "active", d.registration(other)
        for rel, content in other.files.items():
            assert (vaults[other.name] / rel).read_bytes() == content


def test_the_users_passcode_lifts_a_liftable_lock(make_daemon, make_server, make_user):
    """The user's unlock asks for a check-in only while the lock is not liftable."""
    srv = make_server()
    srv.set("*", mode="ok")
    d = served(make_daemon, srv)
    user = make_user()
    with encrypted_fs(d) as fs:
        vault = fs / "v"
        register_encrypted(d, user, vault)
        set_passcode(d, user, "Vault-Passcode-7")
        server_locked(d, srv, user, vault=vault)
        srv.set(user, mode="ok")
        # The contact leaves the server's lock in place, liftable.
        d.ok("check-in", "--user", user.name)
        reg = d.registration(user)
        assert reg["state"] == "locked" and reg["lock_trigger"] == "server" and reg["lock_liftable"] is True, reg
        # Her passcode lifts it.
        r = d.ctl("unlock", "--user", user.name, "--passcode-stdin", input="Vault-Passcode-7\n", user=user)
        assert r.code == 0, r.describe()
        assert d.state_of(user) == "active", d.registration(user)


def test_a_server_that_says_locked_again_takes_the_liftable_back(make_daemon, make_server, make_user, tmp_path,
                                                                 pam_module):
    srv = make_server()
    srv.set("*", mode="ok")
    d = served(make_daemon, srv)
    confdir = pam_service(d, tmp_path, pam_module)
    user = with_password(make_user)
    server_locked(d, srv, user)
    srv.set(user, mode="ok")
    d.ok("check-in", "--user", user.name)
    assert d.registration(user)["lock_liftable"] is True
    # The settings now say the registration stays locked: the login lifts nothing.
    srv.set(user, mode="ok", settings={"registration": {"locked": True}})
    d.ok("check-in", "--user", user.name)
    assert d.registration(user)["lock_liftable"] is False, d.registration(user)
    auth, _ = pam_login(confdir, user, LOGIN_PASSWORD)
    assert auth == PAM_SUCCESS
    assert d.state_of(user) == "locked", d.registration(user)


def test_a_login_without_a_password_is_asked_for_none_and_hands_none_on(make_daemon, make_server, make_user, tmp_path,
                                                                        pam_module):
    """Issue 40, finding 7: the primary module lets her in without a password (nullok and
    an empty password here; a fingerprint or a smartcard alike). The profile's auth module
    has no password to hand on, so it must not ask for one, which nobody would check, nor
    lift her lock with whatever she typed."""
    srv = make_server()
    srv.set("*", mode="ok")
    d = served(make_daemon, srv)
    confdir = pam_service(d, tmp_path, pam_module)
    user = make_user()
    subprocess.run(["passwd", "-d", user.name], check=True, capture_output=True)
    server_locked(d, srv, user)
    srv.set(user, mode="ok")
    d.ok("check-in", "--user", user.name)
    assert d.registration(user)["lock_liftable"] is True, d.registration(user)

    prompts = []
    auth, _ = pam_login(confdir, user, "typed-at-a-prompt", prompts=prompts)
    assert auth == PAM_SUCCESS, f"pam_authenticate: {auth}"
    assert prompts == [], f"a login that needed no password was asked {prompts}"
    reg = d.registration(user)
    assert reg["state"] == "locked" and reg["lock_liftable"] is True, f"a password nobody checked lifted it: {reg}"
    assert not [e for e in d.history(user) if e["kind"] == "unlock"], d.history(user)

    # With a password, the same stack asks once (pam_unix) and hands it on: the lock is lifted.
    subprocess.run(["chpasswd"], input=f"{user.name}:{LOGIN_PASSWORD}\n", text=True, check=True, capture_output=True)
    prompts = []
    auth, account = pam_login(confdir, user, LOGIN_PASSWORD, prompts=prompts)
    assert auth == PAM_SUCCESS and account == PAM_SUCCESS, (auth, account)
    assert len(prompts) == 1, prompts
    assert d.state_of(user) == "active", d.registration(user)
