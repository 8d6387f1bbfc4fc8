"""Offline codes (issue 30, docs/offline-codes.md): a machine offline past its lock
threshold (libfaketime), a challenge read from the CLI, the helpdesk's response computed
by `lockwipectl offline-code respond` from a fleet-secret file, the lock lifted once; the
same response refused again; responses for another machine, registration or action,
or under another fleet secret, refused; wrong responses backing off and never wiping; an
extension past the maximum refused; all of it in the history and the journal.

The challenge format is read and written here independently of lockwipe's Swift code
(base 31 over the alphabet below, two check digits), to forge the "other" challenges.
"""

import hashlib
import hmac
import time

from daemon_harness import config_text
from host_helpers import can_list, fingerprint, owner_of

ALPHABET = "23456789ABCDEFGHJKMNPQRSTUVWXYZ"
ID_CHALLENGE = "9d044ce2e23a4d8e955fd6e380ece4d8"
ID_ACCEPTED = "e18b5ef7bf8b4b9b8e8bc58bf58636bd"
ID_REFUSED = "3cc3f7123d074828a313f128b6417438"
ID_PROVISIONED = "51a9f4f7c87f4366bc4766a301aad30f"
ID_UNLOCKED = "37e6cf6fa97441dca8750c5e23f7c720"

# ---- the challenge format, written out independently


def _checks(digits, count):
    n = len(digits) + count
    s0 = sum(digits) % 31
    s1 = sum((i + 1) * v for i, v in enumerate(digits)) % 31
    if count == 1:
        return digits + [(-s1) * pow(n, -1, 31) % 31]
    c2 = ((n - 1) * s0 - s1) % 31
    return digits + [(-s0 - c2) % 31, c2]


def decode(challenge):
    values = [ALPHABET.index(c) for c in challenge.replace("-", "")]
    assert len(values) == 20 and _checks(values[:18], 2) == values, challenge
    x = 0
    for v in values[:18]:
        x = x * 31 + v
    return {"machine": x >> 48, "registration": (x >> 28) & 0xFFFFF, "days": (x >> 20) & 0xFF, "counter": x & 0xFFFFF}


def encode(machine, registration, days, counter):
    x = (((machine << 20 | registration) << 8 | days) << 20) | counter
    digits = []
    for _ in range(18):
        digits.append(x % 31)
        x //= 31
    s = "".join(ALPHABET[v] for v in _checks(digits[::-1], 2))
    return "-".join(s[i:i + 4] for i in range(0, 20, 4))


def machine_id(raw):
    return int.from_bytes(hashlib.sha256(b"lockwipe offline-code machine\0" + raw.strip().encode()).digest()[:5], "big")


# ---- helpers


def last_line(result):
    lines = result.out.strip().splitlines()
    assert lines, result.describe()
    return lines[-1].strip()


def respond(d, secret_file, challenge):
    # No socket, no daemon needed: run it with a socket path that does not exist.
    r = d.ctl("offline-code", "respond", "--fleet-key-file", secret_file, challenge, socket=False,
              env={"LOCKWIPE_SOCKET": str(d.root / "no-such-socket")})
    assert r.code == 0, r.describe()
    return last_line(r)


def setup(d, make_user):
    secret = d.root / "fleet.key"
    secret.write_text("the fleet secret of this test, 32+ bytes long\n")
    secret.chmod(0o600)
    user = make_user()
    vault = d.make_vault(user, "vault")
    d.outside.joinpath("canary.txt").write_text("outside the vault\n")
    (vault / "link-out").symlink_to(d.outside / "canary.txt")
    d.ok("register", "--user", user.name, "--dir", vault)
    return secret, user, vault


def kinds(d, user):
    return [e["kind"] for e in d.history(user)]


