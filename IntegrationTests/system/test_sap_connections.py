"""SAP Mobile Services application connections over a registration's life (issue 29):
the full reset after a server wipe (the connection DELETEd, token, refresh token and
connection id forgotten, status saying how to enrol again), a connection deleted in the
cockpit (probed with GET Connections('{id}') and registered again), the connection id
read from the Location header of the 201, and what status says when the settings come
without blockWipingPolicy. Real daemon, real lockwipectl, the stand-in in SAP mode.
"""

import json
import os

from daemon_harness import config_text, server_config
from host_helpers import empty_or_absent, fingerprint, wait_until
from test_sap import APP, CONNECTIONS, POLICY_3_9, STORAGE, sap_daemon, sap_registered, sap_server

ID_CONNECTION_REPLACED = "9b37a16d5a054dc9aa33300db7b8e0ca"
ID_SERVER_RESET = "c37c70a88e6d465d9296c2998c44d67a"
WIPE = {"mode": "wipe", "message_code": "TRAFFIC_REG_WIPED"}


def requests_after(srv, user, before):
    return srv.stats(user)["requests"] - before


# --------------------------------------------------------------------------- full reset after a wipe


def test_a_server_wipe_deletes_the_connection_and_forgets_the_credentials(make_daemon, make_server, make_user):
    srv = sap_server(make_server)
    d = sap_daemon(make_daemon, srv)
    user = sap_registered(d, srv, make_user)
    other = sap_registered(d, srv, make_user)
    cid = d.registration(user)["sap_connection"]
    assert cid and d.registration(user)["credentials"] == "token", d.registration(user)
    d.outside.joinpath("canary.txt").write_text("outside\n")
    (user.vault / "link").symlink_to(d.outside / "canary.txt")
    outside, before_other = fingerprint(d.outside), fingerprint(other.vault)

    srv.set(user, **WIPE)
    d.ctl("check-in", "--user", user.name)
    wait_until(lambda: d.state_of(user) == "wiped", 5, "the server-ordered wipe did not happen", details=d.log_tail)
    assert empty_or_absent(user.vault)
    assert fingerprint(d.outside) == outside, "files outside the vault changed"

    # The stand-in saw the DELETE of exactly that connection, after the wipe.
    wait_until(lambda: srv.stats(user)["deleted"] == [cid], 10, "the connection was not deleted", details=d.log_tail)
    stats = srv.stats(user)
    assert stats["last_method"] == "DELETE" and stats["last_path"] == f"{CONNECTIONS}('{cid}')", stats
    assert stats["last_headers"]["Authorization"] == f"Bearer {user.token}", stats

    # The credentials and the id are gone; status (JSON and words) says how to enrol again.
    wait_until(lambda: d.registration(user).get("sap_reset", {}).get("delete_result") == "deleted", 5,
               "status does not show the DELETE done", details=d.log_tail)
    reg = d.registration(user)
    assert reg["credentials"] == "none" and "sap_connection" not in reg, reg
    reset = reg["sap_reset"]
    assert reset["connection"] == cid, reset
    assert f"lockwipectl unregister --user {user.name}" in reset["enrol"], reset
    assert f"lockwipectl register --user {user.name} --dir DIR --token-file PATH" in reset["enrol"], reset
    words = d.ok("status").out
    assert f"{user.name} must be enrolled again" in words and f"lockwipectl unregister --user {user.name}" in words, words
    assert d.log_lines(f"MESSAGE_ID={ID_SERVER_RESET}", f"LOCKWIPE_USER={user.name}"), d.log_tail()
    assert [e for e in d.history(user) if e["kind"] == "connection" and "full reset" in e["detail"]], d.history(user)

    # The wiped registration does not talk to the tenant any more.
    before = srv.stats(user)["requests"]
    d.ctl("check-in", "--user", user.name)
    assert requests_after(srv, user, before) == 0, srv.stats(user)

    # The other registration keeps its connection and credentials.
    oreg = d.registration(other)
    assert oreg["credentials"] == "token" and oreg["sap_connection"] and "sap_reset" not in oreg, oreg
    assert fingerprint(other.vault) == before_other
    assert srv.stats(other)["deleted"] == []

    # Enrolling again as status says gives a new connection.
    d.ok("unregister", "--user", user.name)
    user.vault.mkdir(exist_ok=True)
    path = d.root / f"token-{user.name}"
    srv.set(user, mode="ok")
    d.ok("register", "--user", user.name, "--dir", user.vault, "--token-file", path)
    d.ok("check-in", "--user", user.name)
    reg = d.registration(user)
    assert reg["sap_connection"] and reg["sap_connection"] != cid and "sap_reset" not in reg, reg


