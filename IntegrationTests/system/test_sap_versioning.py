"""SAP's Application Versioning (`[server] application_version`, sent as `X-APP-VERSION`)
and a server that is reached but refuses the machine (the check-in result `rejected`):
real daemon, real lockwipectl, the SAP stand-in (scripts/lockwipe-demo-server
--protocol sap-mobile-services --app-versions ...) on loopback.

SAP documents (SAP BTP SDK for Android, "Application Versioning") that with versioning
on, a request without `X-APP-VERSION`, or with an inactive version, is answered 403; the
stand-in does so without a message code.
"""

import os
import re

from daemon_harness import config_text, server_config
from host_helpers import wait_until
from test_sap import APP, CONNECTIONS, POLICY_3_9, STORAGE, token_for

# systemd/lockwipe.catalog explains them; MessageID.registrationRejected, .configReloaded.
ID_REJECTED = "f3ffb8be6df64ff38098574bf1e3d15a"
ID_RELOADED = "cc457583ad0543b481bf8014c14f738e"
VERSION = "2.1.0"

RECORDER = """#!/bin/bash
printf '%s|%s|%s|%s|%s|%s|%s\\n' "$1" "$2" "$LOCKWIPE_EVENT" "$LOCKWIPE_ACTION" "$LOCKWIPE_TRIGGER" "$LOCKWIPE_DUE" \\
  "$LOCKWIPE_REASON" >> {out}
"""


def hook_records(path):
    if not path.exists():
        return []
    return [dict(zip(["arg1", "arg2", "event", "action", "trigger", "due", "reason"], line.split("|", 6)))
            for line in path.read_text().splitlines()]


def versioned_config(d, srv, version=None):
    extra = server_config(srv.url, 3600, 3) + f'protocol = "sap-mobile-services"\napplication_id = "{APP}"\n'
    if version is not None:
        extra += f'application_version = "{version}"\n'
    extra += f'\n[metrics]\ntextfile = "{d.root / "metrics" / "lockwipe.prom"}"\n'
    return config_text(lock=3, wipe=9, extra=extra)


def rejected_metric(d, reg):
    """The lockwipe_registration_rejected sample of `reg` in the metrics file (None: absent)."""
    path = d.root / "metrics" / "lockwipe.prom"
    if not path.exists():
        return None
    for line in path.read_text().splitlines():
        m = re.match(r'lockwipe_registration_rejected\{([^}]*)\} (\S+)$', line)
        if m and (f'registration="{reg["registration_id"]}"' in m.group(1) or f'user="{reg["user"]}"' in m.group(1)):
            return m.group(2)
    return None


def test_versioning_without_the_setting_is_rejected_until_the_version_is_set(make_daemon, make_server, make_user):
    srv = make_server(extra_args=["--protocol", "sap-mobile-services", "--application-id", APP, "--app-versions", f"1.0,{VERSION}"])
    srv.set("*", mode="ok", settings=POLICY_3_9)
    d = make_daemon(start=False)
    (d.root / "metrics").mkdir(mode=0o755)
    d.write_config(versioned_config(d, srv))
    d.start()
    out = d.root / "hook-records"
    d.write_hook("10-record", RECORDER.format(out=out))

    user = make_user()
    user.vault = d.make_vault(user, "vault")
    user.token, path = token_for(d, srv, user.name)
    d.ok("register", "--user", user.name, "--dir", user.vault, "--token-file", path)
    reg = wait_until(lambda: (r := d.registration(user)).get("rejected") and r, 10,
                     "the check-in without X-APP-VERSION was not shown as rejected", details=d.log_tail)

    # status --json: the word, the answer's code and text, what to check.
    rej = reg["rejected"]
    assert rej["http_status"] == 403, rej
    assert "X-APP-VERSION missing" in rej["text"] and "no message code" in rej["text"], rej
    assert "application_version" in rej["check"] and "roles" in rej["check"] and "connection" in rej["check"], rej
    assert rej["since"], rej
    # No contact: the connection was not made.
    assert reg.get("sap_connection") is None, reg
    # Every request went out without the header (the daemon has no version to send).
    sent = srv.stats()["sap_requests"]
    assert sent and all(r["app_version"] is None for r in sent), sent

    # lockwipectl status, as a person reads it: the word on the registration's line and
    # on its check-in line, and what to check.
    human = d.ok("status").out
    mine = [l for l in human.splitlines() if user.name in l]
    assert any("rejected by the policy server (HTTP 403" in l and "application_version" in l and "roles" in l for l in mine), human
    assert any(re.search(r"\brejected\b", l) and "LAST" not in l and "(HTTP" not in l for l in mine), human

    # The journal: its own MESSAGE_ID, the HTTP status.
    lines = d.log_lines(f"MESSAGE_ID={ID_REJECTED}", f"LOCKWIPE_USER={user.name}")
    assert lines and "LOCKWIPE_HTTP_STATUS=403" in lines[0], d.log_tail()

    # The metric, and the hook, told once however often the server refuses.
    wait_until(lambda: rejected_metric(d, reg) == "1", 10, "lockwipe_registration_rejected to be 1",
               details=lambda: (d.root / "metrics" / "lockwipe.prom").read_text())
    wait_until(lambda: hook_records(out), 10, "the warnRejected hook did not run", details=d.log_tail)
    d.ctl("check-in", "--user", user.name)
    assert len(d.log_lines(f"MESSAGE_ID={ID_REJECTED}", f"LOCKWIPE_USER={user.name}")) >= 2, d.log_tail()
    # Not a contact: the offline clock runs on from the registration.
    assert d.registration(user)["last_contact"] == reg["last_contact"], d.registration(user)
    rec = hook_records(out)
    assert [(r["arg1"], r["arg2"], r["event"], r["trigger"]) for r in rec] == [("warnRejected", user.name, "warnRejected", "server")], rec
    # The offline clock runs on toward the policy's lock (3 days), and the hook says when.
    assert rec[0]["action"] == "lock" and int(rec[0]["due"]) > 0 and "HTTP 403" in rec[0]["reason"], rec

    # The administrator sets the version and reloads: the next check-in is a contact, and
    # the rejection is gone everywhere.
    srv.reset_stats()
    d.write_config(versioned_config(d, srv, VERSION))
    d.hup()
    d.wait_log(lambda l: f"MESSAGE_ID={ID_RELOADED}" in l, 10, "the reload")
    d.ok("check-in", "--user", user.name)
    reg = d.registration(user)
    assert reg["rejected"] is None and reg["last_error"] is None and reg["sap_connection"], reg
    assert "rejected" not in d.ok("status").out, d.ok("status").out
    wait_until(lambda: rejected_metric(d, reg) == "0", 10, "lockwipe_registration_rejected to be 0 again",
               details=lambda: (d.root / "metrics" / "lockwipe.prom").read_text())
    assert len(hook_records(out)) == 1, hook_records(out)

    # The header is on every SAP request: the Connections POST, the settings, and the
    # DELETE of unregister.
    d.ok("unregister", "--user", user.name)
    wait_until(lambda: any(r["method"] == "DELETE" for r in srv.stats()["sap_requests"]), 10,
               "the connection was not deleted", details=d.log_tail)
    sent = srv.stats()["sap_requests"]
    assert {(r["method"], r["path"].split("('")[0]) for r in sent} == {("POST", CONNECTIONS), ("GET", STORAGE), ("DELETE", CONNECTIONS)}, sent
    assert all(r["app_version"] == VERSION for r in sent), sent


