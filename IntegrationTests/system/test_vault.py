"""Encrypted vaults (issue 6) on a real fscrypt filesystem.

Each test makes an ext4 image with `mkfs.ext4 -O encrypt`, loop-mounts it inside the
test daemon's temporary directory and unmounts it afterwards (also when the test fails;
the kernel drops every key of a filesystem when it is unmounted). Tests skip, saying
why, only where this machine cannot: not root, or a kernel without ext4 encryption.

The vault key is never exposed by the daemon. To prove a crypto-erase leaves no copy,
the test reads the wrapped key from the state database before the wipe and unwraps it
itself with the passcode it chose (scrypt + AES-256-GCM, as KeyWrap.swift does), then
searches the raw database and WAL files for those 64 bytes and for the sealed blob.
"""

import base64
import contextlib
import errno
import hashlib
import json
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import time

import pytest
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from daemon_harness import config_text, server_config
from host_helpers import fingerprint, loop_filesystem, run_as, wait_until

PASS = "Correct-Horse-7"
PASS2 = "Battery-Staple-9"


def fscrypt_unavailable():
    if os.geteuid() != 0:
        return "needs root to loop-mount an ext4 image"
    if not os.path.exists("/sys/fs/ext4/features/encryption"):
        return "this kernel's ext4 has no encryption (/sys/fs/ext4/features/encryption is missing)"
    if shutil.which("mkfs.ext4") is None:
        return "mkfs.ext4 (e2fsprogs) is not installed"
    return None


@contextlib.contextmanager
def encrypted_fs(daemon, size="256M"):
    """An ext4 -O encrypt filesystem mounted at <daemon root>/enc (mode 0755)."""
    why = fscrypt_unavailable()
    if why:
        print(f"test_vault skipped: {why}")
        pytest.skip(why)
    with loop_filesystem(daemon.root, "enc", ["mkfs.ext4", "-q", "-F", "-N", "100000", "-O", "encrypt"], size) as mnt:
        yield mnt


def register_encrypted(daemon, user, vault, *extra):
    r = daemon.ok("register", "--user", user.name, "--dir", str(vault), "--require-encryption", *extra)
    assert "protection: encrypted" in r.out, r.describe()
    reg = daemon.registration(user)
    assert reg["protection"] == "encrypted", reg
    return reg


def set_passcode(daemon, user, passcode=PASS, as_user=True):
    return daemon.ok("passcode", "set", "--user", user.name, "--passcode-stdin", input=passcode + "\n",
                     user=user if as_user else None)


def put_files(user, vault):
    """Files written by the user, through the kernel with the key present."""
    files = {
        "notes.txt": b"field notes: pump 7 leaks\n" * 50,
        "sub/report.bin": hashlib.sha256(b"seed").digest() * 4096,
    }
    script = "set -e; mkdir -p sub; printf 'field notes: pump 7 leaks\\n%.0s' $(seq 50) > notes.txt; " \
             "python3 -c \"import hashlib,sys; sys.stdout.buffer.write(hashlib.sha256(b'seed').digest()*4096)\" > sub/report.bin"
    r = run_as(user, ["sh", "-c", f"cd '{vault}' && {script}"])
    assert r.returncode == 0, r.stderr
    for rel, content in files.items():
        with open(vault / rel, "rb") as f:
            assert f.read() == content
    return files


def wrapped_key_row(daemon, user):
    """(wrapping, salt, log2 N, r, p, sealed, key identifier, failed attempts) of the
    user's vault key: the row in the state database, the wrapped key from the key file it
    names (in keys/; before v6-key-files, from the row itself)."""
    con = sqlite3.connect(f"file:{daemon.state_dir / 'state.sqlite'}?mode=ro", uri=True)
    try:
        columns = {c[1] for c in con.execute("PRAGMA table_info(vault_keys)")}
        row = con.execute(
            "SELECT wrapping, salt, scrypt_log_n, scrypt_r, scrypt_p, sealed, key_identifier, failed_attempts"
            + (", key_file" if "key_file" in columns else ", NULL")
            + " FROM vault_keys WHERE user = ?", (user.name,)).fetchone()
    finally:
        con.close()
    if row is None or row[8] is None:
        return None if row is None else row[:8] + (None,)
    return key_file_row(daemon, row[8], row[6], row[7], registration_id(daemon, user))


def registration_id(daemon, user):
    con = sqlite3.connect(f"file:{daemon.state_dir / 'state.sqlite'}?mode=ro", uri=True)
    try:
        if "id" not in {c[1] for c in con.execute("PRAGMA table_info(registrations)")}:
            return None
        row = con.execute("SELECT id FROM registrations WHERE user = ?", (user.name,)).fetchone()
        return row and row[0]
    finally:
        con.close()


def key_file_row(daemon, name, identifier=None, failed=None, registration=None):
    """As wrapped_key_row, from a key file, with two more elements: the AES-GCM associated
    data of the wrap (format 2 and later: the registration id; None before), and for a
    passcode wrap of format 3 the machine key it also needs (None otherwise)."""
    wrapped = json.loads((daemon.state_dir / "keys" / name).read_text())
    scrypt = wrapped.get("scrypt") or {}
    aad = None
    if (wrapped.get("format") or 1) >= 2:
        assert registration, "a wrap bound to a registration id, and the registration has none"
        aad = b"lockwipe vault key\0" + registration.encode()
    machine_key = daemon.machine_key() if wrapped["wrapping"] == "passcode" and (wrapped.get("format") or 1) >= 3 else None
    return (wrapped["wrapping"], base64.b64decode(wrapped["salt"]), scrypt.get("logN"), scrypt.get("r"),
            scrypt.get("p"), base64.b64decode(wrapped["sealed"]), identifier, failed, aad, machine_key)


