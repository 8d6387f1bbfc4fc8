"""SAP Mobile Services protocol (`[server] protocol = "sap-mobile-services"`) against the
stand-in in SAP mode (scripts/lockwipe-demo-server --protocol sap-mobile-services): real
daemon, real lockwipectl, real HTTP on loopback.

The stand-in knows a registration by its bearer token (as a tenant knows the user from
the authentication), so every registration here is made with its own --token-file.
"""

import json
import os
import subprocess
import time
import urllib.error
import urllib.request

import pytest

from daemon_harness import config_text, server_config
from host_helpers import DAY, can_list, empty_or_absent, fingerprint, owner_of, parse_time, wait_until

APP = "com.example.fieldapp"
LOCKWIPE_APP_SPECIFIC = "64e38009235247e6b0d20780d26f6821"
STORAGE = (f"/mobileservices/application/{APP}/Storage/v1/runtime/application/{APP}"
           "/currentuser/mobileservices/settingsExchange?overwrite=true")
CONNECTIONS = f"/odata/applications/latest/{APP}/Connections"
POLICY_3_9 = {"blockWipingPolicy": {"blockWipeEnabled": "true", "blockDisconnectedPeriod": "3",
                                    "wipeDisconnectedPeriod": 9}}


def sap_server(make_server):
    return make_server(extra_args=["--protocol", "sap-mobile-services", "--application-id", APP])


def sap_daemon(make_daemon, srv, lock=0, wipe=0, faketime=None, device_id=None):
    extra = server_config(srv.url, 3600, 3) + f'protocol = "sap-mobile-services"\napplication_id = "{APP}"\n'
    if device_id:
        extra += f'device_id = "{device_id}"\n'
    return make_daemon(config=config_text(lock=lock, wipe=wipe, extra=extra), faketime=faketime)


def machine_device_id():
    """What systemd derives for lockwipe's application id: the id lockwiped must send."""
    return subprocess.run(["systemd-id128", "machine-id", f"--app-specific={LOCKWIPE_APP_SPECIFIC}"],
                          capture_output=True, text=True, check=True).stdout.strip()


def token_for(d, srv, user_name):
    token = "saptok-" + os.urandom(12).hex()
    srv.set(user_name, token=token)
    path = d.root / f"token-{user_name}"
    path.write_text(token + "\n")
    os.chmod(path, 0o600)
    return token, path


def sap_registered(d, srv, make_user, wait=True, **server_entry):
    """A registration with its own token; the stand-in is told `server_entry` for it
    first, so that the very first requests (Connections, settings) already see it."""
    user = make_user()
    user.vault = d.make_vault(user, f"vault-{user.name}")
    user.token, path = token_for(d, srv, user.name)
    if server_entry:
        srv.set(user, **server_entry)
    d.ok("register", "--user", user.name, "--dir", user.vault, "--token-file", path)
    if wait:
        wait_until(lambda: d.registration(user).get("last_attempt"), 10,
                   "the check-in a registration makes at once was not answered", details=d.log_tail)
    return user


# --------------------------------------------------------------------------- connections and requests


