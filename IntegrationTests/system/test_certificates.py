"""Sanitization certificates (issue 16 part 2): one for every wipe attempt, complete or
not, stored with the wipe's result, shown by `lockwipectl certificate` and carried by
`history --json`, named in the journal.

Every test drives the real daemon through the real lockwipectl: an overwrite wipe on
the test's own directory, a crypto-erase on a loop-mounted fscrypt ext4 image
(test_vault's fixture), and an incomplete wipe (a tmpfs mounted inside the vault).
"""

import contextlib
import json
import os
import re
import shutil
import socket
import subprocess

import pytest

from host_helpers import fingerprint, loop_filesystem
from test_vault import encrypted_fs, put_files, register_encrypted, set_passcode


MEDIA_PENDING = False


def certificate(daemon, user, *extra, as_user=None):
    r = daemon.ok("certificate", "--user", user.name, "--json", *extra, user=as_user)
    return json.loads(r.out)


def journal_certificate_ids(daemon, user):
    ids = []
    for line in daemon.log_lines("LOCKWIPE_ACTION=wipe", f"LOCKWIPE_USER={user.name}", "LOCKWIPE_CERTIFICATE_ID="):
        ids += re.findall(r"LOCKWIPE_CERTIFICATE_ID=([0-9a-f-]{36})", line)
    return ids


