"""Issue 43: a stolen machine gives nothing away. lockwiped's machine key is sealed with
systemd's credentials (systemd-creds): to a TPM2 and the host key where there is a TPM2,
to the host key alone where there is none, and every registration says what a copy of
the disk gets of it.

The TPM2 here is a real software TPM (Debian's swtpm, reached through tpm2-tss's swtpm
TCTI). swtpm has no resource manager: systemd-creds leaves its session in the TPM when it
exits, which the kernel's /dev/tpmrm0 flushes on a real machine; LOCKWIPE_SYSTEMD_CREDS
names a wrapper that runs the real systemd-creds and then flushes as the kernel would
(tpm2_flushcontext). A changed PCR is a real TPM2_PCR_Extend."""

import hashlib
import json
import os
import shutil
import sqlite3
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from daemon_harness import config_text
from host_helpers import wait_until
from software_tpm import SoftwareTPM, software_tpm
from test_vault import (PASS, PASS2, assert_nowhere, encrypted_fs, machine_unwrap, put_files, raw_image, register_encrypted,
                        set_passcode, state_fs, unwrap, wrapped_key_row)

ID_KEY_SEALED = "ed474e8742c04bad9ba3f16d46b4e3d2"
ID_KEY_UNAVAILABLE = "fdc11460d90846a99d70c81061d8a8d3"
ID_KEY_RECOVERED = "aa660deaef174e2ca524b171d22e1c8f"
NO_RECOVERY_KEY = "no organisation recovery key is configured ([keys] recovery_public_key)"


def use_tpm(daemon, tpm, config="", keys=""):
    daemon.extra_env["LOCKWIPE_SYSTEMD_CREDS"] = str(tpm.wrapper)
    # For the test's own systemd-creds (Daemon.machine_key); lockwiped has tpm2_device.
    daemon.extra_env["SYSTEMD_TPM2_DEVICE"] = tpm.device
    daemon.write_config(config_text(extra=config + f'\n[keys]\nseal = "tpm2"\ntpm2_device = "{tpm.device}"\n{keys}\n'))


def wrapped_key_file(daemon, user):
    """The user's wrapped key as its key file in keys/ holds it (the file the row names)."""
    con = sqlite3.connect(f"file:{daemon.state_dir / 'state.sqlite'}?mode=ro", uri=True)
    try:
        (name,) = con.execute("SELECT key_file FROM vault_keys WHERE user = ?", (user.name,)).fetchone()
    finally:
        con.close()
    return json.loads((daemon.state_dir / "keys" / name).read_text())


def decrypt(credential: Path, secret: Path, tpm: SoftwareTPM | None):
    """systemd-creds decrypt as a thief would run it on a copy: with the host key from the
    copy and the given TPM (or none)."""
    env = {"PATH": os.environ["PATH"], "SYSTEMD_CREDENTIAL_SECRET": str(secret)}
    args = [str(tpm.wrapper) if tpm else "systemd-creds", "decrypt", "--name=lockwipe-machine-key", str(credential), "-"]
    if tpm:
        args.insert(2, f"--tpm2-device={tpm.device}")
    else:
        env["SYSTEMD_TPM2_DEVICE"] = "device:/nonexistent/tpmrm0"  # no TPM (this machine has none anyway)
    return subprocess.run(args, env=env, capture_output=True, timeout=30)


