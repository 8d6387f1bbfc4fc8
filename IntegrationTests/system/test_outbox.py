"""The outbox of a vault (issue 44, docs/outbox.md), without a policy server: what a seal
takes from a hostile user's outbox and what it leaves, the hooks and status, the
configuration's refusals, and the offline policy's wipe, which leaves nothing of the
outbox on the device. The uploads through the shipped nginx server are in
test_nginx_server.py."""

import json
import os
import re
import stat
import subprocess

from daemon_harness import config_text
from host_helpers import as_user_argv, child_env, fingerprint, loop_filesystem, run_as, wait_until

MARK = b"LWOUTBOXPENDING"  # in every pending record: never on the device after an offline wipe
KEEP = b"LWOUTBOXKEEP"  # outside the vault: must survive, and be found


def organisation_key(bins, root):
    key = root / "organisation.key"
    r = subprocess.run([str(bins.lockwipectl), "recovery-key", "new", str(key)], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r
    return key, next(line for line in r.stdout.splitlines() if line.startswith("recovery_public_key"))


def outbox_config(line, lock=0, wipe=0, extra=""):
    return config_text(lock=lock, wipe=wipe, extra=f'\n[keys]\n{line}\n\n[outbox]\ndirectory = "outbox"\n' + extra)


def give(user, path):
    for dirpath, dirnames, filenames in os.walk(path):
        for n in dirnames + filenames:
            os.lchown(os.path.join(dirpath, n), user.uid, user.gid)
    os.lchown(path, user.uid, user.gid)


def kept(d):
    return sorted((d.state_dir / "outbox").glob("*.lwo")) if (d.state_dir / "outbox").exists() else []


def opened(d, path, key):
    out = d.root / f"opened-{path.stem}"
    r = subprocess.run([str(d.bins.lockwipectl), "outbox", "open", str(path), "--key-file", str(key), "--output", str(out)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r
    return {"/" + str(p.relative_to(out)): p.read_bytes() for p in out.rglob("*") if p.is_file()}


def test_a_seal_takes_only_her_own_files_and_follows_nothing_she_planted(make_daemon, make_user, bins, tmp_path):
    """A hostile user's outbox: a symlink out of the vault, a hard link to another user's
    file, a FIFO, a tree deeper than 16 directories. The seal takes her regular files,
    follows and blocks on nothing, changes nothing outside the vault, and says what it
    skipped; the hooks are told where the outbox is and what became of it."""
    key, line = organisation_key(bins, tmp_path)
    hook = """#!/bin/sh
printf '%s|%s|%s\\n' "$1" "$LOCKWIPE_OUTBOX" "$LOCKWIPE_OUTBOX_SEALED" >> "$(dirname "$0")/../hooks.log"
"""
    d = make_daemon(config=outbox_config(line), hooks={"record": hook})
    alice, other = make_user(), make_user()
    vault = d.make_vault(alice, "alice", files={"work.txt": b"not in the outbox\n"})
    d.ok("register", "--user", alice.name, "--dir", vault)
    box = vault / "outbox"
    (box / "sub").mkdir(parents=True)
    records = {f"/{(box / n).relative_to('/')}": f"record {n}\n".encode() * 50 for n in ("a.json", "sub/b.json")}
    for path, body in records.items():
        open(path, "wb").write(body)
    deep = box / "deep"
    p = deep
    for i in range(20):
        p = p / f"d{i}"
    p.mkdir(parents=True)
    (p / "too-deep.json").write_bytes(b"deep\n")
    give(alice, box)
    # What she plants: none of it may be read or changed.
    d.outside.joinpath("canary.txt").write_bytes(KEEP + b" outside\n")
    theirs = d.outside / "theirs.txt"
    theirs.write_bytes(b"another user's file\n")
    os.chown(theirs, other.uid, other.gid)
    os.symlink(d.outside / "canary.txt", box / "escape.json")
    os.link(theirs, box / "linked.json")
    os.mkfifo(box / "pipe.json")
    for name in ("escape.json", "pipe.json"):
        os.lchown(box / name, alice.uid, alice.gid)
    outside = fingerprint(d.outside)

    status = d.registration(alice)["outbox"]
    assert status["directory"] == "outbox" and status["pending_files"] == 2, status
    assert status["pending_bytes"] == sum(map(len, records.values())) and status["last_sealed"] is None, status

    r = d.ok("lock", "--user", alice.name)
    assert d.state_of(alice) == "locked", r.describe()
    (sealed,) = kept(d)
    assert stat.S_IMODE(sealed.stat().st_mode) == 0o600 and sealed.stat().st_uid == 0
    assert opened(d, sealed, key) == records
    assert fingerprint(d.outside) == outside
    event = next(e for e in d.history(alice) if e["kind"] == "outbox-sealed")
    assert "sealed 2 file(s)" in event["detail"] and "skipped" in event["detail"], event
    # No server: kept, and status says so.
    status = d.registration(alice)["outbox"]
    assert status["sealed_kept"] == 1 and status["last_sealed"] and status["pending_files"] is None, status
    assert "kept for the server" in d.ok("status", "--user", alice.name).out

    hooks = (d.root / "hooks.log").read_text().splitlines()
    will = next(h for h in hooks if h.startswith("willLock|"))
    did = next(h for h in hooks if h.startswith("didLock|"))
    assert will == f"willLock|{box}|", hooks
    assert did.startswith(f"didLock|{box}|sealed 2 file(s)"), hooks

    # The sealed copy and the locked outbox are nobody else's to read.
    r = run_as(other, ["cat", str(sealed)])
    assert r.returncode != 0 and r.stdout == ""


def test_unregister_seals_the_outbox_and_keeps_it_without_a_server(make_daemon, make_user, bins, tmp_path):
    key, line = organisation_key(bins, tmp_path)
    d = make_daemon(config=outbox_config(line))
    bob = make_user()
    vault = d.make_vault(bob, "bob", files={"outbox/order-1.json": b'{"order": 1}\n'})
    d.ok("register", "--user", bob.name, "--dir", vault)
    r = d.ok("unregister", "--user", bob.name)
    assert "outbox sealed 1 file(s)" in r.out, r.describe()
    (sealed,) = kept(d)
    assert list(opened(d, sealed, key).values()) == [b'{"order": 1}\n']
    # The vault is left as it was: unregister takes nothing away.
    assert (vault / "outbox" / "order-1.json").read_bytes() == b'{"order": 1}\n'


def test_an_outbox_needs_a_recipient_and_a_path_inside_the_vault(make_daemon):
    d = make_daemon(config=config_text(extra='\n[outbox]\ndirectory = "../elsewhere"\n'), start=False)
    r = subprocess.run([str(d.bins.lockwiped), "--check-config", "--config", str(d.config)], stdin=subprocess.DEVNULL,
                       capture_output=True, text=True, timeout=30, env=child_env())
    assert r.returncode == 1 and "outbox.directory: must stay inside the vault" in r.stderr, r
    d.write_config(config_text(extra='\n[outbox]\ndirectory = "outbox"\noffline_wipe = "shred"\n'))
    r = subprocess.run([str(d.bins.lockwiped), "--check-config", "--config", str(d.config)], stdin=subprocess.DEVNULL,
                       capture_output=True, text=True, timeout=30, env=child_env())
    assert r.returncode == 1, r
    assert re.search(r"lockwiped.toml:\d+: outbox.directory: an outbox is sealed to the organisation: set \[outbox\] recipient_public_key", r.stderr), r.stderr
    assert 'outbox.offline_wipe: must be "destroy" or "keep", not "shred"' in r.stderr, r.stderr


def test_an_offline_wipe_leaves_nothing_of_the_outbox_on_the_device(make_daemon, make_user, bins, tmp_path):
    """The offline policy's wipe with the default `offline_wipe = "destroy"` (SAP's wipe):
    nothing is sealed, the sealed copy an earlier lock kept is destroyed, and a raw read of
    the vault's file system finds no pending record."""
    key, line = organisation_key(bins, tmp_path)
    d = make_daemon(config=outbox_config(line, lock=2, wipe=5), faketime="+0")
    carol = make_user()
    with loop_filesystem(d.root, "outboxfs", ["mkfs.ext4", "-q", "-F", "-b", "4096"], "64M") as fs:
        image = d.root / "outboxfs.img"
        (fs / "outside").mkdir()
        (fs / "outside" / "canary.txt").write_bytes(KEEP + b" canary " * 100)
        vault = fs / "carol"
        (vault / "outbox").mkdir(parents=True)
        for i in range(20):
            (vault / "outbox" / f"r{i}.json").write_bytes((MARK + b"-%02d pending change " % i) * 40)
        give(carol, vault)
        os.sync()
        outside = fingerprint(fs / "outside")
        d.ok("register", "--user", carol.name, "--dir", vault)
        # Her lock and her return: the lock sealed a copy, kept for a server that never answers.
        d.ok("lock", "--user", carol.name)
        assert len(kept(d)) == 1
        d.ok("unlock", "--user", carol.name)
        # Days offline: the policy locks and wipes at start.
        d.restart(faketime="+6d")
        wait_until(lambda: d.state_of(carol) == "wiped", 30, "the offline wipe did not happen", details=d.log_tail)
        assert kept(d) == [], "the sealed copy was kept past an offline wipe with offline_wipe = destroy"
        kinds = [e["kind"] for e in d.history(carol)]
        assert "outbox-destroyed" in kinds and kinds.count("outbox-sealed") == 1, kinds
        cert = json.loads(d.ok("certificate", "--user", carol.name, "--json").out)
        assert cert["outbox"]["handling"] == "destroyed", cert["outbox"]
        assert fingerprint(fs / "outside") == outside
        subprocess.run(["umount", str(fs)], check=True)
        data = image.read_bytes()
    assert data.count(KEEP) >= 1, "the control is not on the device"
    assert data.count(MARK) == 0, f"{data.count(MARK)} pending records are still on the device"


def test_a_registration_names_its_own_outbox(make_daemon, make_user, bins, tmp_path):
    key, line = organisation_key(bins, tmp_path)
    d = make_daemon(config=config_text(extra=f"\n[keys]\n{line}\n"))
    erin, frank = make_user(), make_user()
    vault = d.make_vault(erin, "erin", files={"app/box/visit-7.json": b'{"visit": 7}\n', "outbox/not-this.json": b"no\n"})
    r = d.ctl("register", "--user", erin.name, "--dir", vault, "--outbox", "../box")
    assert r.code == 2 and "--outbox must stay inside the vault" in r.err, r.describe()
    d.ok("register", "--user", erin.name, "--dir", vault, "--outbox", "app/box")
    status = d.registration(erin)["outbox"]
    assert status["directory"] == "app/box" and status["pending_files"] == 1, status
    d.ok("lock", "--user", erin.name)
    (sealed,) = kept(d)
    assert opened(d, sealed, key) == {f"{vault}/app/box/visit-7.json": b'{"visit": 7}\n'}
    # Without the organisation's key configured, an outbox cannot be asked for.
    d2 = make_daemon()
    other = d2.make_vault(frank, "frank")
    r = d2.ctl("register", "--user", frank.name, "--dir", other, "--outbox", "box")
    assert r.code != 0 and "an outbox is sealed to the organisation" in r.out + r.err, r.describe()