def check_common(cert, daemon, user, vault, trigger):
    assert re.fullmatch(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", cert["id"]), cert["id"]
    assert "NIST SP 800-88" in cert["standard"]
    assert cert["host"]["hostname"] == socket.gethostname()
    machine_id = open("/etc/machine-id").read().strip() if os.path.exists("/etc/machine-id") else ""
    if re.fullmatch(r"[0-9a-f]{32}", machine_id):
        # App-specific: a 32-hex-digit id that is not the machine id itself.
        assert re.fullmatch(r"[0-9a-f]{32}", cert["host"]["machine_id"]) and cert["host"]["machine_id"] != machine_id
    # at_rest: what a copy of the disk got until the wipe; on this machine (no TPM2) a
    # permission vault's files ("none") or the host-key-sealed machine key ("host").
    protection = cert["subject"]["protection"]
    assert cert["subject"] == {
        "user": user.name, "uid": user.uid, "directories": [str(vault)], "protection": protection,
        "at_rest": "host" if protection == "encrypted" else "none"}, cert["subject"]
    assert cert["request"]["trigger"] == trigger
    assert cert["tool"]["name"] == "lockwiped"
    version = json.loads(daemon.ok("status", "--json").out)["version"]
    assert cert["tool"]["version"] == version
    assert cert["started"] <= cert["finished"]
    assert cert["request"]["requested_at"] <= cert["started"]
    if MEDIA_PENDING: return
    assert [m["path"] for m in cert["media"]] == [str(vault)], cert["media"]


def test_overwrite_wipe_certificate_fields_journal_and_history(daemon, make_user):
    user = make_user()
    vault = daemon.data / "vault"
    (vault / "sub").mkdir(parents=True)
    for i in range(5):
        (vault / "sub" / f"f{i}.bin").write_bytes(os.urandom(3000))
    (vault / "top.txt").write_text("work data")
    (daemon.outside / "canary.txt").write_bytes(os.urandom(4000))
    os.symlink(daemon.outside / "canary.txt", vault / "escape")
    before = fingerprint(daemon.outside)
    daemon.ok("register", "--user", user.name, "--dir", str(vault))

    r = daemon.ok("wipe", "--user", user.name, "--yes")
    assert fingerprint(daemon.outside) == before
    cert = certificate(daemon, user)
    check_common(cert, daemon, user, vault, "admin")
    assert cert["request"]["requester"]["peer_uid"] == 0
    assert cert["request"]["attempt"] == 1
    assert cert["method"]["type"] == "file-level overwrite (1 pass, random)", cert["method"]
    assert cert["method"]["technique"] == "file-level overwrite"
    assert cert["method"]["passes"] == 1 and cert["method"]["pattern"] == "random"
    assert "would not call this media Clear" in cert["method"]["note"]
    assert "cipher" not in cert["method"] or cert["method"]["cipher"] is None
    assert cert["result"] == "complete" and cert["exceptions"] == []
    assert cert["files_overwritten"] == 6 and cert["entries_removed"] == 8, cert
    assert cert["verification"] == [
        {"check": "vault-empty", "passed": True, "detail": "re-walked: every vault directory is empty"}]
    assert os.listdir(vault) == []

    # The journal's wipe entry names it; the history's wipe event carries it whole.
    assert journal_certificate_ids(daemon, user) == [cert["id"]], daemon.log_tail()
    events = json.loads(daemon.ok("history", "--user", user.name, "--json").out)["events"]
    wipes = [e for e in events if e["kind"] == "wipe"]
    assert len(wipes) == 1 and wipes[0]["certificate"] == cert, wipes
    assert all("certificate" not in e for e in events if e["kind"] != "wipe")

    # For people: the same facts, in lines.
    text = daemon.ok("certificate", "--user", user.name).out
    assert f"Certificate of sanitization {cert['id']}" in text
    assert "method type:  file-level overwrite (1 pass, random)" in text
    assert "verified:     yes, vault-empty" in text
    # It is kept after the registration is gone (an audit record).
    daemon.ok("unregister", "--user", user.name)
    daemon.restart()
    assert certificate(daemon, user) == cert


def test_crypto_erase_certificate_says_purge_with_cipher_and_verifies_the_key(daemon, make_user):
    user = make_user()
    with encrypted_fs(daemon) as fs:
        vault = fs / "v"
        register_encrypted(daemon, user, vault)
        set_passcode(daemon, user)
        put_files(user, vault)
        dry = daemon.ok("wipe", "--user", user.name, "--dry-run").out
        assert f"{user.name}: {vault}: would crypto-erase: destroy the vault key, then unlink" in dry, dry
        assert "caveat" not in dry, dry
        daemon.ok("wipe", "--user", user.name, "--yes")
        cert = certificate(daemon, user)
        check_common(cert, daemon, user, vault, "admin")
        assert cert["subject"]["protection"] == "encrypted"
        m = cert["method"]
        assert m["type"] == "Purge" and m["technique"] == "cryptographic erase", m
        assert m["cipher"].startswith("AES-256-XTS") and m["key_bits"] == 512, m
        assert cert["result"] == "complete"
        checks = {v["check"]: v for v in cert["verification"]}
        assert set(checks) == {"key-absent", "wrapped-key-absent", "vault-empty"}, checks
        assert all(v["passed"] for v in checks.values()), checks
        assert MEDIA_PENDING or cert["media"][0]["filesystem"] == "ext4", cert["media"]


def test_incomplete_wipe_gets_a_certificate_with_every_exception_and_the_retry_another(daemon, make_user):
    user = make_user()
    vault = daemon.data / "vault"
    mnt = vault / "mnt"
    mnt.mkdir(parents=True)
    (vault / "mine.txt").write_text("vault data")
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "lockwipe-cert-test", str(mnt)], check=True)
    try:
        (mnt / "other.txt").write_text("on the other file system")
        daemon.ok("register", "--user", user.name, "--dir", str(vault))
        r = daemon.ctl("wipe", "--user", user.name, "--yes")
        assert r.code == 1 and "INCOMPLETE" in r.out, r.describe()
        first = certificate(daemon, user)
        assert first["result"] == "incomplete"
        assert [e["path"] for e in first["exceptions"]] == [str(mnt)], first["exceptions"]
        assert "mount point" in first["exceptions"][0]["reason"]
        walk = [v for v in first["verification"] if v["check"] == "vault-empty"]
        assert len(walk) == 1 and walk[0]["passed"] is False and "entries left" in walk[0]["detail"], walk
        text = daemon.ok("certificate", "--user", user.name).out
        assert "result:       INCOMPLETE" in text and f"exception:    {mnt}:" in text
        assert "verified:     NO, vault-empty" in text
    finally:
        subprocess.run(["umount", str(mnt)], capture_output=True)
    daemon.ok("wipe", "--user", user.name, "--yes")
    second = certificate(daemon, user)
    assert second["id"] != first["id"] and second["result"] == "complete"
    assert second["request"]["attempt"] == 2
    assert second["request"]["requested_at"] == first["request"]["requested_at"]
    # Each attempt keeps its own; --id shows an older one.
    assert certificate(daemon, user, "--id", first["id"]) == first
    assert journal_certificate_ids(daemon, user) == [first["id"], second["id"]]
    events = json.loads(daemon.ok("history", "--user", user.name, "--json").out)["events"]
    assert [e["certificate"]["id"] for e in events if "certificate" in e] == [first["id"], second["id"]]
    assert [e["kind"] for e in events if "certificate" in e] == ["wipe-incomplete", "wipe"]