def test_without_a_tpm_the_machine_key_is_sealed_with_the_host_key_and_every_vault_says_what_a_copy_gets(make_daemon, make_user):
    daemon = make_daemon()
    alice, bob = make_user(), make_user()
    with encrypted_fs(daemon) as fs:
        register_encrypted(daemon, alice, fs / "a")
        (daemon.data / "b").mkdir()
        os.chown(daemon.data / "b", bob.uid, bob.gid)
        r = daemon.ok("register", "--user", bob.name, "--dir", str(daemon.data / "b"))
        assert "at rest: none: a permission vault, readable by anyone who holds the disk" in r.out, r.describe()
        if "its filesystem has no fscrypt" in r.out:  # /tmp on ext4 without -O encrypt, as here
            assert "tune2fs -O encrypt DEVICE" in r.out, r.describe()
        assert daemon.log_lines("registered " + bob.name, "LOCKWIPE_AT_REST=none"), daemon.log_tail()
        status = daemon.status()
        assert status["machine_key"] == {"sealing": "host", "problem": None, "recovery_key": None}, status
        # No TPM2: no warning that a TPM change loses the vaults (the host key stays).
        assert NO_RECOVERY_KEY not in " ".join(status["warnings"]), status
        by_user = {r["user"]: r for r in status["registrations"]}
        assert by_user[alice.name]["at_rest"] == "host" and by_user[bob.name]["at_rest"] == "none", by_user
        assert any("the machine key is sealed with the host key only (no TPM2): a copy of the disk opens the vaults of "
                   + alice.name in w for w in status["warnings"]), status["warnings"]
        human = daemon.ok("status").out
        assert f"{alice.name}: at rest: host key only: a copy of the disk opens it (no TPM)" in human, human
        assert f"{bob.name}: at rest: none: a permission vault, readable by anyone who holds the disk" in human, human
        # Sealed, never in the clear; made once, at the first start.
        assert not (daemon.state_dir / "machine.key").exists()
        sealed = daemon.state_dir / "machine.key.cred"
        assert sealed.stat().st_mode & 0o777 == 0o600 and sealed.stat().st_uid == 0
        assert daemon.machine_key() not in sealed.read_bytes()
        assert daemon.log_lines(f"MESSAGE_ID={ID_KEY_SEALED}", "made the machine key, sealed with the host key only"), daemon.log_tail()
        # A restart opens the same key: the vault locks and opens again with it.
        daemon.restart()
        daemon.ok("lock", "--user", alice.name)
        daemon.ok("unlock", "--user", alice.name)
        assert daemon.registration(alice)["state"] == "active"

        # [vault] require_encryption refuses permission vaults fleet-wide; those already
        # registered are kept.
        daemon.stop()
        daemon.write_config(config_text(extra="[vault]\nrequire_encryption = true\n"))
        daemon.start()
        carol = make_user()
        (daemon.data / "c").mkdir()
        r = daemon.ctl("register", "--user", carol.name, "--dir", str(daemon.data / "c"))
        assert r.code != 0 and "[vault] require_encryption = true refuses permission vaults" in r.err, r.describe()
        register_encrypted(daemon, carol, fs / "c")
        assert daemon.registration(bob)["at_rest"] == "none"
        # The certificate of a wipe says what a copy of the disk got until then.
        daemon.ok("wipe", "--user", bob.name, "--yes")
        cert = json.loads(daemon.ok("certificate", "--user", bob.name, "--json").out)
        assert cert["subject"]["at_rest"] == "none", cert["subject"]


def test_a_plain_machine_key_of_an_older_version_is_sealed_and_leaves_no_copy_on_the_state_filesystem(make_daemon, make_user):
    daemon = make_daemon(config=config_text(extra='[keys]\nseal = "none"\n'), start=False)
    user = make_user()
    with state_fs(daemon) as image, encrypted_fs(daemon) as fs:
        daemon.start()
        vault = fs / "v"
        register_encrypted(daemon, user, vault)
        put_files(user, vault)
        plain = (daemon.state_dir / "machine.key").read_bytes()
        assert len(plain) == 32 and daemon.status()["machine_key"]["sealing"] == "plain"
        assert daemon.registration(user)["at_rest"] == "disk"
        row = wrapped_key_row(daemon, user)
        daemon.stop()

        daemon.write_config(config_text())  # seal = "auto": systemd-creds is there
        daemon.start()
        assert daemon.log_lines(f"MESSAGE_ID={ID_KEY_SEALED}", "sealed the machine key of an older version"), daemon.log_tail()
        assert not (daemon.state_dir / "machine.key").exists()
        assert daemon.machine_key() == plain
        assert daemon.status()["machine_key"] == {"sealing": "host", "problem": None, "recovery_key": None}
        # The same key still opens the vault: lock, unlock, and the files are there.
        daemon.ok("lock", "--user", user.name)
        daemon.ok("unlock", "--user", user.name)
        assert machine_unwrap(daemon, row) and (vault / "sub").exists()
        assert_nowhere(raw_image(daemon, image), "the plain machine key", plain)
        daemon.stop()