def test_a_helpdesk_code_lifts_an_offline_lock_once(make_daemon, make_user):
    d = make_daemon(config=config_text(lock=2, wipe=20), faketime="+0")
    secret, user, vault = setup(d, make_user)
    canaries = fingerprint(d.outside)

    # Not provisioned yet: status says so, a challenge is refused in words.
    assert d.status()["offline_codes"]["provisioned"] is False
    r = d.ctl("offline-code", "challenge", user.name)
    assert r.code != 0 and "not provisioned" in r.err, r.describe()

    r = d.ok("offline-code", "provision", "--fleet-key-file", secret)
    this_machine = "%010x" % machine_id(open("/etc/machine-id").read())
    assert last_line(r) == this_machine, r.describe()
    assert d.status()["offline_codes"] == {"provisioned": True, "machine": this_machine, "provision_epoch": 0}
    # Not to be taken for the machine id a certificate names (issue 42: two "machine" ids).
    human = d.ok("status").out
    assert f"challenges name this machine {this_machine}, a hash of /etc/machine-id" in human, human
    # Sealed with systemd's credentials (the host key here: no TPM), never in the clear.
    key_file = d.state_dir / "offline-code.key.cred"
    assert not (d.state_dir / "offline-code.key").exists()
    assert key_file.stat().st_mode & 0o777 == 0o600 and key_file.stat().st_uid == 0
    assert secret.read_bytes().strip() not in key_file.read_bytes(), "the fleet secret was stored"
    assert d.log_lines(f"MESSAGE_ID={ID_PROVISIONED}"), d.log_tail()

    # Three days offline with lock after two: locked at start-up.
    d.restart(faketime="+3d")
    reg = d.registration(user)
    assert reg["state"] == "locked" and reg["lock_trigger"] == "offline", reg
    assert not can_list(user, vault)

    # The user asks for a challenge: it names this machine, her registration, "lift".
    r = d.ctl("offline-code", "challenge", user=user)
    assert r.code == 0, r.describe()
    challenge = last_line(r)
    fields = decode(challenge)
    assert fields["machine"] == int(this_machine, 16) and fields["days"] == 0, fields
    assert len(challenge) <= 30

    # A misread group is named by the helpdesk's command.
    wrong = challenge[:5] + ("2" if challenge[5] != "2" else "3") + challenge[6:]
    r = d.ctl("offline-code", "respond", "--fleet-key-file", secret, wrong, socket=False)
    assert r.code == 2 and "group 2 is wrong" in r.err, r.describe()

    code = respond(d, secret, challenge)
    assert len(code.replace("-", "")) <= 10 and not set(code) & set("01OIl"), code
    # One misread character of the response is caught before lockwiped sees it, and said
    # to be one (issue 42: "more than one character is wrong").
    misread = ("3" if code[0] != "3" else "4") + code[1:]
    r = d.ctl("offline-code", "enter", misread, user=user)
    assert r.code == 2 and "a character was misread" in r.err and "more than one" not in r.err, r.describe()
    r = d.ctl("offline-code", "enter", code, user=user)
    assert r.code == 0, r.describe() + d.log_tail()
    assert "unlocked with the offline code" in last_line(r), r.describe()
    reg = d.registration(user)
    assert reg["state"] == "active", reg
    assert can_list(user, vault), "the vault is still closed to its user after the code"
    assert reg["lease"] and reg["lease"]["source"] == "offline-code" and reg["lease"]["reference"] == challenge, reg

    # Still offline past the threshold: the lease keeps it open through a re-evaluation.
    d.hup()
    time.sleep(0.5)
    assert d.state_of(user) == "active"

    # The same response again: refused, nothing changes.
    r = d.ctl("offline-code", "enter", code, user=user)
    assert r.code == 1 and "no challenge is outstanding" in r.err, r.describe()
    assert d.state_of(user) == "active"
    assert fingerprint(d.outside) == canaries

    k = kinds(d, user)
    for kind in ("offline-code-challenge", "offline-code-accepted", "unlock", "lease-granted", "offline-code-refused"):
        assert kind in k, (kind, k)
    assert d.log_lines(f"MESSAGE_ID={ID_CHALLENGE}", f"LOCKWIPE_USER={user.name}"), d.log_tail()
    assert len(d.log_lines(f"MESSAGE_ID={ID_ACCEPTED}", f"LOCKWIPE_USER={user.name}")) == 1, d.log_tail()
    assert d.log_lines(f"MESSAGE_ID={ID_UNLOCKED}", f"LOCKWIPE_USER={user.name}"), d.log_tail()
    assert d.log_lines(f"MESSAGE_ID={ID_REFUSED}", f"LOCKWIPE_USER={user.name}"), d.log_tail()