def test_who_may_read_a_certificate(daemon, make_user):
    owner, other = make_user(), make_user()
    vault = daemon.data / "vault"
    vault.mkdir()
    (vault / "f").write_text("x")
    os.chown(vault, owner.uid, owner.gid)
    daemon.ok("register", "--user", owner.name, "--dir", str(vault))
    missing = daemon.ctl("certificate", "--user", owner.name)
    assert missing.code == 1 and f"no wipe of user {owner.name} has a certificate" in missing.err, missing.describe()
    daemon.ok("wipe", "--user", owner.name, "--yes")
    mine = certificate(daemon, owner, as_user=owner)
    assert mine["subject"]["user"] == owner.name
    refused = daemon.ctl("certificate", "--user", owner.name, user=other)
    assert refused.code == 77 and "only administrators" in refused.err, refused.describe()
    unknown = daemon.ctl("certificate", "--user", owner.name, "--id", "00000000-0000-4000-8000-000000000000")
    assert unknown.code == 1 and "no certificate 00000000-0000-4000-8000-000000000000" in unknown.err, unknown.describe()


def btrfs_unavailable():
    if os.geteuid() != 0:
        return "needs root to loop-mount a btrfs image"
    if shutil.which("mkfs.btrfs") is None:
        return "mkfs.btrfs (btrfs-progs) is not installed; scripts/install-deps installs it"
    with open("/proc/filesystems") as f:
        if "btrfs" not in f.read():
            subprocess.run(["modprobe", "btrfs"], capture_output=True)
    with open("/proc/filesystems") as f:
        if "btrfs" not in f.read():
            return "this kernel has no btrfs (not in /proc/filesystems)"
    return None


@contextlib.contextmanager
def btrfs_fs(daemon, size="256M"):
    """A btrfs filesystem mounted at <daemon root>/btrfs (mode 0755), from a loop image."""
    why = btrfs_unavailable()
    if why:
        pytest.skip(why)
    with loop_filesystem(daemon.root, "btrfs", ["mkfs.btrfs", "-q", "-f"], size) as mnt:
        yield mnt