def test_a_tpm_sealed_key_gives_a_copy_of_the_disk_nothing_and_a_changed_pcr_keeps_its_vaults_locked(make_daemon, make_user):
    daemon = make_daemon(start=False)
    user, carol = make_user(), make_user()
    with software_tpm(daemon.root / "tpm") as tpm, encrypted_fs(daemon) as fs:
        use_tpm(daemon, tpm)
        daemon.start()
        vault = fs / "v"
        register_encrypted(daemon, user, vault)
        put_files(user, vault)
        before = sorted(p.name for p in vault.rglob("*"))
        # carol has a passcode of her own: its wrap needs the sealed machine key too (wrap
        # format 3), so her passcode cannot be guessed at on a copy of the disk.
        register_encrypted(daemon, carol, fs / "c")
        set_passcode(daemon, carol)
        carol_row = wrapped_key_row(daemon, carol)
        assert unwrap(carol_row, PASS) and carol_row[9] is not None
        with pytest.raises(InvalidTag):
            unwrap(carol_row, PASS, machine_key=None)
        status = daemon.status()
        assert status["machine_key"] == {"sealing": "tpm2", "problem": None, "recovery_key": None}, status
        assert daemon.registration(user)["at_rest"] == "tpm2" and daemon.registration(carol)["at_rest"] == "tpm2"
        assert not any("machine key" in w for w in status["warnings"]), status["warnings"]
        assert daemon.log_lines(f"MESSAGE_ID={ID_KEY_SEALED}", "sealed to this machine's TPM2 (PCRs 7)"), daemon.log_tail()

        # A copy of the disk, taken while locked: the state directory, the host key and the
        # vault's filesystem.
        daemon.ok("lock", "--user", user.name)
        daemon.ok("lock", "--user", carol.name)
        copy = daemon.root / "copy"
        shutil.copytree(daemon.state_dir, copy / "state")
        shutil.copy(daemon.credential_secret, copy / "credential.secret")
        subprocess.run(["sync", "-f", str(fs)], check=True)
        assert sorted(p.name for p in vault.rglob("*")) != before  # locked: names are ciphertext
        # The machine key opens with this TPM only: not without one, not with another.
        assert decrypt(copy / "state" / "machine.key.cred", copy / "credential.secret", tpm).returncode == 0
        assert decrypt(copy / "state" / "machine.key.cred", copy / "credential.secret", None).returncode != 0
        with software_tpm(daemon.root / "other-tpm") as other:
            r = decrypt(copy / "state" / "machine.key.cred", copy / "credential.secret", other)
            assert r.returncode != 0 and len(r.stdout) == 0, r
        # Nothing on the copy opens the wrapped vault key: every 32 bytes of every file tried
        # as the machine key, and with carol's right passcode as the machine key her wrap needs.
        row = wrapped_key_row(daemon, user)
        sealed, aad = row[5], row[8]
        _, salt, logn, r, p, carol_sealed = carol_row[:6]
        carol_scrypt = hashlib.scrypt(PASS.encode(), salt=salt, n=1 << logn, r=r, p=p, dklen=32, maxmem=256 << 20)
        tried = 0
        for path in [p for p in copy.rglob("*") if p.is_file()]:
            data = path.read_bytes()
            for i in range(0, max(0, len(data) - 31)):
                tried += 1
                try:
                    AESGCM(data[i:i + 32]).decrypt(sealed[:12], sealed[12:], aad)
                except InvalidTag:
                    continue
                pytest.fail(f"{path.relative_to(copy)} at offset {i} opens the wrapped vault key")
            for i in range(0, max(0, len(data) - 31)):
                try:
                    AESGCM(HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=b"lockwipe passcode wrap\0")
                           .derive(carol_scrypt + data[i:i + 32])).decrypt(carol_sealed[:12], carol_sealed[12:], carol_row[8])
                except InvalidTag:
                    continue
                pytest.fail(f"{path.relative_to(copy)} at offset {i} opens carol's wrap with her passcode")
        assert tried > 1000, tried

        # Open again, then a reboot (the filesystem mounted again: the kernel forgets the
        # key) after a firmware update that changes PCR 7: the machine key no longer opens.
        # lockwiped still starts, keeps the vault locked, says why, and destroys nothing.
        daemon.ok("unlock", "--user", user.name)
        reboot(daemon, fs, tpm, b"new firmware")

        key_files = sorted(os.listdir(daemon.state_dir / "keys"))
        daemon.start()
        status = daemon.status()
        problem = status["machine_key"]["problem"]
        assert status["machine_key"]["sealing"] == "tpm2" and problem, status
        assert any(w.startswith("the machine key cannot be opened (") and "nothing is destroyed" in w for w in status["warnings"]), status
        r = daemon.ctl("status")
        assert r.code == 4 and "the machine key cannot be opened" in r.err, r.describe()
        reg = daemon.registration(user)
        assert reg["state"] == "locked" and reg["lock_trigger"] == "resume", reg
        assert daemon.log_lines(f"MESSAGE_ID={ID_KEY_UNAVAILABLE}"), daemon.log_tail()
        r = daemon.ctl("unlock", "--user", user.name)
        assert r.code != 0 and "the machine key cannot be opened" in r.err, r.describe()
        # carol's right passcode cannot be tried without the machine key: refused, and not
        # counted toward retry_limit.
        r = daemon.ctl("unlock", "--user", carol.name, "--passcode-stdin", input=PASS + "\n")
        assert r.code != 0 and "the machine key cannot be opened" in r.err, r.describe()
        assert daemon.registration(carol).get("failed_unlocks", 0) == 0
        assert sorted(os.listdir(daemon.state_dir / "keys")) == key_files
        assert (daemon.state_dir / "machine.key.cred").exists() and not (daemon.state_dir / "machine.key").exists()

        # The firmware setting undone (the machine boots as before) and lockwiped restarted:
        # the key opens, and the administrator's unlock gives the data back.
        daemon.stop()
        tpm.stop()
        tpm.start()
        daemon.start()
        assert daemon.status()["machine_key"] == {"sealing": "tpm2", "problem": None, "recovery_key": None}
        daemon.ok("unlock", "--user", user.name)
        assert sorted(p.name for p in vault.rglob("*")) == before
        daemon.ok("unlock", "--user", carol.name, "--passcode-stdin", input=PASS + "\n")
        assert daemon.registration(carol)["state"] == "active"
        daemon.stop()