def machine_unwrap(daemon, row):
    assert row[0] == "machine", row
    machine_key = daemon.machine_key()
    sealed = row[5]
    return AESGCM(machine_key).decrypt(sealed[:12], sealed[12:], row[8])


def unwrap(row, passcode, machine_key=...):
    """Opens a passcode wrap as lockwiped does: scrypt of the passcode; in wrap format 3,
    HKDF-SHA256 of it followed by the machine key (`machine_key`: the row's own unless given)."""
    wrapping, salt, logn, r, p, sealed, _, _, aad = row[:9]
    assert wrapping == "passcode"
    kek = hashlib.scrypt(passcode.encode(), salt=salt, n=1 << logn, r=r, p=p, dklen=32, maxmem=256 << 20)
    if machine_key is ...:
        machine_key = row[9] if len(row) > 9 else None
    if machine_key is not None:
        kek = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=b"lockwipe passcode wrap\0").derive(kek + machine_key)
    return AESGCM(kek).decrypt(sealed[:12], sealed[12:], aad)


def log_fields(line):
    return dict(re.findall(r"\b(LOCKWIPE_[A-Z0-9_]+)=(\S+)", line))


# --------------------------------------------------------------------------- tests


def test_lock_encrypts_names_and_contents_even_for_root_and_unlock_gives_them_back(daemon, make_user):
    user = make_user()
    with encrypted_fs(daemon) as fs:
        vault = fs / "alice"
        reg = register_encrypted(daemon, user, vault)
        assert reg["key_wrapping"] == "machine", reg
        assert (os.stat(vault).st_uid, os.stat(vault).st_mode & 0o777) == (user.uid, 0o700)
        set_passcode(daemon, user)
        assert daemon.registration(user)["key_wrapping"] == "passcode"
        files = put_files(user, vault)

        daemon.ok("lock", "--user", user.name, user=user)
        assert daemon.state_of(user) == "locked"
        names = os.listdir(vault)
        assert len(names) == 2 and not {"notes.txt", "sub"} & set(names), names
        for name in names:
            target = vault / name
            if target.is_dir():
                continue
            with pytest.raises(OSError) as e:
                open(target, "rb")
            assert e.value.errno == errno.ENOKEY, e.value  # "Required key not available", as root
            assert "Required key not available" in str(e.value)

        # The user unlocks their own vault with the passcode (user lock).
        r = daemon.ctl("unlock", "--user", user.name, "--passcode-stdin", input="wrong-passcode\n", user=user)
        assert r.code == 77 and "wrong passcode" in r.err, r.describe()
        assert daemon.registration(user)["failed_unlocks"] == 1
        daemon.ok("unlock", "--user", user.name, "--passcode-stdin", input=PASS + "\n", user=user)
        reg = daemon.registration(user)
        assert reg["state"] == "active" and reg["failed_unlocks"] == 0, reg
        for rel, content in files.items():
            with open(vault / rel, "rb") as f:
                assert f.read() == content, rel

        # Without the passcode and no terminal: a clear usage error, nothing counted.
        daemon.ok("lock", "--user", user.name)
        r = daemon.ctl("unlock", "--user", user.name)
        assert r.code == 2 and "protected by a passcode" in r.err, r.describe()
        assert daemon.registration(user)["failed_unlocks"] == 0
        # An administrator's lock: only an administrator unlocks (with the passcode).
        r = daemon.ctl("unlock", "--user", user.name, "--passcode-stdin", input=PASS + "\n", user=user)
        assert r.code == 77 and "administrator" in r.err, r.describe()
        daemon.ok("unlock", "--user", user.name, "--passcode-stdin", input=PASS + "\n")
        assert daemon.state_of(user) == "active"

        # Unregistering would lose the key: refused while the data exists.
        r = daemon.ctl("unregister", "--user", user.name)
        assert r.code == 1 and "encrypted vault" in r.err, r.describe()


def test_lock_ends_processes_holding_the_vault_and_restart_reapplies_it(daemon, make_user, procs):
    user = make_user()
    with encrypted_fs(daemon) as fs:
        vault = fs / "held"
        register_encrypted(daemon, user, vault)
        put_files(user, vault)
        holder = procs.spawn(user, ["sh", "-c", f"exec 3<'{vault}/notes.txt'; cd '{vault}'; sleep 600"])
        wait_until(lambda: any(os.readlink(f"/proc/{holder.pid}/fd/{fd}").startswith(str(vault))
                               for fd in os.listdir(f"/proc/{holder.pid}/fd")), 5, "holder opened the file")
        r = daemon.ok("lock", "--user", user.name)
        assert re.search(r"ended [1-9][0-9]* process", r.out), r.describe()
        assert holder.wait(timeout=5) is not None
        assert "notes.txt" not in os.listdir(vault)
        # Machine-wrapped key: the administrator unlocks without a passcode.
        daemon.ok("unlock", "--user", user.name)
        assert "notes.txt" in os.listdir(vault)
        daemon.ok("lock", "--user", user.name)
        # A locked vault stays locked across a daemon restart.
        daemon.restart()
        assert daemon.state_of(user) == "locked"
        assert "notes.txt" not in os.listdir(vault)