def test_btrfs_snapshot_is_named_as_a_caveat_in_the_report_certificate_and_status(daemon, make_user):
    """An overwrite cannot reach the blocks a snapshot keeps: the wipe still completes
    (the vault is empty), and every place that reports it says so. The snapshot really
    does keep the old data, which is why the caveat exists."""
    user = make_user()
    with btrfs_fs(daemon) as fs:
        subprocess.run(["btrfs", "-q", "subvolume", "create", str(fs / "home")], check=True)
        vault = fs / "home" / "alice"
        vault.mkdir()
        secret = os.urandom(64 * 1024)
        (vault / "notes.bin").write_bytes(secret)
        (vault / "sub").mkdir()
        (vault / "sub" / "more.txt").write_text("more work data")
        outside = fs / "home" / "outside.txt"
        outside.write_bytes(os.urandom(3000))
        os.sync()
        subprocess.run(["btrfs", "-q", "subvolume", "snapshot", "-r", str(fs / "home"), str(fs / "snap-1")], check=True)
        before = fingerprint(fs / "snap-1")
        outside_before = outside.read_bytes()
        daemon.ok("register", "--user", user.name, "--dir", str(vault))

        # Said before anything is touched.
        state = tree_state(fs)
        dry = daemon.ok("wipe", "--user", user.name, "--dry-run").out
        assert f"{user.name}: {vault}: caveat (snapshots): 1 snapshot" in dry, dry
        assert f"{user.name}: {vault}: caveat (copy-on-write)" in dry, dry
        assert tree_state(fs) == state

        r = daemon.ok("wipe", "--user", user.name, "--yes")
        assert os.listdir(vault) == []
        assert outside.read_bytes() == outside_before
        assert "caveat (snapshots)" in r.out and "caveat (copy-on-write)" in r.out, r.describe()
        # The snapshot is not ours to touch, and it still holds the data.
        assert fingerprint(fs / "snap-1") == before
        assert (fs / "snap-1" / "alice" / "notes.bin").read_bytes() == secret

        report = daemon.registration(user)["wipe"]
        kinds = {c["kind"] for c in report["caveats"]}
        assert {"copy-on-write", "snapshots"} <= kinds, report["caveats"]
        snap = [c for c in report["caveats"] if c["kind"] == "snapshots"][0]
        assert snap["path"] == str(vault) and "1 snapshot" in snap["detail"], snap
        assert report["media"][0]["filesystem"] == "btrfs", report["media"]
        cert = certificate(daemon, user)
        assert cert["caveats"] == report["caveats"] and cert["media"] == report["media"]
        assert cert["result"] == "complete"
        status = daemon.ok("status").out
        # Flash under the loop image adds "non-rotational": every kind found is listed.
        assert f"{user.name}: last wipe's caveats: {', '.join(sorted(kinds))}" in status, status
        line = daemon.log_lines("LOCKWIPE_ACTION=wipe", f"LOCKWIPE_USER={user.name}", "LOCKWIPE_CERTIFICATE_ID=")[-1]
        assert f"LOCKWIPE_CAVEATS={','.join(sorted(kinds))}" in line, line


def tree_state(path):
    """fingerprint() plus each entry's inode, mtime and ctime (a chmod, chown or
    rewrite changes ctime): what a dry run must leave exactly as it was."""
    state = fingerprint(path)
    for dirpath, dirnames, filenames in os.walk(path):
        for name in [""] + dirnames + filenames:
            p = os.path.join(dirpath, name) if name else dirpath
            st = os.lstat(p)
            state[("stat", p)] = (st.st_ino, st.st_mtime_ns, st.st_ctime_ns, st.st_nlink)
    return state