def test_registration_creates_the_connection_whose_id_every_later_request_sends(make_daemon, make_server, make_user):
    srv = sap_server(make_server)
    srv.set("*", mode="ok", settings=POLICY_3_9)
    d = sap_daemon(make_daemon, srv)
    user = sap_registered(d, srv, make_user)
    version = d.status()["version"]
    device = machine_device_id()
    assert device != open("/etc/machine-id").read().strip()

    stats = srv.stats(user)
    assert len(stats["connections"]) == 1, stats
    cid = stats["connections"][0]
    creq = stats["connection_request"]
    assert creq["path"] == CONNECTIONS, creq
    h = creq["headers"]
    assert h["X-SMP-APPID"] == APP and h["X-SMP-DEVICEID"] == device, h
    assert "X-SMP-APPCID" not in h, h
    assert h["Content-Type"] == "application/json" and h["Accept"] == "application/json", h
    assert h["User-Agent"] == f"lockwiped/{version}" and h["Authorization"] == f"Bearer {user.token}", h
    assert creq["body"]["DeviceType"] == "Linux" and creq["body"]["DeviceModel"], creq

    # The check-in: exact path and query, the connection id sent.
    assert stats["last_method"] == "GET" and stats["last_path"] == STORAGE, stats
    h = stats["last_headers"]
    assert h["X-SMP-APPID"] == APP and h["X-SMP-DEVICEID"] == device and h["X-SMP-APPCID"] == cid, h
    assert h["User-Agent"] == f"lockwiped/{version}" and h["Accept"] == "application/json", h
    assert h["Authorization"] == f"Bearer {user.token}", h
    reg = d.registration(user)
    assert reg["sap_connection"] == cid and reg["last_error"] is None, reg
    assert [e for e in d.history(user) if e["kind"] == "connection"], d.history(user)

    # The id is kept: a restart (of both ends) makes no new connection and sends the
    # same one, which the stand-in (refusing unknown ids) still knows.
    port = srv.port
    srv.stop()
    srv.start(port=port)
    d.restart()
    d.ok("check-in", "--user", user.name)
    stats = srv.stats(user)
    assert stats["connections"] == [] and stats["last_headers"]["X-SMP-APPCID"] == cid, stats
    assert d.registration(user)["last_error"] is None, d.registration(user)

    # Unregister deletes the connection on the server (without waiting for it).
    d.ok("unregister", "--user", user.name)
    wait_until(lambda: srv.stats(user)["deleted"] == [cid], 10, "the connection was not deleted", details=d.log_tail)
    assert srv.stats(user)["last_method"] == "DELETE" and srv.stats(user)["last_path"] == f"{CONNECTIONS}('{cid}')"


def test_a_configured_device_id_is_sent_as_is(make_daemon, make_server, make_user):
    srv = sap_server(make_server)
    d = sap_daemon(make_daemon, srv, device_id="field-unit-17")
    user = sap_registered(d, srv, make_user)
    assert srv.stats(user)["last_headers"]["X-SMP-DEVICEID"] == "field-unit-17"


@pytest.mark.parametrize("how", ["id-header", "id-cookie"])
def test_the_connection_id_may_come_as_header_or_cookie(make_daemon, make_server, make_user, how):
    srv = sap_server(make_server)
    d = sap_daemon(make_daemon, srv)
    user = sap_registered(d, srv, make_user, connection_mode=how)
    stats = srv.stats(user)
    assert stats["last_headers"].get("X-SMP-APPCID") == stats["connections"][0], stats
    assert d.registration(user)["last_error"] is None


def test_a_connection_answer_without_an_id_is_retried_and_shown(make_daemon, make_server, make_user):
    srv = sap_server(make_server)
    d = sap_daemon(make_daemon, srv)
    user = sap_registered(d, srv, make_user, connection_mode="no-id")
    reg = d.registration(user)
    assert reg["state"] == "active" and "sap_connection" not in reg, reg
    assert "without a connection id" in reg["sap_connection_problem"], reg
    assert any("no SAP application connection" in w for w in d.status()["warnings"]), d.status()["warnings"]
    # Without X-SMP-APPCID the tenant refuses the settings request (403, no message code):
    # the server is reached but rejects the check-in (issue 29).
    assert "HTTP 403: no message code" in (reg["last_error"] or "") and reg["rejected"]["http_status"] == 403, reg

    srv.set(user, connection_mode="ok")
    d.ok("check-in", "--user", user.name)
    stats = srv.stats(user)
    reg = d.registration(user)
    assert len(stats["connections"]) == 2 and reg["sap_connection"] == stats["connections"][1], (stats, reg)
    assert "sap_connection_problem" not in reg and reg["last_error"] is None and reg["rejected"] is None, reg