def test_registration_chooses_protection_and_require_encryption_names_the_directory(daemon, make_user):
    user, other, third = make_user(), make_user(), make_user()
    with encrypted_fs(daemon) as fs:
        full = fs / "full"
        full.mkdir()
        (full / "already.txt").write_text("x")
        plain = daemon.data / "plain"  # /tmp's filesystem: no fscrypt
        r = daemon.ctl("register", "--user", user.name, "--dir", str(full), "--require-encryption")
        assert r.code == 1 and str(full) in r.err and "not empty" in r.err, r.describe()
        r = daemon.ctl("register", "--user", user.name, "--dir", str(plain), "--require-encryption")
        assert r.code == 1 and str(plain) in r.err and "no fscrypt" in r.err, r.describe()
        assert daemon.registration(user) is None and not plain.exists()
        # Mixed: every directory gets the permission lock, and the reply says why.
        r = daemon.ok("register", "--user", other.name, "--dir", str(fs / "new"), "--dir", str(plain))
        assert "protection: permissions" in r.out and "no fscrypt" in r.out, r.describe()
        assert daemon.registration(other)["protection"] == "permissions"
        assert "key_wrapping" not in daemon.registration(other)
        # A user of a permission-locked vault cannot set a passcode.
        r = daemon.ctl("passcode", "set", "--user", other.name, "--passcode-stdin", input=PASS + "\n", user=other)
        assert r.code == 1 and "permissions" in r.err, r.describe()
        # Without the default passcode, registration needs the first passcode.
        daemon.write_config(config_text(extra="\n[passcode]\ndefault_password_allowed = false\n"))
        daemon.hup()
        time.sleep(0.5)
        r = daemon.ctl("register", "--user", third.name, "--dir", str(fs / "third"))
        assert r.code == 1 and "default_password_allowed" in r.err, r.describe()
        assert not (fs / "third").exists()
        daemon.ok("register", "--user", third.name, "--dir", str(fs / "third"), "--passcode-stdin", input=PASS + "\n")
        assert daemon.registration(third)["key_wrapping"] == "passcode"


def test_passcode_policy_violations_are_named_rule_by_rule(make_daemon, make_user):
    extra = ("\n[passcode]\nmin_length = 10\nrequires_digit = true\nrequires_upper = true\n"
             "requires_special = true\nmin_unique_chars = 6\nmin_character_classes = 4\n")
    daemon = make_daemon(config=config_text(extra=extra))
    user = make_user()
    with encrypted_fs(daemon) as fs:
        register_encrypted(daemon, user, fs / "v")
        r = daemon.ctl("passcode", "set", "--user", user.name, "--passcode-stdin", input="aaaa\n", user=user)
        assert r.code == 1, r.describe()
        for rule in ("min_length", "requires_digit", "requires_upper", "requires_special", "min_unique_chars",
                     "min_character_classes"):
            assert rule in r.err, f"{rule} not named: {r.err}"
        assert "requires_lower" not in r.err
        assert daemon.registration(user)["key_wrapping"] == "machine"
        daemon.ok("passcode", "set", "--user", user.name, "--passcode-stdin", input="Abcdef-123!\n", user=user)
        # set only while the default passcode wraps the key; change needs the current one.
        r = daemon.ctl("passcode", "set", "--user", user.name, "--passcode-stdin", input="Other-456!x\n")
        assert r.code == 1 and "already has a passcode" in r.err, r.describe()
        r = daemon.ctl("passcode", "change", "--user", user.name, "--passcode-stdin", input="Abcdef-123!\nshort\n", user=user)
        assert r.code == 1 and "min_length" in r.err, r.describe()
        r = daemon.ctl("passcode", "change", "--user", user.name, "--passcode-stdin", input="Wrong-999!x\nOther-456!x\n", user=user)
        assert r.code == 77 and "wrong passcode" in r.err, r.describe()
        before = wrapped_key_row(daemon, user)
        daemon.ok("passcode", "change", "--user", user.name, "--passcode-stdin", input="Abcdef-123!\nOther-456!x\n", user=user)
        after = wrapped_key_row(daemon, user)
        assert unwrap(after, "Other-456!x") == unwrap(before, "Abcdef-123!")
        assert after[7] == 0  # a right passcode resets the failed count
        # The old wrapped copy is gone from the database and the WAL.
        for path in (daemon.state_dir / "state.sqlite", daemon.state_dir / "state.sqlite-wal"):
            if path.exists():
                assert before[5] not in path.read_bytes(), f"old wrapped key still in {path.name}"
        # Another user may not touch it.
        other = make_user()
        r = daemon.ctl("passcode", "change", "--user", user.name, "--passcode-stdin", input="Other-456!x\nThird-789!y\n", user=other)
        assert r.code == 77, r.describe()