def test_codes_for_another_machine_registration_action_or_secret_are_refused_and_back_off_without_wiping(make_daemon, make_user):
    d = make_daemon(config=config_text(lock=2, wipe=20, extra="\n[passcode]\nretry_limit = 2\n"), faketime="+0")
    secret, user, vault = setup(d, make_user)
    other_secret = d.root / "other-fleet.key"
    other_secret.write_text("another fleet's secret, also long enough\n")
    d.ok("offline-code", "provision", "--fleet-key-file", secret)
    canaries = fingerprint(d.outside)

    # Past the maximum ([offline_codes] max_lease_days, 30 by default): refused at once.
    for days in ("31", "300", "0"):
        r = d.ctl("offline-code", "challenge", user.name, "--extend", days)
        assert r.code != 0 and "max_lease_days" in r.err, r.describe()

    r = d.ctl("offline-code", "challenge", "--extend", "2", user=user)
    assert r.code == 0, r.describe()
    challenge = last_line(r)
    f = decode(challenge)
    forged = {
        "another machine": encode(f["machine"] ^ 1, f["registration"], f["days"], f["counter"]),
        "another registration": encode(f["machine"], f["registration"] ^ 1, f["days"], f["counter"]),
        "another action": encode(f["machine"], f["registration"], 0, f["counter"]),
    }
    codes = {what: respond(d, secret, c) for what, c in forged.items()}
    codes["another fleet secret"] = respond(d, other_secret, challenge)
    for what, code in codes.items():
        r = d.ctl("offline-code", "enter", code, user=user)
        if "wrong offline code" not in r.err:
            assert False, f"a response for {what} was not refused as wrong: " + r.describe()
        assert r.code == 77, r.describe()
    # Four wrong in a row: the next attempt is refused without being tried.
    right = respond(d, secret, challenge)
    r = d.ctl("offline-code", "enter", right, user=user)
    assert r.code == 77 and "wrong offline codes in a row: try again in" in r.err, r.describe()
    # After the wait a fifth wrong one is tried (and waits 2 s), and asking for a new
    # challenge does not reset the back-off.
    time.sleep(2.2)
    r = d.ctl("offline-code", "enter", codes["another fleet secret"], user=user)
    assert r.code == 77 and "wrong offline code" in r.err and "(5 in a row" in r.err, r.describe()
    r = d.ctl("offline-code", "challenge", "--extend", "2", user=user)
    assert r.code == 0, r.describe()
    challenge = last_line(r)
    right = respond(d, secret, challenge)
    r = d.ctl("offline-code", "enter", right, user=user)
    assert r.code == 77 and "5 wrong offline codes in a row: try again in" in r.err, r.describe()
    # Never a wipe, whatever retry_limit says: the data and everything outside are there.
    assert d.state_of(user) == "active"
    assert (vault / "link-out").is_symlink() and fingerprint(d.outside) == canaries
    assert "wipe" not in kinds(d, user) and "wipe-started" not in kinds(d, user)

    # After the back-off the right response still answers its challenge, once.
    time.sleep(3.2)
    r = d.ctl("offline-code", "enter", right, user=user)
    assert r.code == 0 and "offline lease extended" in last_line(r), r.describe() + d.log_tail()
    reg = d.registration(user)
    assert reg["lease"] and reg["lease"]["reference"] == challenge, reg
    r = d.ctl("offline-code", "enter", right, user=user)
    assert r.code == 1 and "no challenge is outstanding" in r.err, r.describe()

    refused = [e for e in d.history(user) if e["kind"] == "offline-code-refused"]
    assert len(refused) >= 6, refused
    assert len(d.log_lines(f"MESSAGE_ID={ID_REFUSED}", f"LOCKWIPE_USER={user.name}")) >= 6, d.log_tail()
    assert owner_of(vault)[0] == user.uid

    # The counter is the store's: a restart does not hand out one already used.
    d.restart(faketime="+0")
    r = d.ctl("offline-code", "challenge", "--extend", "1", user=user)
    assert r.code == 0, r.describe()
    assert decode(last_line(r))["counter"] > f["counter"], (last_line(r), challenge)


def test_encrypted_vaults_open_with_the_default_passcode_and_hand_back_to_a_user_passcode(make_daemon, make_user):
    """An offline lock of two encrypted vaults: the code opens the one whose key the
    machine key wraps; the one whose key a passcode wraps has its policy lock lifted and
    still asks for the passcode."""
    from test_vault import PASS, encrypted_fs, put_files, register_encrypted, set_passcode

    d = make_daemon(config=config_text(lock=2, wipe=20), faketime="+0")
    secret = d.root / "fleet.key"
    secret.write_text("the fleet secret of this test, 32+ bytes long\n")
    d.ok("offline-code", "provision", "--fleet-key-file", secret)
    machine, own = make_user(), make_user()
    with encrypted_fs(d) as fs:
        register_encrypted(d, machine, fs / "m")
        register_encrypted(d, own, fs / "p")
        set_passcode(d, own)
        files = {u.name: put_files(u, fs / v) for u, v in ((machine, "m"), (own, "p"))}

        d.restart(faketime="+3d")
        for u in (machine, own):
            reg = d.registration(u)
            assert reg["state"] == "locked" and reg["lock_trigger"] == "offline", reg

        for u in (machine, own):
            r = d.ctl("offline-code", "challenge", user=u)
            assert r.code == 0, r.describe()
            r = d.ctl("offline-code", "enter", respond(d, secret, last_line(r)), user=u)
            assert r.code == 0, r.describe() + d.log_tail()

        assert d.state_of(machine) == "active"
        for rel, content in files[machine.name].items():
            assert (fs / "m" / rel).read_bytes() == content
        reg = d.registration(own)
        assert reg["state"] == "locked" and reg["lock_trigger"] == "user", reg
        assert "lock-lifted" in kinds(d, own)
        # What it waits for is said: not a lock she made and cannot undo (issue 42).
        assert reg["lock_waits_for"].startswith(f"{own.name}'s own unlock (lockwipectl unlock, with the passcode"), reg
        assert f"{own.name}: lock waits for: {own.name}'s own unlock" in d.ok("status").out
        d.ok("unlock", "--user", own.name, "--passcode-stdin", input=PASS + "\n", user=own)
        assert d.state_of(own) == "active"
        for rel, content in files[own.name].items():
            assert (fs / "p" / rel).read_bytes() == content