def new_recovery_key(daemon, name="recovery.key"):
    """`lockwipectl recovery-key new`: the private key file and the configuration line."""
    path = daemon.root / name
    r = daemon.ok("recovery-key", "new", str(path))
    line = r.out.strip().splitlines()[-1]
    assert line.startswith('recovery_public_key = "') and (path.stat().st_mode & 0o777) == 0o600, r.describe()
    identifier = r.out.split("recovery key ", 1)[1].split(" ", 1)[0]
    return path, line, identifier


def reboot(daemon, fs, tpm=None, measurement=None):
    """lockwiped stopped and the filesystem mounted again (the kernel forgets the key), as
    at a reboot; with `measurement`, PCR 7 extended by it first, as a firmware update does."""
    daemon.stop()
    subprocess.run(["umount", str(fs)], check=True)
    if measurement is not None:
        tpm.extend_pcr7(measurement)
    subprocess.run(["mount", "-o", "loop", str(daemon.root / "enc.img"), str(fs)], check=True)


def test_with_a_recovery_key_a_changed_pcr_loses_no_vault_and_recover_seals_it_to_the_new_tpm_state(make_daemon, make_user):
    daemon = make_daemon(start=False)
    user, carol, dave = make_user(), make_user(), make_user()
    with software_tpm(daemon.root / "tpm") as tpm, encrypted_fs(daemon) as fs:
        # Without a recovery key, a TPM2-sealed machine key is warned about.
        use_tpm(daemon, tpm)
        daemon.start()
        assert NO_RECOVERY_KEY in " ".join(daemon.status()["warnings"]), daemon.status()
        register_encrypted(daemon, dave, fs / "d")
        assert wrapped_key_file(daemon, dave).get("recovery") is None
        daemon.stop()

        key_file, line, identifier = new_recovery_key(daemon)
        r = daemon.ctl("recovery-key", "new", str(key_file))
        assert r.code != 0 and "it exists already" in r.err, r.describe()
        assert daemon.ok("recovery-key", "public", str(key_file)).out.strip().splitlines()[-1] == line
        use_tpm(daemon, tpm, keys=line)
        daemon.start()
        status = daemon.status()
        assert status["machine_key"] == {"sealing": "tpm2", "problem": None, "recovery_key": identifier}, status
        assert NO_RECOVERY_KEY not in " ".join(status["warnings"]), status

        vault = fs / "v"
        register_encrypted(daemon, user, vault)
        put_files(user, vault)
        before = sorted(p.name for p in vault.rglob("*"))
        register_encrypted(daemon, carol, fs / "c")
        set_passcode(daemon, carol)
        for who in (user, carol):
            assert wrapped_key_file(daemon, who)["recovery"]["recipient"] == identifier
        # dave's key, wrapped before the recovery key was configured, gets its recovery
        # wrap the next time it is open: his unlock.
        r = daemon.ctl("recover", "--key-file", str(key_file), dave.name)
        assert r.code == 1 and "its key has not been open since the recovery key was configured" in r.out, r.describe()
        daemon.ok("lock", "--user", dave.name)
        daemon.ok("unlock", "--user", dave.name)
        assert wrapped_key_file(daemon, dave)["recovery"]["recipient"] == identifier
        assert any(e["kind"] == "key-rewrapped" and "organisation's recovery key" in e["detail"] for e in daemon.history(dave))
        # Only an administrator may read the wraps or hand a key back.
        with tempfile.TemporaryDirectory() as readable:
            os.chmod(readable, 0o755)
            shutil.copy(key_file, Path(readable) / "k")
            os.chmod(Path(readable) / "k", 0o644)
            r = daemon.ctl("recover", "--key-file", str(Path(readable) / "k"), user.name, user=user)
        assert r.code == 77 and "only root and members of the admin group may recover vault keys" in r.err, r.describe()

        # A firmware update changes PCR 7, and the machine reboots: the machine key does not
        # open, every vault stays locked and nothing is destroyed. user's vault was open: it
        # is locked at start-up (trigger resume); carol's and dave's stay locked by the
        # administrator.
        for who in (carol, dave):
            daemon.ok("lock", "--user", who.name)
        reboot(daemon, fs, tpm, b"new firmware")
        daemon.start()
        assert daemon.status()["machine_key"]["problem"], daemon.status()
        assert daemon.registration(user)["lock_trigger"] == "resume", daemon.registration(user)
        assert any("lockwipectl recover --key-file FILE" in w for w in daemon.status()["warnings"]), daemon.status()
        old_credential = (daemon.state_dir / "machine.key.cred").read_bytes()

        # Another organisation's key opens nothing, and changes nothing.
        wrong, _, wrong_id = new_recovery_key(daemon, "wrong.key")
        r = daemon.ctl("recover", "--key-file", str(wrong), user.name)
        assert r.code == 1 and f"sealed to the recovery key {identifier}, and this private key is {wrong_id}" in r.out, r.describe()
        assert (daemon.state_dir / "machine.key.cred").read_bytes() == old_credential
        # carol's passcode cannot be checked without the old machine key: she gets a new one.
        r = daemon.ctl("recover", "--key-file", str(key_file), carol.name)
        assert r.code == 1 and "give the vault a new passcode (lockwipectl recover" in r.out, r.describe()
        assert (daemon.state_dir / "machine.key.cred").read_bytes() == old_credential

        # The organisation's key brings the vault back, and the old machine key is kept aside.
        r = daemon.ok("recover", "--key-file", str(key_file), user.name)
        assert "wrapped again under the machine key" in r.out, r.describe()
        assert daemon.registration(user)["state"] == "active", daemon.registration(user)
        assert sorted(p.name for p in vault.rglob("*")) == before
        assert (daemon.state_dir / "machine.key.cred.unopenable-1").read_bytes() == old_credential
        assert (daemon.state_dir / "machine.key.cred").read_bytes() != old_credential
        assert daemon.status()["machine_key"]["problem"] is None, daemon.status()
        assert daemon.log_lines(f"MESSAGE_ID={ID_KEY_RECOVERED}", "set aside"), daemon.log_tail()
        assert any(e["kind"] == "key-recovered" for e in daemon.history(user))
        # A lock of another kind stays, for the way back it has: here the administrator's.
        r = daemon.ok("recover", "--key-file", str(key_file), carol.name, "--passcode-stdin", input=PASS2 + "\n")
        assert "it stays locked (trigger admin)" in r.out and daemon.registration(carol)["state"] == "locked", r.describe()
        daemon.ok("unlock", "--user", carol.name, "--passcode-stdin", input=PASS2 + "\n")
        r = daemon.ok("recover", "--key-file", str(key_file))  # every vault: dave's too
        # The vaults recovered already open with the new machine key: nothing to do there.
        assert r.out.count("vault key recovered") == 1 and r.out.count("nothing to recover") == 2, r.describe()
        daemon.ok("unlock", "--user", dave.name)
        assert daemon.registration(dave)["state"] == "active"
        assert not (daemon.state_dir / "machine.key.cred.unopenable-2").exists()

        # Another reboot with the TPM as it is now: the new machine key opens, user's vault
        # opens by itself, carol's with her new passcode (her old one is gone).
        for who in (user, carol, dave):
            daemon.ok("lock", "--user", who.name)
        reboot(daemon, fs)
        daemon.start()
        assert daemon.status()["machine_key"] == {"sealing": "tpm2", "problem": None, "recovery_key": identifier}
        daemon.ok("unlock", "--user", user.name)
        assert sorted(p.name for p in vault.rglob("*")) == before
        r = daemon.ctl("unlock", "--user", carol.name, "--passcode-stdin", input=PASS + "\n")
        assert r.code != 0 and "wrong passcode" in r.err, r.describe()
        daemon.ok("unlock", "--user", carol.name, "--passcode-stdin", input=PASS2 + "\n")
        # A crypto-erase's certificate: a remnant of the key on flash opens only with this TPM.
        daemon.ok("wipe", "--user", dave.name, "--yes")
        cert = json.loads(daemon.ok("certificate", "--user", dave.name, "--json").out)
        assert cert["subject"]["at_rest"] == "tpm2" and "opens only with this machine's TPM2" in cert["method"]["note"], cert
        assert f"also sealed to the organisation's recovery key {identifier}, whose private key opens such a remnant too" in cert["method"]["note"], cert
        assert "at rest:      sealed to this machine's TPM" in daemon.ok("certificate", "--user", dave.name).out
        daemon.stop()