def test_a_failed_delete_is_said_and_does_not_keep_the_credentials(make_daemon, make_server, make_user):
    srv = sap_server(make_server)
    d = sap_daemon(make_daemon, srv)
    user = sap_registered(d, srv, make_user, delete_mode="500")
    cid = d.registration(user)["sap_connection"]
    srv.set(user, **WIPE)
    d.ctl("check-in", "--user", user.name)
    wait_until(lambda: d.registration(user).get("sap_reset", {}).get("delete_result", "pending") != "pending", 10,
               "the DELETE's failure is not shown", details=d.log_tail)
    reg = d.registration(user)
    assert reg["sap_reset"]["delete_result"].startswith("not deleted: HTTP 500"), reg
    assert reg["credentials"] == "none" and "sap_connection" not in reg, reg
    assert srv.stats(user)["answers"].get("delete-500") == 1, srv.stats(user)
    lines = d.log_lines(f"MESSAGE_ID={ID_SERVER_RESET}", f"LOCKWIPE_USER={user.name}", "LOCKWIPE_RESULT=failed")
    assert lines and cid in lines[-1], d.log_tail()


def test_an_offline_wipe_resets_the_registration_too(make_daemon, make_server, make_user):
    srv = sap_server(make_server)
    srv.set("*", mode="ok", settings=POLICY_3_9)
    d = sap_daemon(make_daemon, srv, faketime="+0")
    user = sap_registered(d, srv, make_user)
    cid = d.registration(user)["sap_connection"]
    assert d.registration(user)["policy"]["offline_days_before_wipe"] == 9

    # Ten days later the server answers, but never with the settings: the offline wipe.
    srv.set(user, mode="500")
    d.restart(faketime="+10d")
    wait_until(lambda: d.state_of(user) == "wiped", 10, "the offline wipe did not happen", details=d.log_tail)
    assert [e for e in d.history(user) if e["kind"] == "wipe" and e["trigger"] == "offline"], d.history(user)
    wait_until(lambda: srv.stats(user)["deleted"] == [cid], 10, "the connection was not deleted", details=d.log_tail)
    reg = d.registration(user)
    assert reg["credentials"] == "none" and reg["sap_reset"]["connection"] == cid, reg


def test_with_oauth_the_reset_forgets_the_refresh_token_and_deletes_with_an_access_token(make_daemon, make_server, make_user):
    srv = sap_server(make_server)
    srv.oauth(enabled=True, lifetime=60, client_id="lockwiped")
    srv.set("*", mode="ok", settings=POLICY_3_9)
    extra = (server_config(srv.url, 3600, 3) + f'protocol = "sap-mobile-services"\napplication_id = "{APP}"\n'
             + f'\n[server.oauth]\ntoken_url = "{srv.token_url}"\nclient_id = "lockwiped"\n')
    d = make_daemon(config=config_text(extra=extra))
    user = make_user()
    user.vault = d.make_vault(user, f"vault-{user.name}")
    path = d.root / f"rt-{user.name}"
    path.write_text(srv.issue_refresh_token(user) + "\n")
    os.chmod(path, 0o600)
    d.ok("register", "--user", user.name, "--dir", user.vault, "--refresh-token-file", path)
    wait_until(lambda: d.registration(user).get("sap_connection"), 10, "no connection was made", details=d.log_tail)
    cid = d.registration(user)["sap_connection"]
    assert d.registration(user)["credentials"] == "refresh-token"

    srv.set(user, **WIPE)
    d.ctl("check-in", "--user", user.name)
    wait_until(lambda: srv.stats(user)["deleted"] == [cid], 10, "the connection was not deleted", details=d.log_tail)
    auth = {k.lower(): v for k, v in srv.stats(user)["last_headers"].items()}.get("authorization", "")
    assert auth.startswith("Bearer at-"), srv.stats(user)  # an access token, never the refresh token
    reg = d.registration(user)
    assert reg["state"] == "wiped" and reg["credentials"] == "none", reg
    assert "--refresh-token-file PATH" in reg["sap_reset"]["enrol"], reg


# --------------------------------------------------------------------------- stale connection ids


