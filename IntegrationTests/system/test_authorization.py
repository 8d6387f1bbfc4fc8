"""Who may do what over the control socket (SO_PEERCRED, failing closed)."""

import json
import re

import pytest

from daemon_harness import config_text
from host_helpers import fingerprint, nobody, owner_of

REFUSAL_WORDS = re.compile(
    r"refus|denied|deny|not permitted|not allowed|unauthori[sz]ed|forbidden|permission",
    re.IGNORECASE,
)


@pytest.fixture
def victim(daemon, make_user):
    user = make_user()
    vault = daemon.make_vault(user, f"vault-{user.name}")
    daemon.ok("register", "--user", user.name, "--dir", vault)
    user.vault = vault
    return user


def assert_refusal_logged(daemon, r, requester):
    lines = [
        l for l in daemon.log().splitlines()
        if re.search(rf"\bLOCKWIPE_PEER_UID={requester.uid}\b", l)
        and re.search(rf"\bLOCKWIPE_PEER_PID={r.pid}\b", l)
    ]
    assert lines, (
        f"the daemon log has no entry with LOCKWIPE_PEER_UID={requester.uid} "
        f"LOCKWIPE_PEER_PID={r.pid} for the refused `{' '.join(r.argv)}`\n"
        + daemon.log_tail()
    )
    assert any(REFUSAL_WORDS.search(l) for l in lines), (
        f"the log entries for peer uid {requester.uid} do not say the request was "
        f"refused: {lines}"
    )


@pytest.mark.parametrize(
    "verb",
    [
        ["lock", "--user", "{victim}"],
        ["wipe", "--user", "{victim}", "--yes"],
        ["unlock", "--user", "{victim}"],
        ["unregister", "--user", "{victim}"],
        ["register", "--user", "{victim}", "--dir", "{newdir}"],
        ["lock", "--all"],
        ["wipe", "--all", "--yes"],
    ],
    ids=lambda v: "_".join(x.lstrip("-") for x in v if not x.startswith("{")),
)
def test_unprivileged_user_is_refused(daemon, victim, verb):
    newdir = daemon.data / "new-by-nobody"
    args = [a.format(victim=victim.name, newdir=newdir) for a in verb]
    before = fingerprint(victim.vault)
    r = daemon.ctl(*args, user=nobody())
    assert r.code == 77, f"`nobody` must not be allowed to {args}: " + r.describe()
    assert r.err.strip(), "the refusal printed no message"
    assert_refusal_logged(daemon, r, nobody())

    assert fingerprint(victim.vault) == before, f"a refused {args[0]} changed the vault"
    reg = daemon.registration(victim)
    assert reg is not None, f"a refused {args[0]} removed the registration"
    assert reg["state"] == "active", f"a refused {args[0]} changed the state: {reg}"
    assert not newdir.exists(), "a refused register created a directory"


def test_registered_user_sees_and_locks_only_their_own(daemon, victim, make_user):
    me = make_user()
    vault = daemon.make_vault(me, "mine")
    daemon.ok("register", "--user", me.name, "--dir", vault)

    r = daemon.ctl("status", "--json", user=me)
    assert r.code == 0, f"{me.name} cannot see their own status: " + r.describe()
    users = [x["user"] for x in json.loads(r.out)["registrations"]]
    assert users == [me.name], f"{me.name} sees the registrations {users}"

    human = daemon.ctl("status", user=me)
    assert human.code == 0, human.describe()
    assert victim.name not in human.out, (
        f"{me.name}'s status reveals {victim.name}:\n{human.out}"
    )

    other = daemon.ctl("status", "--user", victim.name, "--json", user=me)
    assert victim.name not in other.out, (
        f"`status --user {victim.name}` as {me.name} reveals it: " + other.describe()
    )

    r = daemon.ctl("lock", "--user", victim.name, user=me)
    assert r.code == 77, "a user may not lock someone else: " + r.describe()
    assert daemon.state_of(victim) == "active"

    r = daemon.ctl("lock", "--user", me.name, "--yes", user=me)
    assert r.code == 0, "a user may lock their own vault: " + r.describe()
    assert daemon.state_of(me) == "locked"
    assert owner_of(vault) == (0, 0, 0), "the self-lock did not lock the directory"

    r = daemon.ctl("unlock", "--user", me.name, user=me)
    assert r.code == 77, "a user may not unlock themselves (needs an admin): " + r.describe()
    assert daemon.state_of(me) == "locked"


def test_admin_group_member_may_register(make_daemon, make_user, make_group):
    group = make_group()
    admin = make_user(groups=[group])
    outsider = make_user()
    target = make_user()
    d = make_daemon(config=config_text(admin_group=group))
    vault = d.make_vault(target, "target")

    r = d.ctl("register", "--user", target.name, "--dir", vault, user=outsider)
    assert r.code == 77, "a user outside the admin group may not register: " + r.describe()

    r = d.ctl("register", "--user", target.name, "--dir", vault, user=admin)
    assert r.code == 0, f"a member of admin group {group} may register: " + r.describe()
    assert d.state_of(target) == "active"
    r = d.ctl("lock", "--user", target.name, user=admin)
    assert r.code == 0, f"a member of admin group {group} may lock: " + r.describe()


def test_missing_admin_group_grants_nothing(make_daemon, make_user):
    user = make_user()
    target = make_user()
    # The group does not exist; nor does a group with the user's own name count.
    d = make_daemon(config=config_text(admin_group="lwt-no-such-group"))
    vault = d.make_vault(target, "target")
    r = d.ctl("register", "--user", target.name, "--dir", vault, user=user)
    assert r.code == 77, "a non-existent admin group must grant nothing: " + r.describe()
    assert d.registration(target) is None
    d.ok("register", "--user", target.name, "--dir", vault)  # root still may