def test_wipe_dry_run_changes_nothing_and_says_what_a_wipe_would_do(daemon, make_user):
    user, other = make_user(), make_user()
    vault = daemon.data / "vault"
    (vault / "sub").mkdir(parents=True)
    (vault / "a.bin").write_bytes(os.urandom(5000))
    (vault / "sub" / "b.bin").write_bytes(os.urandom(7000))
    (vault / "sub" / "c.txt").write_text("work")
    os.symlink("/etc/passwd", vault / "link")
    os.mkfifo(vault / "fifo")
    mnt = vault / "mnt"
    mnt.mkdir()
    daemon.ok("register", "--user", user.name, "--dir", str(vault))
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "lockwipe-dry-run", str(mnt)], check=True)
    try:
        (mnt / "elsewhere.txt").write_text("on another file system")
        history_before = daemon.ok("history", "--user", user.name, "--json").out
        before = tree_state(vault)

        r = daemon.ok("wipe", "--user", user.name, "--dry-run")  # no --yes, no terminal: nothing to confirm
        assert tree_state(vault) == before, "the dry run changed the vault"
        assert daemon.state_of(user) == "active"
        assert daemon.ok("history", "--user", user.name, "--json").out == history_before
        assert not daemon.log_lines("LOCKWIPE_ACTION=wipe", f"LOCKWIPE_USER={user.name}")
        lines = r.out.splitlines()
        # a.bin, sub, sub/b.bin, sub/c.txt, link, fifo; mnt is another file system's.
        assert lines[0] == f"{user.name}: {vault}: would overwrite 3 files (11.7 KiB, 1 random pass) and unlink 6 entries (1 directory, 2 other)", r.out
        assert f"{user.name}: {vault}: would NOT enter {mnt} (a mount point of another file system): the wipe would be incomplete" in lines, r.out
        assert lines[-1] == "dry run: nothing was changed"

        p = json.loads(daemon.ok("wipe", "--user", user.name, "--dry-run", "--json").out)["previews"]
        assert len(p) == 1
        p = p[0]
        assert (p["user"], p["path"], p["method"], p["passes"]) == (user.name, str(vault), "overwrite", 1), p
        assert (p["files"], p["directories"], p["other_entries"]) == (3, 1, 2), p
        assert p["bytes"] == 5000 + 7000 + 4 and p["mount_points"] == [str(mnt)] and p["partial"] is False, p
        fs = subprocess.run(["stat", "-f", "-c", "%T", str(vault)], capture_output=True, text=True).stdout.strip()
        assert p["media"]["path"] == str(vault) and p["media"]["filesystem"] == fs.replace("ext2/ext3", "ext4"), (p["media"], fs)
        assert tree_state(vault) == before

        # Who may wipe may preview; nobody else.
        refused = daemon.ctl("wipe", "--user", user.name, "--dry-run", user=other)
        assert refused.code == 77, refused.describe()
        bad = daemon.ctl("wipe", "--user", user.name, "--json")
        assert bad.code == 2 and "--json goes with --dry-run" in bad.err, bad.describe()
    finally:
        subprocess.run(["umount", str(mnt)], capture_output=True)


def recreate_account(old):
    """Deletes `old`'s account and creates a new, unrelated one with the same name and
    another uid (useradd alone may hand the freed uid out again); make_user's teardown
    removes it by name."""
    import pwd
    from host_helpers import User
    uid = old.uid + 1
    while True:
        try:
            pwd.getpwuid(uid)
            uid += 1
        except KeyError:
            break
    subprocess.run(["userdel", old.name], check=True, capture_output=True)
    subprocess.run(["useradd", "--no-create-home", "--shell", "/usr/sbin/nologin", "-u", str(uid), old.name],
                   check=True, capture_output=True)
    new = User(old.name)
    assert new.name == old.name and new.uid != old.uid
    return new