def test_a_tpm_that_does_not_answer_holds_the_start_up_pass_for_30_seconds_at_most(make_daemon, make_user):
    """systemd-creds that never returns (a stalled TPM): lockwiped gives up after 30 s,
    starts with the machine key unavailable, and enforces the rest."""
    daemon = make_daemon(start=False)
    stalled = daemon.root / "stalled-systemd-creds"
    stalled.write_text("#!/bin/sh\nexec sleep 600\n")
    os.chmod(stalled, 0o755)
    daemon.extra_env["LOCKWIPE_SYSTEMD_CREDS"] = str(stalled)
    started = time.monotonic()
    daemon.start(wait=False)
    # status is answered all the while, without waiting for the TPM: starting up, and no
    # machine_key yet.
    wait_until(lambda: daemon.socket.exists(), timeout=10, what="the control socket")
    r = daemon.ctl("status", "--json", timeout=5)
    assert r.code == 0, r.describe()
    during = json.loads(r.out)
    assert during.get("starting_up") is True and "machine_key" not in during, during
    daemon.wait_ready(timeout=60)
    took = time.monotonic() - started
    assert 29 < took < 50, took
    status = daemon.status()
    assert "within 30 s (the TPM does not answer)" in (status["machine_key"]["problem"] or ""), status
    assert daemon.log_lines(f"MESSAGE_ID={ID_KEY_UNAVAILABLE}"), daemon.log_tail()
    # A permission vault is registered and locked as ever.
    user = make_user()
    (daemon.data / "v").mkdir()
    daemon.ok("register", "--user", user.name, "--dir", str(daemon.data / "v"))
    daemon.ok("lock", "--user", user.name)
    assert daemon.registration(user)["state"] == "locked"
    assert not subprocess.run(["pgrep", "-f", str(stalled)], capture_output=True).stdout, "the stalled systemd-creds was left running"