def test_the_stand_in_refuses_requests_without_the_smp_headers(make_server):
    srv = sap_server(make_server)
    for path, headers in [
        (STORAGE, {}),
        (STORAGE, {"X-SMP-APPID": APP, "X-SMP-DEVICEID": "d"}),  # no connection id
        (STORAGE, {"X-SMP-APPID": "other", "X-SMP-DEVICEID": "d", "X-SMP-APPCID": "x"}),
    ]:
        req = urllib.request.Request(srv.url + path, headers=headers)
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(req, timeout=10)
        assert e.value.code == 403 and e.value.headers.get("x-message-code") is None


# --------------------------------------------------------------------------- policy


def test_a_check_in_restarts_the_offline_clock_and_installs_the_server_policy(make_daemon, make_server, make_user):
    srv = sap_server(make_server)
    srv.set("*", mode="ok", settings=POLICY_3_9, wrap="bare")
    d = sap_daemon(make_daemon, srv, lock=20, wipe=40, faketime="+0")
    user = sap_registered(d, srv, make_user)
    reg = d.registration(user)
    assert reg["policy"] == {"offline_days_before_lock": 3, "offline_days_before_wipe": 9, "source": "server"}, reg
    first = parse_time(reg["last_contact"])

    # Two days later (the stand-in unreachable meanwhile would lock at 3): a check-in
    # restarts the clock. The answer now wraps the document as {"settingsExchange": ...}.
    srv.set("*", wrap="settingsExchange")
    d.restart(faketime="+2d")
    d.ok("check-in", "--user", user.name)
    reg = d.registration(user)
    assert (parse_time(reg["last_contact"]) - first).total_seconds() > 2 * DAY - 600, reg
    assert reg["offline_seconds"] < 600 and reg["policy_source"] == "server", reg
    assert abs((parse_time(reg["next_action"]["at"]) - parse_time(reg["last_contact"])).total_seconds() - 3 * DAY) < 600, reg
    # passwordPolicyLockTimeout is not lock-on-logout: not taken over.
    assert reg["passcode_policy"]["min_length"] == 8 and "lock_timeout" not in reg["passcode_policy"], reg


# Settings without blockWipingPolicy keep the policy in force (issue 29): see
# test_sap_connections.py, test_settings_without_block_wiping_policy_are_said_in_status.
@pytest.mark.parametrize("off", [{"settings": {"blockWipingPolicy": {"blockWipeEnabled": "false",
                                                                     "blockDisconnectedPeriod": "1"}}}])
def test_a_policy_switched_off_in_the_cockpit_turns_offline_lock_and_wipe_off(make_daemon, make_server, make_user, off):
    srv = sap_server(make_server)
    srv.set("*", mode="ok", settings=POLICY_3_9)
    d = sap_daemon(make_daemon, srv, lock=2, wipe=5, faketime="+0")
    user = sap_registered(d, srv, make_user)
    d.outside.joinpath("canary.txt").write_text("outside\n")
    before, outside = fingerprint(user.vault), fingerprint(d.outside)
    assert d.registration(user)["policy"]["offline_days_before_lock"] == 3

    srv.set(user, **off)
    d.ok("check-in", "--user", user.name)
    reg = d.registration(user)
    assert reg["policy"] == {"offline_days_before_lock": 0, "offline_days_before_wipe": 0, "source": "server"}, reg
    assert reg["next_action"] is None, reg

    # Thirty days without the server: the local policy (2/5) does not come back.
    srv.stop()
    d.restart(faketime="+30d")
    wait_until(lambda: d.registration(user)["last_error"], 10, "the start-up check-in did not fail")
    reg = d.registration(user)
    assert reg["state"] == "active" and reg["policy_source"] == "server", reg
    assert fingerprint(user.vault) == before and fingerprint(d.outside) == outside


# --------------------------------------------------------------------------- server orders