def test_wrong_passcodes_up_to_retry_limit_wipe_the_vault(make_daemon, make_user):
    daemon = make_daemon(config=config_text(extra="\n[passcode]\nretry_limit = 3\n"))
    user = make_user()
    with encrypted_fs(daemon) as fs:
        vault = fs / "v"
        register_encrypted(daemon, user, vault)
        set_passcode(daemon, user)
        put_files(user, vault)
        daemon.ok("lock", "--user", user.name, user=user)
        for i in (1, 2):
            r = daemon.ctl("unlock", "--user", user.name, "--passcode-stdin", input=f"nope-{i}\n", user=user)
            assert r.code == 77 and f"{3 - i} left" in r.err, r.describe()
        # The count is durable: a kill -9 does not reset it.
        daemon.kill9()
        daemon.start()
        assert daemon.registration(user)["failed_unlocks"] == 2
        r = daemon.ctl("unlock", "--user", user.name, "--passcode-stdin", input="nope-3\n", user=user)
        assert r.code == 77 and "retry_limit" in r.err and "wiped" in r.err, r.describe()
        assert daemon.state_of(user) == "wiped"
        assert os.listdir(vault) == []
        kinds = [(e["kind"], e.get("trigger")) for e in daemon.history(user)]
        assert ("wipe", "retry-limit") in kinds and ("key-destroyed", "retry-limit") in kinds, kinds
        lines = daemon.log_lines("LOCKWIPE_ACTION=wipe", f"LOCKWIPE_USER={user.name}", "LOCKWIPE_TRIGGER=retry-limit")
        assert lines, daemon.log_tail()


def test_crypto_erase_destroys_every_copy_of_the_key_and_nothing_outside(daemon, make_user):
    user = make_user()
    with encrypted_fs(daemon) as fs:
        vault = fs / "v"
        outside = fs / "outside"
        outside.mkdir()
        (outside / "canary.txt").write_bytes(os.urandom(5000))
        os.symlink(outside / "canary.txt", fs / "link-to-canary")
        register_encrypted(daemon, user, vault)
        set_passcode(daemon, user)
        put_files(user, vault)
        os.symlink(outside / "canary.txt", vault / "escape")
        before_outside = fingerprint(outside)
        row = wrapped_key_row(daemon, user)
        key = unwrap(row, PASS)
        assert len(key) == 64
        sealed = row[5]

        r = daemon.ok("wipe", "--user", user.name, "--yes")
        assert "crypto-erased: key destroyed at" in r.out and "no overwrite pass needed" in r.out, r.describe()
        assert os.listdir(vault) == []
        assert fingerprint(outside) == before_outside
        wipe = daemon.registration(user)["wipe"]
        assert wipe["key_destroyed_at"] and wipe["key_destroyed_seconds"] >= 0 and wipe["passes"] == 0, wipe
        assert wrapped_key_row(daemon, user) is None
        for name in ("state.sqlite", "state.sqlite-wal"):
            path = daemon.state_dir / name
            if path.exists():
                raw = path.read_bytes()
                assert key not in raw, f"the vault key is in {name}"
                assert sealed not in raw, f"the wrapped key is in {name}"
        line = daemon.log_lines("LOCKWIPE_KEY_DESTROYED_USEC=", f"LOCKWIPE_USER={user.name}")
        assert line, daemon.log_tail()
        # Unregistering a wiped encrypted registration is fine.
        daemon.ok("unregister", "--user", user.name)


@contextlib.contextmanager
def vault_with_expiring_passcode(make_daemon, make_user):
    """A daemon whose passcodes expire after a day (its clock under faketime, so a test
    can restart it two days later) and a user with an encrypted vault, a passcode and
    files in it. Yields (daemon, user, vault)."""
    daemon = make_daemon(config=config_text(extra="\n[passcode]\nexpiration_days = 1\n"), faketime="+0")
    user = make_user()
    with encrypted_fs(daemon) as fs:
        vault = fs / "v"
        register_encrypted(daemon, user, vault)
        set_passcode(daemon, user)
        assert daemon.registration(user)["passcode_expires"]
        put_files(user, vault)
        yield daemon, user, vault


def test_expired_passcode_must_be_changed_at_unlock(make_daemon, make_user):
    with vault_with_expiring_passcode(make_daemon, make_user) as (daemon, user, vault):
        daemon.ok("lock", "--user", user.name, user=user)
        daemon.restart(faketime="+2d")
        r = daemon.ctl("unlock", "--user", user.name, "--passcode-stdin", input=PASS + "\n", user=user)
        assert r.code == 1 and "passcode expired: change it" in r.err, r.describe()
        assert daemon.state_of(user) == "locked"
        r = daemon.ctl("unlock", "--user", user.name, "--passcode-stdin", "--new-passcode-stdin",
                       input=PASS + "\nshort\n", user=user)
        assert r.code == 1 and "min_length" in r.err, r.describe()
        daemon.ok("unlock", "--user", user.name, "--passcode-stdin", "--new-passcode-stdin",
                  input=PASS + "\n" + PASS2 + "\n", user=user)
        reg = daemon.registration(user)
        assert reg["state"] == "active", reg
        assert unwrap(wrapped_key_row(daemon, user), PASS2)
        assert "notes.txt" in os.listdir(vault)