def test_a_connection_deleted_in_the_cockpit_is_registered_again(make_daemon, make_server, make_user):
    srv = sap_server(make_server)
    d = sap_daemon(make_daemon, srv)
    user = sap_registered(d, srv, make_user)
    old = d.registration(user)["sap_connection"]
    assert srv._request("POST", "/control/_connections/forget", {"id": old})["forgotten"] == [old]

    r = d.ctl("check-in", "--user", user.name)
    assert r.code == 0, r.describe()
    stats = srv.stats(user)
    assert stats["probes"] == [old], stats
    assert len(stats["connections"]) == 2, stats
    new = stats["connections"][-1]
    assert new != old and stats["last_path"] == STORAGE and stats["last_headers"]["X-SMP-APPCID"] == new, stats
    reg = d.registration(user)
    assert reg["sap_connection"] == new and reg["last_error"] is None and reg["state"] == "active", reg
    assert d.log_lines(f"MESSAGE_ID={ID_CONNECTION_REPLACED}", f"LOCKWIPE_USER={user.name}", old), d.log_tail()
    events = [e for e in d.history(user) if e["kind"] == "connection" and old in e["detail"]]
    assert events and new in events[-1]["detail"], d.history(user)

    # From then on the new id is sent, and nothing is probed again.
    d.ok("check-in", "--user", user.name)
    stats = srv.stats(user)
    assert stats["probes"] == [old] and len(stats["connections"]) == 2, stats
    assert stats["last_headers"]["X-SMP-APPCID"] == new, stats


def test_a_403_for_a_connection_the_server_still_knows_stands(make_daemon, make_server, make_user):
    srv = sap_server(make_server)
    d = sap_daemon(make_daemon, srv)
    user = sap_registered(d, srv, make_user)
    cid = d.registration(user)["sap_connection"]
    srv.set(user, mode="forbidden")
    d.ctl("check-in", "--user", user.name)
    stats = srv.stats(user)
    assert stats["probes"] == [cid] and len(stats["connections"]) == 1, stats
    reg = d.registration(user)
    assert reg["sap_connection"] == cid and "403" in (reg["last_error"] or ""), reg
    assert not d.log_lines(f"MESSAGE_ID={ID_CONNECTION_REPLACED}"), d.log_tail()


# --------------------------------------------------------------------------- smaller points


def test_the_connection_id_may_come_only_in_the_location_header(make_daemon, make_server, make_user):
    srv = sap_server(make_server)
    d = sap_daemon(make_daemon, srv)
    user = sap_registered(d, srv, make_user, connection_mode="location")
    stats = srv.stats(user)
    cid = stats["connections"][0]
    assert stats["last_headers"].get("X-SMP-APPCID") == cid, stats
    reg = d.registration(user)
    assert reg["sap_connection"] == cid and reg["last_error"] is None and "sap_connection_problem" not in reg, reg


def test_settings_without_block_wiping_policy_are_said_in_status(make_daemon, make_server, make_user):
    srv = sap_server(make_server)
    d = sap_daemon(make_daemon, srv, lock=2, wipe=5)
    srv.set("*", mode="ok", settings=POLICY_3_9)
    user = sap_registered(d, srv, make_user)
    first = sap_registered(d, srv, make_user, omit=["blockWipingPolicy"])
    assert d.registration(user)["policy"]["offline_days_before_lock"] == 3
    # Before any server policy, the local one stays in force; it is not switched off.
    reg = d.registration(first)
    assert reg["policy"] == {"offline_days_before_lock": 2, "offline_days_before_wipe": 5, "source": "local"}, reg
    assert reg["next_action"] is not None, reg

    # The section goes missing (ReadRoles now hide it): the server's last policy stays.
    srv.set(user, omit=["blockWipingPolicy"])
    d.ok("check-in", "--user", user.name)
    reg = d.registration(user)
    assert reg["policy"] == {"offline_days_before_lock": 3, "offline_days_before_wipe": 9, "source": "server"}, reg
    assert reg["last_error"] is None and reg["next_action"] is not None, reg
    assert "blockWipingPolicy" in (reg.get("server_policy_note") or ""), reg
    words = d.ok("status").out
    assert "blockWipingPolicy" in words and "ReadRoles" in words, words
    # Journalled once, not at every check-in.
    d.ok("check-in", "--user", user.name)
    assert len(d.log_lines("blockWipingPolicy", f"LOCKWIPE_USER={user.name}", "MESSAGE_ID=")) == 1, d.log_tail()


def test_password_policy_lock_timeout_is_shown_for_the_registration(make_daemon, make_server, make_user):
    srv = sap_server(make_server)
    d = sap_daemon(make_daemon, srv)
    user = sap_registered(d, srv, make_user, settings={"passwordPolicy": {"passwordPolicyLockTimeout": "300"}})
    reg = d.registration(user)
    assert reg["sap_password_policy_lock_timeout"] == 300, json.dumps(reg)