def set_counter(d, next_counter):
    """Fast-forwards the machine's challenge counter (what 2^20 challenges would do)."""
    import sqlite3
    db = sqlite3.connect(d.state_dir / "state.sqlite", timeout=10)
    try:
        with db:
            db.execute("INSERT INTO offline_code_counter (id, next) VALUES (1, ?) "
                       "ON CONFLICT(id) DO UPDATE SET next = excluded.next", (next_counter,))
    finally:
        db.close()


def test_a_response_never_answers_a_challenge_twice_after_the_counter_space_is_used(make_daemon, make_user):
    """Issue 40, finding 1: the 20-bit counter wrapped, the challenge came back byte for
    byte, and the one-time response given once was accepted again (a lease whenever she
    wanted). Now the counters of a key epoch are used up, challenges are refused, and
    provisioning again moves to the next epoch: another machine field, another key."""
    d = make_daemon(config=config_text(lock=0, wipe=0))
    secret, user, vault = setup(d, make_user)
    d.ok("offline-code", "provision", "--fleet-key-file", secret)
    r = d.ctl("offline-code", "challenge", "--extend", "3", user=user)
    assert r.code == 0, r.describe()
    first = last_line(r)
    answer = respond(d, secret, first)
    r = d.ctl("offline-code", "enter", answer, user=user)
    assert r.code == 0 and "offline lease extended" in last_line(r), r.describe()

    set_counter(d, (1 << 20) - 1)
    r = d.ctl("offline-code", "challenge", "--extend", "3", user=user)
    assert r.code == 0, r.describe()
    assert decode(last_line(r))["counter"] == (1 << 20) - 1
    seen = []
    for _ in range(2):
        r = d.ctl("offline-code", "challenge", "--extend", "3", user=user)
        if r.code != 0:
            break
        seen.append(last_line(r))
        # The same counter under the same key: its old response must not work again.
        r = d.ctl("offline-code", "enter", answer, user=user)
        assert r.code != 0, f"the response to {first} was accepted again for {seen[-1]}\n" + r.describe()
    assert first not in seen, f"the challenge {first} was given again: {seen}"
    assert r.code == 1 and "used up" in r.err and "provision" in r.err, r.describe()
    codes = d.status()["offline_codes"]
    assert codes["provisioned"] is False and codes["provision_epoch"] == 1 and "used up" in codes["machine"], codes

    # Provisioning again moves to key epoch 1: challenges count from 1 under another machine field.
    r = d.ok("offline-code", "provision", "--fleet-key-file", secret)
    assert "key epoch 1" in r.out, r.describe()
    epoch1 = last_line(r)
    assert int(epoch1, 16) != decode(first)["machine"]
    r = d.ctl("offline-code", "challenge", "--extend", "3", user=user)
    assert r.code == 0, r.describe()
    again = last_line(r)
    assert decode(again)["counter"] == 1 and "%010x" % decode(again)["machine"] == epoch1, again
    r = d.ctl("offline-code", "enter", answer, user=user)
    assert r.code == 77 and "wrong offline code" in r.err, r.describe()
    r = d.ctl("offline-code", "enter", respond(d, secret, again), user=user)
    assert r.code == 0 and "offline lease extended" in last_line(r), r.describe()


def test_challenges_are_rate_limited_per_registration(make_daemon, make_user):
    """Issue 40, finding 1: challenges were not limited (368/s). Ten an hour per
    registration; another registration is not held up by hers."""
    d = make_daemon(config=config_text(lock=0, wipe=0))
    secret, user, vault = setup(d, make_user)
    other = make_user()
    d.ok("register", "--user", other.name, "--dir", d.make_vault(other, "other"))
    d.ok("offline-code", "provision", "--fleet-key-file", secret)
    for _ in range(10):
        r = d.ctl("offline-code", "challenge", "--extend", "1", user=user)
        assert r.code == 0, r.describe()
    r = d.ctl("offline-code", "challenge", "--extend", "1", user=user)
    assert r.code == 77 and "10 challenges within an hour" in r.err and "the next can be asked at" in r.err, r.describe()
    r = d.ctl("offline-code", "challenge", "--extend", "1", user=other)
    assert r.code == 0, r.describe()