def test_kill9_during_crypto_erase_resumes_after_restart(daemon, make_user, procs):
    # The kill follows the "key destroyed" line while the ciphertext is being unlinked.
    # On a busy machine the unlinking can finish first; then the kill came too late to
    # test anything, and the scenario runs again with a new user (at most 3 times).
    with encrypted_fs(daemon, size="512M") as fs:
        for attempt in range(3):
            user = make_user()
            vault = fs / f"v{attempt}"
            register_encrypted(daemon, user, vault)
            # Many entries, so that the unlink phase takes a while after the key is gone.
            r = run_as(user, ["sh", "-c", f"cd '{vault}' && for d in $(seq 40); do mkdir $d && (cd $d && seq 1500 | xargs touch); done"],
                       timeout=300)
            assert r.returncode == 0, r.stderr
            wiper = procs.spawn(None, [str(daemon.bins.lockwipectl), "--socket", str(daemon.socket), "wipe", "--user", user.name, "--yes"])
            daemon.wait_log(lambda log: f"vault key of {user.name} destroyed" in log, 30, "the key was destroyed")
            daemon.kill9()
            wiper.wait(timeout=10)
            assert wrapped_key_row(daemon, user) is None
            daemon.start()
            assert daemon.state_of(user) == "wiped", daemon.log_tail()
            assert os.listdir(vault) == []
            wipe = daemon.registration(user)["wipe"]
            assert wipe["key_destroyed_at"] and wipe["complete"], wipe
            kinds = [e["kind"] for e in daemon.history(user)]
            assert kinds.count("key-destroyed") == 1, kinds
            if "wipe-resumed" in kinds:
                return
            print(f"attempt {attempt + 1}: the wipe finished before the kill; again")
        pytest.fail("in 3 attempts the wipe always finished before the kill: nothing was interrupted")


def test_user_unlock_after_a_server_lock_checks_in_first(make_daemon, make_server, make_user):
    """A server lock of a vault with the default passcode: the user's own unlock makes
    a check-in, and the server lifting its lock opens the vault (reported as unlocked,
    not as "not locked")."""
    srv = make_server()
    default_passcode = {"passwordPolicy": {"passwordPolicyDefaultPasswordAllowed": "true"}}
    srv.set("*", mode="ok", settings=default_passcode)
    d = make_daemon(config=config_text(extra=server_config(srv.url)))
    user = make_user()
    with encrypted_fs(d) as fs:
        vault = fs / "v"
        register_encrypted(d, user, vault)
        files = put_files(user, vault)
        srv.set(user, mode="lock", settings=default_passcode)
        d.ok("check-in", "--user", user.name)
        reg = d.registration(user)
        assert reg["state"] == "locked" and reg["lock_trigger"] == "server", reg
        # Still locked by the server: the user's unlock is refused, with the reason.
        r = d.ctl("unlock", "--user", user.name, user=user)
        assert r.code == 77 and "policy server" in r.err, r.describe()
        srv.set(user, mode="ok", settings=default_passcode)
        r = d.ctl("unlock", "--user", user.name, user=user)
        assert r.code == 0, "the server lifted its lock, yet the user's unlock failed: " + r.describe()
        assert d.state_of(user) == "active"
        for rel, content in files.items():
            assert (vault / rel).read_bytes() == content


def test_server_passcode_policy_overrides_the_local_one(make_daemon, make_server, make_user):
    srv = make_server()
    # Locally 6 characters and nothing else; the server: 12, an upper-case letter, a digit
    # (the demo server's default) and the default passcode allowed.
    srv.set("*", mode="ok", settings={"passwordPolicy": {
        "passwordPolicyMinLength": "12", "passwordPolicyUpperRequired": "true",
        "passwordPolicyDefaultPasswordAllowed": "true"}})
    d = make_daemon(config=config_text(extra="\n[passcode]\nmin_length = 6\n" + server_config(srv.url)))
    user = make_user()
    with encrypted_fs(d) as fs:
        register_encrypted(d, user, fs / "v")
        d.ok("check-in", "--user", user.name)
        r = d.ctl("passcode", "set", "--user", user.name, "--passcode-stdin", input="abc123\n", user=user)
        assert r.code != 0, "a passcode the server's policy forbids was accepted: " + r.describe()
        for rule in ("min_length", "requires_upper"):
            assert rule in r.err, f"{rule} (the server's) is not named: " + r.describe()
        d.ok("passcode", "set", "--user", user.name, "--passcode-stdin", input="Abcdefghijk7\n", user=user)


# --------------------------------------------------------------------------- key copies (issue 12)