def test_an_inactive_version_is_rejected_and_an_unauthorized_token_too(make_daemon, make_server, make_user):
    """A version the tenant no longer lists is refused as a missing one; a 401 with a
    static token (no refresh can cure it) is a rejection too, with its own code."""
    srv = make_server(extra_args=["--protocol", "sap-mobile-services", "--application-id", APP, "--app-versions", VERSION])
    srv.set("*", mode="ok", settings=POLICY_3_9)
    d = make_daemon(start=False)
    (d.root / "metrics").mkdir(mode=0o755)
    d.write_config(versioned_config(d, srv, "1.0"))
    d.start()
    user = make_user()
    user.vault = d.make_vault(user, "vault")
    user.token, path = token_for(d, srv, user.name)
    d.ok("register", "--user", user.name, "--dir", user.vault, "--token-file", path)
    reg = wait_until(lambda: (r := d.registration(user)).get("rejected") and r, 10, "an inactive version was not rejected", details=d.log_tail)
    assert reg["rejected"]["http_status"] == 403, reg
    assert all(r["app_version"] == "1.0" for r in srv.stats()["sap_requests"]), srv.stats()["sap_requests"]

    d.write_config(versioned_config(d, srv, VERSION))
    d.hup()
    d.wait_log(lambda l: f"MESSAGE_ID={ID_RELOADED}" in l, 10, "the reload")
    d.ok("check-in", "--user", user.name)
    assert d.registration(user)["rejected"] is None, d.registration(user)

    # The tenant no longer accepts the token: 401, which a static token cannot refresh.
    srv.set(user, token="another-" + os.urandom(6).hex())
    d.ctl("check-in", "--user", user.name)
    rej = d.registration(user)["rejected"]
    assert rej and rej["http_status"] == 401, d.registration(user)
    lines = d.log_lines(f"MESSAGE_ID={ID_REJECTED}", f"LOCKWIPE_USER={user.name}", "LOCKWIPE_HTTP_STATUS=401")
    assert lines, d.log_tail()


def test_with_oauth_the_token_request_carries_the_version_too(make_daemon, make_server, make_user):
    """SAP: the version goes on every request to mobile services; lockwiped sends it to the
    token endpoint as well, and the check-in with the access token is a contact."""
    srv = make_server(extra_args=["--protocol", "sap-mobile-services", "--application-id", APP, "--app-versions", VERSION])
    srv.oauth(enabled=True, lifetime=60, client_id="lockwiped")
    srv.set("*", mode="ok", settings=POLICY_3_9)
    extra = (server_config(srv.url, 3600, 3) + f'protocol = "sap-mobile-services"\napplication_id = "{APP}"\n'
             + f'application_version = "{VERSION}"\n'
             + f'\n[server.oauth]\ntoken_url = "{srv.token_url}"\nclient_id = "lockwiped"\n')
    d = make_daemon(config=config_text(extra=extra))
    user = make_user()
    user.vault = d.make_vault(user, "vault")
    path = d.root / "rt"
    path.write_text(srv.issue_refresh_token(user) + "\n")
    os.chmod(path, 0o600)
    d.ok("register", "--user", user.name, "--dir", user.vault, "--refresh-token-file", path)
    wait_until(lambda: d.registration(user).get("last_attempt"), 10, "the first check-in was not answered", details=d.log_tail)
    reg = d.registration(user)
    assert reg["last_error"] is None and reg["rejected"] is None and reg["sap_connection"], reg
    tokens = srv.oauth_report()["requests"]
    assert tokens and all(t["app_version"] == VERSION for t in tokens), tokens
    sent = srv.stats()["sap_requests"]
    assert sent and all(r["app_version"] == VERSION for r in sent), sent