def test_a_new_account_with_an_old_name_sees_nothing_of_the_old_ones(daemon, make_user):
    """History and certificates belong to a uid and a registration, not a name: after an
    account was wiped, unregistered and deleted, a new, unrelated account that gets its
    name reads neither its history nor its certificate; the old account could, and root
    still does, with the uid and registration each belongs to."""
    old = make_user()
    vault = daemon.make_vault(old, "work")
    daemon.ok("register", "--user", old.name, "--dir", vault)
    registration_id = daemon.registration(old).get("registration_id")
    daemon.ok("wipe", "--user", old.name, "--yes")
    cert = certificate(daemon, old)
    daemon.ok("unregister", "--user", old.name)

    # While the account exists, its history and certificate are its own to read.
    own = json.loads(daemon.ok("history", "--json", user=old).out)["events"]
    assert [e["kind"] for e in own if e["kind"] in ("register", "wipe", "unregister")] == ["register", "wipe", "unregister"], own
    assert certificate(daemon, old, as_user=old)["id"] == cert["id"]

    new = recreate_account(old)
    r = daemon.ok("history", "--json", user=new)
    assert json.loads(r.out)["events"] == [], r.out
    r = daemon.ok("history", "--user", new.name, "--json", user=new)
    assert json.loads(r.out)["events"] == [], r.out
    for extra, answer in (((), f"no wipe of user {new.name} has a certificate"), (("--id", cert["id"]), f"no certificate {cert['id']} for user {new.name}")):
        r = daemon.ctl("certificate", "--user", new.name, "--json", *extra, user=new)
        assert r.code == 1 and r.out == "", r.describe()
        assert answer in r.err and str(vault) not in r.err, r.describe()

    # Root sees all of it, each event with its registration's uid and id (as the old
    # account saw its own).
    assert all(e.get("uid") == old.uid and e.get("registration_id") == registration_id for e in own), own
    assert re.fullmatch(r"[0-9a-f]{32}", registration_id or ""), registration_id
    events = daemon.history(new)
    kinds = [e["kind"] for e in events]
    assert kinds[0] == "register" and kinds[-1] == "unregister" and "wipe" in kinds, events
    assert all(e["uid"] == old.uid and e["registration_id"] == registration_id for e in events), events
    assert certificate(daemon, new)["id"] == cert["id"]
    assert certificate(daemon, new)["subject"]["uid"] == old.uid

    # The new account's own registration is its own, and only that.
    daemon.ok("register", "--user", new.name, "--dir", daemon.make_vault(new, "mine"))
    mine = json.loads(daemon.ok("history", "--json", user=new).out)["events"]
    assert [e["kind"] for e in mine] == ["register"] and mine[0]["uid"] == new.uid, mine
    r = daemon.ctl("certificate", "--user", new.name, user=new)
    assert r.code == 1 and "no wipe of user" in r.err, r.describe()


def test_history_of_a_database_from_before_owners_stays_with_root(daemon, make_user):
    """A state database from before events were attributed (no uid or registration id on
    them; made here by taking them off and forgetting the migration): at the next start
    what can be known is attributed (a registration that still exists, from its own
    `register` event on) and the rest is root's only, so a re-created account reads
    nothing of the old one's while a user still registered keeps her own history."""
    import sqlite3
    old, staying = make_user(), make_user()
    daemon.ok("register", "--user", old.name, "--dir", daemon.make_vault(old, "old"))
    daemon.ok("wipe", "--user", old.name, "--yes")
    cert = certificate(daemon, old)
    daemon.ok("unregister", "--user", old.name)
    daemon.ok("register", "--user", staying.name, "--dir", daemon.make_vault(staying, "staying"))
    daemon.ok("lock", "--user", staying.name)

    daemon.stop()
    db = sqlite3.connect(str(daemon.state_dir / "state.sqlite"))
    with db:
        # What v18-event-repeats added goes too: that database is older than it.
        db.execute("DROP INDEX events_registration")
        db.execute("ALTER TABLE events DROP COLUMN repeats")
        db.execute("ALTER TABLE events DROP COLUMN last_time")
        db.execute("DELETE FROM grdb_migrations WHERE identifier = 'v18-event-repeats'")
        db.execute("DROP INDEX events_owner")
        for table in ("events", "certificates"):
            db.execute(f"ALTER TABLE {table} DROP COLUMN uid")
            db.execute(f"ALTER TABLE {table} DROP COLUMN registration_id")
        db.execute("DELETE FROM grdb_migrations WHERE identifier = 'v11-event-owners'")
    db.close()
    new = recreate_account(old)
    daemon.start()

    assert json.loads(daemon.ok("history", "--json", user=new).out)["events"] == []
    r = daemon.ctl("certificate", "--user", new.name, user=new)
    assert r.code == 1 and f"no wipe of user {new.name} has a certificate" in r.err, r.describe()
    mine = json.loads(daemon.ok("history", "--json", user=staying).out)["events"]
    assert [e["kind"] for e in mine] == ["register", "lock"] and all(e["uid"] == staying.uid for e in mine), mine
    # Root: everything, the old registration's events without an owner.
    events = daemon.history(new)
    assert events and "wipe" in [e["kind"] for e in events] and all("uid" not in e for e in events), events
    assert certificate(daemon, new)["id"] == cert["id"]