@contextlib.contextmanager
def state_fs(daemon, size="64M"):
    """The daemon's --state-dir on an ext4 image of its own (default options: data=ordered),
    so that a test can read every block of it, freed ones included. Before daemon.start()."""
    why = fscrypt_unavailable()
    if why:
        pytest.skip(why)
    image = daemon.root / "state.img"
    subprocess.run(["truncate", "-s", size, str(image)], check=True)
    r = subprocess.run(["mkfs.ext4", "-q", "-F", str(image)], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.fail(f"mkfs.ext4 failed: {r.stderr}")
    r = subprocess.run(["mount", "-o", "loop", str(image), str(daemon.state_dir)], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot loop-mount an ext4 image here: {r.stderr.strip()}")
    try:
        os.chmod(daemon.state_dir, 0o700)
        shutil.rmtree(daemon.state_dir / "lost+found")
        yield image
    finally:
        if daemon.running():
            daemon.stop(check=False)
        for _ in range(50):
            if subprocess.run(["umount", str(daemon.state_dir)], capture_output=True).returncode == 0:
                break
            time.sleep(0.1)
        else:
            subprocess.run(["umount", "-l", str(daemon.state_dir)], capture_output=True)
        image.unlink(missing_ok=True)


def raw_image(daemon, image):
    """Every byte of the state filesystem as the disk has it, after a syncfs."""
    subprocess.run(["sync", "-f", str(daemon.state_dir)], check=True)
    return image.read_bytes()


def forms(secret):
    """The byte strings a copy of `secret` could be stored as: raw, base64 (the key files
    are JSON) and hex."""
    return {"raw": secret, "base64": base64.b64encode(secret), "hex": secret.hex().encode()}


def assert_nowhere(raw, what, secret):
    for form, needle in forms(secret).items():
        # base64 of a 92-byte box: any 3-byte-aligned run of it in a copy at another offset
        # would show, so search for its middle too.
        for n in (needle, needle[8:-8]):
            assert n not in raw, f"{what} ({form}) is still on the state filesystem at offset {raw.find(n)}"


def test_no_wrapped_key_survives_on_the_state_filesystem_after_passcode_set_change_or_crypto_erase(make_daemon, make_user):
    """Issue 12, finding 3: a raw scan of the state filesystem (the daemon's --state-dir
    on a loop-mounted ext4 image) finds no wrapped copy that a passcode set, a passcode
    change or a crypto-erase replaced or destroyed, and never the raw vault key."""
    daemon = make_daemon(start=False)
    user = make_user()
    with state_fs(daemon) as image, encrypted_fs(daemon) as fs:
        daemon.start()
        vault = fs / "v"
        register_encrypted(daemon, user, vault)
        put_files(user, vault)
        machine_row = wrapped_key_row(daemon, user)
        key = machine_unwrap(daemon, machine_row)
        assert len(key) == 64
        # Wrap format 2: bound to the registration id; without it (or with another) the
        # machine key does not open it.
        reg_id = registration_id(daemon, user)
        assert re.fullmatch(r"[0-9a-f]{32}", reg_id) and machine_row[8] == b"lockwipe vault key\0" + reg_id.encode()
        for other in (None, b"lockwipe vault key\0" + b"0" * 32):
            with pytest.raises(InvalidTag):
                machine_unwrap(daemon, machine_row[:8] + (other, None))
        # Many writes to the database while the machine key wraps the vault key (status
        # reads, locks and unlocks rewrite pages beside it).
        for _ in range(3):
            daemon.ok("lock", "--user", user.name)
            daemon.ok("unlock", "--user", user.name)
        raw = raw_image(daemon, image)
        assert machine_row[5] in raw or base64.b64encode(machine_row[5]) in raw, \
            "the scan cannot find the current wrapped key: it would not find a stale one either"
        assert_nowhere(raw, "the raw vault key", key)

        set_passcode(daemon, user)
        first = wrapped_key_row(daemon, user)
        assert unwrap(first, PASS) == key
        raw = raw_image(daemon, image)
        assert_nowhere(raw, "the machine-wrapped key replaced by the passcode", machine_row[5])
        assert_nowhere(raw, "the raw vault key", key)

        daemon.ok("passcode", "change", "--user", user.name, "--passcode-stdin", input=f"{PASS}\n{PASS2}\n", user=user)
        second = wrapped_key_row(daemon, user)
        assert unwrap(second, PASS2) == key
        raw = raw_image(daemon, image)
        assert_nowhere(raw, "the key wrapped by the old passcode", first[5])

        r = daemon.ok("wipe", "--user", user.name, "--yes")
        assert "crypto-erased" in r.out, r.describe()
        assert wrapped_key_row(daemon, user) is None
        assert os.listdir(daemon.state_dir / "keys") == []
        raw = raw_image(daemon, image)
        for what, sealed in (("machine", machine_row[5]), ("first passcode", first[5]), ("second passcode", second[5])):
            assert_nowhere(raw, f"the key wrapped by the {what} after the crypto-erase", sealed)
        assert_nowhere(raw, "the raw vault key", key)
        daemon.stop()


def test_kill9_during_a_passcode_change_leaves_exactly_one_usable_wrapped_key(daemon, make_user, procs):
    """A passcode change killed at any moment: after the restart exactly one key file is
    left, the one the database names, and it opens with the old or the new passcode (never
    neither): the user never loses the vault to a crash."""
    user = make_user()
    with encrypted_fs(daemon) as fs:
        register_encrypted(daemon, user, fs / "v")
        set_passcode(daemon, user)
        key = unwrap(wrapped_key_row(daemon, user), PASS)
        current, outcomes = PASS, []
        for attempt in range(8):
            new = PASS2 if current == PASS else PASS
            changer = procs.spawn(user, [str(daemon.bins.ctl_for_others), "--socket", str(daemon.socket), "passcode", "change",
                                         "--user", user.name, "--passcode-stdin"], stdin=subprocess.PIPE)
            changer.stdin.write(f"{current}\n{new}\n".encode())
            changer.stdin.close()
            # scrypt takes about 0.1 s per wrap here: kill before, during and after it.
            time.sleep(0.03 * attempt)
            daemon.kill9()
            changer.wait(timeout=10)
            daemon.start()
            names = os.listdir(daemon.state_dir / "keys")
            row = wrapped_key_row(daemon, user)
            assert len(names) == 1, f"attempt {attempt}: key files after the restart: {names}"
            opened = []
            for p in (current, new):
                try:
                    opened.append((p, unwrap(row, p)))
                except Exception:
                    pass
            assert [k for _, k in opened] == [key], f"attempt {attempt}: the key opens with {[p for p, _ in opened]}"
            outcomes.append(opened[0][0] == new)
            current = opened[0][0]
        print(f"changes completed before the kill: {outcomes}")


def test_wrong_passcodes_back_off_durably_without_trying_the_passcode(make_daemon, make_user):
    """Three wrong passcodes are free; then each one doubles the wait (1 s, 2 s, ...). An
    attempt inside the wait is refused at once with when to retry, is not tried (not even
    the right passcode opens it) and is not counted; the wait survives a kill -9; the
    retry_limit still counts only tried passcodes."""
    daemon = make_daemon(config=config_text(extra="\n[passcode]\nretry_limit = 10\n"))
    user = make_user()
    with encrypted_fs(daemon) as fs:
        vault = fs / "v"
        register_encrypted(daemon, user, vault)
        set_passcode(daemon, user)
        daemon.ok("lock", "--user", user.name, user=user)

        def unlock(passcode):
            return daemon.ctl("unlock", "--user", user.name, "--passcode-stdin", input=passcode + "\n", user=user)

        for i in range(1, 5):
            r = unlock(f"wrong-{i}")
            assert r.code == 77 and "wrong passcode" in r.err and f"{10 - i} left" in r.err, r.describe()
        # Four in a row: one second from the fourth. Even the right passcode is refused,
        # untried and uncounted.
        r = unlock(PASS)
        m = re.search(r"try again in (\d+) s", r.err)
        assert r.code == 77 and m and 1 <= int(m.group(1)) <= 2 and "does not count" in r.err, r.describe()
        reg = daemon.registration(user)
        assert reg["failed_unlocks"] == 4 and reg["state"] == "locked", reg
        time.sleep(int(m.group(1)) + 0.1)
        r = unlock("wrong-5")
        assert r.code == 77 and "wrong passcode" in r.err and "5 left" in r.err, r.describe()
        r = unlock(PASS)
        m = re.search(r"try again in (\d+) s", r.err)
        assert r.code == 77 and m and 2 <= int(m.group(1)) <= 3, r.describe()
        time.sleep(int(m.group(1)) + 0.1)
        r = unlock("wrong-6")
        assert r.code == 77 and "wrong passcode" in r.err and "4 left" in r.err, r.describe()
        # Six: four seconds, and a kill -9 and restart do not reset the wait.
        started = time.monotonic()
        daemon.kill9()
        daemon.start()
        r = unlock(PASS)
        m = re.search(r"try again in (\d+) s", r.err)
        assert r.code == 77 and m and 1 <= int(m.group(1)) <= 5, \
            f"{time.monotonic() - started:.1f} s after the kill: " + r.describe()
        assert daemon.registration(user)["failed_unlocks"] == 6
        kinds = [e["kind"] for e in daemon.history(user)]
        assert kinds.count("unlock-failed") == 6, kinds
        time.sleep(int(m.group(1)) + 0.2)
        daemon.ok("unlock", "--user", user.name, "--passcode-stdin", input=PASS + "\n", user=user)
        reg = daemon.registration(user)
        assert reg["state"] == "active" and reg["failed_unlocks"] == 0, reg
        # A right passcode reset the wait too.
        daemon.ok("lock", "--user", user.name, user=user)
        for i in range(1, 4):
            assert unlock(f"again-{i}").code == 77
        daemon.ok("unlock", "--user", user.name, "--passcode-stdin", input=PASS + "\n", user=user)


def legacy_state(daemon, user, passcode, scratch):
    """Turns the stopped daemon's state directory into what lockwiped made before
    v6-key-files, in `scratch`: the wrapped key (format 1, no associated data) back in
    its row, no key files, and WAL frames holding the row (a daemon killed after failed
    unlocks). Done outside the state filesystem under test, so that it leaves no copies
    there of its own. Returns the legacy sealed blob and the raw key."""
    shutil.copytree(daemon.state_dir, scratch)
    key = unwrap(wrapped_key_row(daemon, user), passcode)
    shutil.rmtree(scratch / "keys")
    salt, nonce = os.urandom(16), os.urandom(12)
    kek = hashlib.scrypt(passcode.encode(), salt=salt, n=1 << 15, r=8, p=1, dklen=32, maxmem=256 << 20)
    sealed = nonce + AESGCM(kek).encrypt(nonce, key, None)
    con = sqlite3.connect(scratch / "state.sqlite", isolation_level=None)
    con.execute("UPDATE vault_keys SET wrapping = 'passcode', salt = ?, scrypt_log_n = 15, scrypt_r = 8, scrypt_p = 1, "
                "sealed = ? WHERE user = ?", (salt, sealed, user.name))
    con.execute("ALTER TABLE vault_keys DROP COLUMN key_file")
    con.execute("ALTER TABLE vault_keys DROP COLUMN failed_at")
    con.execute("DELETE FROM grdb_migrations WHERE identifier = 'v6-key-files'")
    con.close()
    con = sqlite3.connect(scratch / "state.sqlite", isolation_level=None)
    assert con.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    con.execute("PRAGMA wal_autocheckpoint = 0")
    for _ in range(3):
        con.execute("UPDATE vault_keys SET failed_attempts = failed_attempts + 1 WHERE user = ?", (user.name,))
    # Copied while the connection is open: the WAL holds the frames, as after a kill -9.
    for name in ("state.sqlite", "state.sqlite-wal"):
        shutil.copyfile(scratch / name, scratch / (name + ".copy"))
    con.close()
    for name in ("state.sqlite", "state.sqlite-wal"):
        os.replace(scratch / (name + ".copy"), scratch / name)
    (scratch / "state.sqlite-shm").unlink(missing_ok=True)
    assert sealed in (scratch / "state.sqlite-wal").read_bytes()
    return sealed, key


def test_migration_moves_old_keys_to_files_and_leaves_no_copy_on_the_state_filesystem(make_daemon, make_user):
    """A database from before v6-key-files (the wrapped key in its row and in WAL frames):
    the first start moves the key to its file, overwrites the row and the WAL in place,
    and a raw scan of the state filesystem finds the old blob nowhere; the vault still
    opens with the passcode."""
    daemon = make_daemon()
    user = make_user()
    with encrypted_fs(daemon) as fs:
        vault = fs / "v"
        register_encrypted(daemon, user, vault)
        set_passcode(daemon, user)
        files = put_files(user, vault)
        daemon.ok("lock", "--user", user.name)
        daemon.stop()
        sealed, key = legacy_state(daemon, user, PASS, daemon.root / "old-state")
        shutil.rmtree(daemon.state_dir)
        daemon.state_dir.mkdir(mode=0o700)
        with state_fs(daemon) as image:
            for f in (daemon.root / "old-state").iterdir():
                shutil.copy2(f, daemon.state_dir / f.name)
            shutil.rmtree(daemon.root / "old-state")
            raw = raw_image(daemon, image)
            assert sealed in raw, "the legacy blob did not reach the image: the scan below would prove nothing"
            daemon.start()
            reg = daemon.registration(user)
            assert reg["state"] == "locked" and reg["failed_unlocks"] == 3, reg
            row = wrapped_key_row(daemon, user)
            assert unwrap(row, PASS) == key
            raw = raw_image(daemon, image)
            # Moved, not copied: the blob is in its key file (base64) and nowhere else.
            assert row[5] == sealed
            assert raw.count(base64.b64encode(sealed)) == 1
            assert sealed not in raw and sealed.hex().encode() not in raw, "a copy of the old row is left"
            assert_nowhere(raw, "the raw vault key", key)
            daemon.ok("unlock", "--user", user.name, "--passcode-stdin", input=PASS + "\n")
            for rel, content in files.items():
                assert (vault / rel).read_bytes() == content
            if registration_id(daemon, user):
                # The unlock wrapped the key again bound to the registration (format 2)
                # and destroyed the format-1 file.
                bound = wrapped_key_row(daemon, user)
                assert bound[8] and unwrap(bound, PASS) == key
                assert_nowhere(raw_image(daemon, image), "the format-1 wrapped key", sealed)
            daemon.stop()


def on_a_terminal(daemon, *args, answers, timeout=60):
    """Runs lockwipectl (as root) on a new pseudo-terminal that is its controlling
    terminal; each time the terminal shows a prompt in `answers`, types the answer.
    Returns (exit code, everything the terminal showed)."""
    import pty
    import select
    argv = [str(daemon.bins.lockwipectl), "--socket", str(daemon.socket), *map(str, args)]
    pid, fd = pty.fork()
    if pid == 0:
        os.execv(argv[0], argv)
    shown, pending = "", list(answers)
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([fd], [], [], 0.2)
            if ready:
                try:
                    chunk = os.read(fd, 4096).decode(errors="replace")
                except OSError:  # EIO: the child closed the terminal
                    break
                if not chunk:
                    break
                shown += chunk
            if pending and shown.rstrip().endswith(pending[0][0]):
                os.write(fd, (pending.pop(0)[1] + "\n").encode())
        else:
            os.kill(pid, signal.SIGKILL)
            pytest.fail(f"`{' '.join(argv)}` did not finish on the terminal within {timeout} s: {shown!r}")
        _, status = os.waitpid(pid, 0)
    finally:
        os.close(fd)
    return os.waitstatus_to_exitcode(status), shown


def test_on_a_terminal_unlock_asks_for_the_passcode_and_a_new_one_when_it_expired(make_daemon, make_user):
    """lockwipectl prompts because the daemon answers io.lockwipe.Manager.PasscodeRequired
    and PasscodeExpired (by error name, whatever their wording)."""
    with vault_with_expiring_passcode(make_daemon, make_user) as (daemon, user, _):
        daemon.ok("lock", "--user", user.name)
        code, shown = on_a_terminal(daemon, "unlock", "--user", user.name,
                                    answers=[(f"Passcode for {user.name}:", PASS)])
        assert code == 0 and f"Passcode for {user.name}:" in shown, shown
        assert PASS not in shown, "the passcode was echoed"
        assert daemon.state_of(user) == "active"

        daemon.ok("lock", "--user", user.name)
        daemon.restart(faketime="+2d")
        code, shown = on_a_terminal(daemon, "unlock", "--user", user.name, answers=[
            (f"Passcode for {user.name}:", PASS), ("New passcode:", PASS2), ("Repeat new passcode:", PASS2)])
        assert code == 0 and "The passcode has expired: choose a new one." in shown, shown
        assert daemon.state_of(user) == "active"
        assert unwrap(wrapped_key_row(daemon, user), PASS2)