@pytest.mark.parametrize("where", ["check-in", "connections"])
@pytest.mark.parametrize("code", ["TRAFFIC_REG_LOCKED", "TRAFFIC_REG_WIPED", "TRAFFIC_REG_BLOCKED"])
def test_server_orders_act_on_check_in_and_on_connections(make_daemon, make_server, make_user, where, code):
    srv = sap_server(make_server)
    d = sap_daemon(make_daemon, srv)
    mode = {"TRAFFIC_REG_LOCKED": "lock", "TRAFFIC_REG_WIPED": "wipe", "TRAFFIC_REG_BLOCKED": "block"}[code]
    order = {"mode": mode, "message_code": code}
    other = sap_registered(d, srv, make_user)
    before_other = fingerprint(other.vault)
    if where == "connections":
        user = sap_registered(d, srv, make_user, **order)
        stats = srv.stats(user)
        assert stats["connections"] == [] and stats["last_path"] == CONNECTIONS, stats
    else:
        user = sap_registered(d, srv, make_user)
        d.outside.joinpath("canary.txt").write_text("outside\n")
        (user.vault / "link").symlink_to(d.outside / "canary.txt")
        srv.set(user, **order)
        d.ctl("check-in", "--user", user.name)
    outside = fingerprint(d.outside)

    if code == "TRAFFIC_REG_LOCKED":
        wait_until(lambda: d.state_of(user) == "locked", 5, "the server-ordered lock did not happen", details=d.log_tail)
        assert d.registration(user)["lock_trigger"] == "server"
        assert owner_of(user.vault) == (0, 0, 0) and not can_list(user, user.vault)
    elif code == "TRAFFIC_REG_WIPED":
        wait_until(lambda: d.state_of(user) == "wiped", 5, "the server-ordered wipe did not happen", details=d.log_tail)
        assert empty_or_absent(user.vault)
        wipes = [e for e in d.history(user) if e["kind"] == "wipe"]
        assert wipes and wipes[-1]["trigger"] == "server", wipes
    else:
        wait_until(lambda: d.registration(user)["blocked"], 5, "the block is not shown", details=d.log_tail)
        reg = d.registration(user)
        assert reg["blocked_code"] == code and reg["state"] == "active", reg
    assert fingerprint(d.outside) == outside, "files outside the vault changed"
    assert d.state_of(other) == "active" and fingerprint(other.vault) == before_other, "the other registration was touched"
    assert d.running()


# --------------------------------------------------------------------------- configuration


def test_check_config_names_a_missing_application_id(make_daemon):
    d = make_daemon(config=config_text(extra='\n[server]\nurl = "https://tenant.example.com"\nprotocol = "sap-mobile-services"\n'),
                    start=False)
    r = subprocess.run([str(d.bins.lockwiped), "--check-config", "--config", str(d.config)],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 1, r
    line = next(n for n, l in enumerate(d.config.read_text().splitlines(), 1) if l.startswith("protocol"))
    assert f"{d.config}:{line}: server.application_id: " in r.stderr, r.stderr


# --------------------------------------------------------------------------- with OAuth


def test_with_oauth_every_sap_request_carries_an_access_token_from_the_refresh_token(make_daemon, make_server, make_user):
    """A real tenant authenticates with OAuth access tokens: the Connections request and
    the check-in both carry one, obtained with the registration's refresh token, and the
    tenant (the stand-in) refuses both without it (401)."""
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
    wait_until(lambda: d.registration(user).get("last_attempt"), 10,
               "the check-in a registration makes at once was not answered", details=d.log_tail)
    reg = d.registration(user)
    assert reg["credentials"] == "refresh-token" and reg["sap_connection"], reg
    assert reg["last_error"] is None and reg["policy_source"] == "server", reg
    sent = srv.stats(user)["connection_request"]["headers"]
    auth = {k.lower(): v for k, v in sent.items()}.get("authorization", "")
    assert auth.startswith("Bearer at-"), sent  # an access token the token endpoint issued
    assert srv.oauth_report()["requests"], "no token request"
    # The check-in after it: the same access token (cached), the connection id with it.
    before = srv.stats(user)["requests"]
    d.ok("check-in", "--user", user.name)
    after = srv.stats(user)
    assert after["requests"] > before, after
    assert {k.lower(): v for k, v in after["last_headers"].items()}.get("authorization") == auth, after
    reg = d.registration(user)
    # Times are whole seconds: status may be read in the second after the check-in's.
    assert reg["last_error"] is None and reg["offline_seconds"] <= 1, reg
