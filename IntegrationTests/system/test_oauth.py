"""OAuth 2.0 against the stand-in's token endpoint (scripts/lockwipe-demo-server, POST
/oauth/token) over loopback http with allow_insecure_http: the real daemon and the real
lockwipectl. Access tokens that live 2 s, rotated refresh tokens that must survive
`kill -9`, invalid_grant, 401 then one refresh and one retry, the exact token request,
and token endpoints that answer nonsense.
"""

import base64
import json
import os
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request

from daemon_harness import config_text, server_config
from host_helpers import child_env, wait_until

ID_OAUTH_REFUSED = "0a8e9bb359af4c8e85451865e72e0d63"
CLIENT_ID = "lockwiped field:app"


def oauth_daemon(make_daemon, srv, interval=3600, timeout=3, secret_file=None, client_id=CLIENT_ID):
    oauth = f'\n[server.oauth]\ntoken_url = "{srv.token_url}"\nclient_id = "{client_id}"\n'
    if secret_file:
        oauth += f'client_secret_file = "{secret_file}"\n'
    text = config_text(extra=server_config(srv.url, interval, timeout) + oauth)
    return make_daemon(config=text)


def write_secret(d, name, text):
    path = d.root / name
    path.write_text(text + "\n")
    os.chmod(path, 0o600)
    return path


def enrolled(d, srv, make_user, refresh_token=None):
    """A registration given a refresh token the stand-in issued (or `refresh_token`), once
    the check-in a registration makes at once has been answered."""
    user = make_user()
    user.vault = d.make_vault(user, f"vault-{user.name}")
    token = refresh_token or srv.issue_refresh_token(user)
    d.ok("register", "--user", user.name, "--dir", user.vault,
         "--refresh-token-file", write_secret(d, f"rt-{user.name}", token))
    wait_until(lambda: d.registration(user).get("last_attempt"), 10,
               "the check-in a registration makes at once was not answered")
    return user


def token_requests(srv):
    return srv.oauth_report()["requests"]


def valid_refresh_tokens(srv, user):
    return [t for t, u in srv.oauth_report()["valid"].items() if u == user.name]


def post_token(srv, refresh_token, client_id=CLIENT_ID):
    """The token request a client would make, sent by the test: what the server says."""
    body = urllib.parse.urlencode({"grant_type": "refresh_token", "refresh_token": refresh_token,
                                   "client_id": client_id}).encode()
    req = urllib.request.Request(srv.token_url, data=body, method="POST",
                                 headers={"Content-Type": "application/x-www-form-urlencoded"})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def test_access_tokens_that_expire_every_2_s_are_refreshed_without_a_failed_check_in(make_daemon, make_server, make_user):
    srv = make_server()
    srv.oauth(enabled=True, lifetime=2, client_id=CLIENT_ID)
    d = oauth_daemon(make_daemon, srv, interval=1)
    user = enrolled(d, srv, make_user)
    assert d.registration(user)["credentials"] == "refresh-token"
    # Requested check-ins every 0.7 s (each also moves the scheduled one, interval = 1 s),
    # for 7 s: 3.5 token lifetimes.
    for _ in range(10):
        r = d.ok("check-in", "--user", user.name)
        assert "contact ok" in r.out, r.describe()
        time.sleep(0.7)
    stats = srv.stats(user)
    assert stats["requests"] >= 11, stats
    assert set(stats["answers"]) == {"ok"}, f"a check-in was refused: {stats}"
    reg = d.registration(user)
    assert reg["last_error"] is None, reg
    grants = [q for q in token_requests(srv) if q.get("answered") == "ok"]
    assert len(grants) >= 4, f"2-second tokens were not refreshed: {len(grants)} token requests"
    # Not refreshed for every request either: a token is reused while it lives.
    assert len(grants) < stats["requests"], (len(grants), stats)
    assert not d.log_lines(f"MESSAGE_ID={ID_OAUTH_REFUSED}")
    assert d.running()


def test_the_token_request_is_exactly_rfc_6749_section_6_with_basic_client_auth(make_daemon, make_server, make_user):
    srv = make_server()
    secret = "s3:cr et/+%"
    srv.oauth(enabled=True, lifetime=300, client_id=CLIENT_ID, client_secret=secret)
    d = make_daemon(start=False)
    secret_file = write_secret(d, "client-secret", secret)
    d.write_config(config_text(extra=server_config(srv.url, 3600, 3)
                               + f'\n[server.oauth]\ntoken_url = "{srv.token_url}"\nclient_id = "{CLIENT_ID}"\n'
                               + f'client_secret_file = "{secret_file}"\n'))
    d.start()
    user = make_user()
    user.vault = d.make_vault(user, f"vault-{user.name}")
    rt = srv.issue_refresh_token(user)
    d.ok("register", "--user", user.name, "--dir", user.vault, "--refresh-token-file", write_secret(d, "rt", rt))
    wait_until(lambda: d.registration(user).get("last_attempt"), 10, "no check-in after register")
    reqs = token_requests(srv)
    assert len(reqs) == 1, reqs
    q = reqs[0]
    assert q["method"] == "POST" and q["path"] == "/oauth/token", q
    assert q["content_type"] == "application/x-www-form-urlencoded", q
    assert q["accept"] == "application/json", q
    assert q["form"] == {"grant_type": ["refresh_token"], "refresh_token": [rt]}, q
    assert q["body"] == "grant_type=refresh_token&refresh_token=" + urllib.parse.quote_plus(rt), q
    # Section 2.3.1: id and secret form-encoded, then Basic.
    pair = urllib.parse.quote_plus(CLIENT_ID) + ":" + urllib.parse.quote_plus(secret)
    assert q["authorization"] == "Basic " + base64.b64encode(pair.encode()).decode(), q
    assert q["answered"] == "ok", q
    assert d.registration(user)["last_error"] is None, d.registration(user)
    # The access token, not the refresh token, reaches the settings endpoint.
    auth = srv.stats(user)["last_authorization"]
    assert auth.startswith("Bearer at-"), auth
    secrets_seen = [rt, secret, auth[len("Bearer "):], *valid_refresh_tokens(srv, user)]
    assert len(secrets_seen) == 4, secrets_seen
    for text in (d.ok("status").out, d.ok("status", "--json").out, d.ok("history", "--json").out, d.full_log()):
        for s in secrets_seen:
            assert s not in text, "a secret (refresh token, client secret or access token) shows up in output or the log"


def test_a_public_client_sends_its_client_id_in_the_body(make_daemon, make_server, make_user):
    srv = make_server()
    srv.oauth(enabled=True, lifetime=300, client_id=CLIENT_ID)
    d = oauth_daemon(make_daemon, srv)
    user = enrolled(d, srv, make_user)
    (q,) = token_requests(srv)
    assert q["authorization"] is None, q
    assert q["form"]["client_id"] == [CLIENT_ID] and q["form"]["grant_type"] == ["refresh_token"], q
    assert set(q["form"]) == {"grant_type", "refresh_token", "client_id"}, q
    assert d.registration(user)["last_error"] is None


def test_a_rotated_refresh_token_survives_kill_9_right_after_the_refresh(make_daemon, make_server, make_user):
    srv = make_server()
    srv.oauth(enabled=True, lifetime=300, client_id=CLIENT_ID)
    d = oauth_daemon(make_daemon, srv)
    user = enrolled(d, srv, make_user)
    # Force a refresh now: every access token stops working, the check-in gets a 401,
    # refreshes (the server rotates the refresh token) and retries; then SIGKILL at once.
    srv.oauth(revoke_access=True)
    d.ok("check-in", "--user", user.name)
    d.kill9()
    report = srv.oauth_report()
    (latest,) = valid_refresh_tokens(srv, user)
    used = [q["form"]["refresh_token"][0] for q in report["requests"]]
    assert len(used) == 2 and all(report["consumed"].get(t) == user.name for t in used), report
    assert latest not in used

    n = len(token_requests(srv))
    d.start()
    r = d.ok("check-in", "--user", user.name)
    assert "contact ok" in r.out, r.describe()
    # The next daemon's first refresh (its start-up check-in's, shared with the requested
    # one) uses the refresh token stored just before the crash, and the server takes it.
    after = token_requests(srv)[n:]
    assert after and after[0]["form"]["refresh_token"] == [latest], after
    assert [q["answered"] for q in after] == ["ok"] * len(after), after
    assert d.registration(user)["last_error"] is None
    # The refresh tokens the daemon used before the crash are dead at the server.
    for old in used:
        status, doc = post_token(srv, old)
        assert status == 400 and doc["error"] == "invalid_grant", (status, doc)


def test_invalid_grant_fails_the_check_in_says_how_to_re_enrol_and_stops_retrying(make_daemon, make_server, make_user):
    srv = make_server()
    srv.oauth(enabled=True, lifetime=300, client_id=CLIENT_ID)
    d = oauth_daemon(make_daemon, srv)
    user = enrolled(d, srv, make_user, refresh_token="rt-never-issued")
    hint = f"lockwipectl credentials --user {user.name} --refresh-token-file PATH"
    reg = d.registration(user)
    assert "invalid_grant" in (reg["last_error"] or "") and hint in reg["last_error"], reg
    r = d.ctl("check-in", "--user", user.name)
    assert r.code == 1 and "invalid_grant" in r.out and hint in r.out, r.describe()
    assert len(d.log_lines(f"MESSAGE_ID={ID_OAUTH_REFUSED}", f"LOCKWIPE_USER={user.name}")) == 1, d.log_tail()
    # The refused token is not sent again.
    assert len(token_requests(srv)) == 1, token_requests(srv)
    assert d.running()
    assert srv.stats(user)["requests"] == 0, "a settings request went out without an access token"

    # Re-enrol as the message says: the next check-in works.
    fresh = srv.issue_refresh_token(user)
    r = d.ok("credentials", "--user", user.name, "--refresh-token-file", write_secret(d, "rt-new", fresh))
    wait_until(lambda: d.registration(user)["last_error"] is None, 10, "re-enrolment did not bring a contact")
    assert srv.stats(user)["answers"] == {"ok": 1}, srv.stats(user)


def test_a_401_leads_to_exactly_one_refresh_and_one_retry(make_daemon, make_server, make_user):
    srv = make_server()
    srv.oauth(enabled=True, lifetime=300, client_id=CLIENT_ID)
    d = oauth_daemon(make_daemon, srv)
    user = enrolled(d, srv, make_user)
    n = len(token_requests(srv))
    srv.reset_stats()
    # The cached access token is revoked: 401, one refresh, one retry that succeeds.
    srv.oauth(revoke_access=True)
    r = d.ok("check-in", "--user", user.name)
    assert "contact ok" in r.out, r.describe()
    assert srv.stats(user)["requests"] == 2 and srv.stats(user)["answers"] == {"unauthorized": 1, "ok": 1}, srv.stats(user)
    assert len(token_requests(srv)) == n + 1

    # A server that refuses every token: still one refresh and one retry, then a failure.
    srv.reset_stats()
    srv.set(user, mode="unauthorized")
    r = d.ctl("check-in", "--user", user.name)
    assert r.code == 1 and "HTTP 401" in r.out, r.describe()
    assert srv.stats(user)["requests"] == 2, srv.stats(user)
    assert len(token_requests(srv)) == n + 2
    assert "HTTP 401" in d.registration(user)["last_error"]
    assert d.running()


def test_bad_token_answers_are_failed_contacts_and_lose_nothing(make_daemon, make_server, make_user):
    srv = make_server()
    srv.oauth(enabled=True, lifetime=300, client_id=CLIENT_ID)
    d = oauth_daemon(make_daemon, srv, timeout=2)
    user = enrolled(d, srv, make_user)
    cases = {
        "garbage": "not a JSON object",
        "html": "an HTML page",
        "no-access-token": "without an access_token",
        "negative-expiry": "expires_in -30",
        "huge-expiry": "expires_in 1000000000000",
        "500": "HTTP 500",
        "slow": "timed out",
    }
    for answer, phrase in cases.items():
        srv.oauth(answer=answer, revoke_access=True, delay=4)
        r = d.ctl("check-in", "--user", user.name)
        assert r.code == 1, f"{answer}: " + r.describe()
        reg = d.registration(user)
        assert phrase in (reg["last_error"] or ""), f"{answer}: {reg['last_error']}"
        assert d.running(), f"{answer}: the daemon died\n" + d.log_tail()
    # Nothing lost: the refresh token the daemon holds still works (answers that rotated
    # it while being unusable left the new one stored).
    srv.oauth(answer="ok")
    r = d.ok("check-in", "--user", user.name)
    assert "contact ok" in r.out, r.describe()
    assert d.registration(user)["last_error"] is None
    assert not d.log_lines(f"MESSAGE_ID={ID_OAUTH_REFUSED}")


def test_a_refresh_token_without_server_oauth_is_a_clear_failure(make_daemon, make_server, make_user):
    srv = make_server()
    d = make_daemon(config=config_text(extra=server_config(srv.url, 3600, 3)))
    user = make_user()
    user.vault = d.make_vault(user, f"vault-{user.name}")
    d.ok("register", "--user", user.name, "--dir", user.vault, "--refresh-token-file", write_secret(d, "rt", "rt-x"))
    wait_until(lambda: d.registration(user).get("last_error"), 10, "no failed check-in after register")
    assert "[server.oauth] is not configured" in d.registration(user)["last_error"], d.registration(user)
    assert srv.stats(user)["requests"] == 0


def test_check_config_names_file_line_and_key_of_every_oauth_problem(make_daemon):
    d = make_daemon(start=False)
    missing_secret = d.root / "no-such-secret"
    d.write_config(
        '[server]\nurl = "https://mdm.example.com"\n\n'
        f'[server.oauth]\nclient_secret_file = "{missing_secret}"\n')
    d.dropins.mkdir(parents=True, exist_ok=True)
    dropin = d.dropins / "50-oauth.toml"
    dropin.write_text('# override\n[server.oauth]\ntoken_url = "ftp://idp.example.com/token"\n')
    r = subprocess.run([str(d.bins.lockwiped), "--check-config", "--config", str(d.config)],
                       stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=30, env=child_env())
    assert r.returncode == 1, r
    lines = r.stderr.splitlines()
    expected = [
        (f"{d.config}:5: server.oauth.client_secret_file: {missing_secret}: cannot be read"),
        (f"{dropin}:3: server.oauth.token_url: must start with https://"),
        (f"{dropin}:2: server.oauth.client_id: missing"),
    ]
    for prefix in expected:
        assert [l for l in lines if l.startswith(prefix)], f"no line starting {prefix!r} in:\n{r.stderr}"
    assert not [l for l in lines if "server.oauth.token_url: missing" in l], r.stderr


def test_a_refresh_token_that_cannot_be_sent_is_refused_and_never_echoed(make_daemon, make_server, make_user):
    srv = make_server()
    srv.oauth(enabled=True, lifetime=300, client_id=CLIENT_ID)
    d = oauth_daemon(make_daemon, srv)
    user = make_user()
    user.vault = d.make_vault(user, f"vault-{user.name}")
    bad = d.ctl("register", "--user", user.name, "--dir", user.vault,
                "--refresh-token-file", write_secret(d, "rt-bad", "two words"))
    assert bad.code != 0 and "refresh token is not visible ASCII" in bad.text and "two words" not in bad.text, bad.describe()
    assert d.registration(user) is None
    empty = d.ctl("register", "--user", user.name, "--dir", user.vault, "--refresh-token-file", write_secret(d, "rt-empty", " "))
    assert empty.code != 0 and "is empty" in empty.text, empty.describe()
    assert token_requests(srv) == []


def test_sighup_rereads_the_client_secret_file(make_daemon, make_server, make_user):
    """A rotated client secret takes effect at reload; the next refresh authenticates with it."""
    srv = make_server()
    srv.oauth(enabled=True, lifetime=300, client_id=CLIENT_ID, client_secret="first")
    d = make_daemon(start=False)
    secret_file = write_secret(d, "client-secret", "first")
    d.write_config(config_text(extra=server_config(srv.url, 3600, 3)
                               + f'\n[server.oauth]\ntoken_url = "{srv.token_url}"\nclient_id = "{CLIENT_ID}"\n'
                               + f'client_secret_file = "{secret_file}"\n'))
    d.start()
    user = enrolled(d, srv, make_user)
    assert d.registration(user)["last_error"] is None, d.registration(user)

    srv.oauth(client_secret="second", revoke_access=True)
    secret_file.write_text("second\n")
    mark = len(d.log().splitlines())
    d.hup()
    wait_until(lambda: d.log_lines("reload", since=mark) or d.log_lines("MESSAGE_ID=cc457583ad0543b481bf8014c14f738e", since=mark),
               10, "SIGHUP was not acted on", details=d.log_tail)
    r = d.ok("check-in", "--user", user.name)
    assert "contact ok" in r.out, r.describe()
    last = token_requests(srv)[-1]
    pair = urllib.parse.quote_plus(CLIENT_ID) + ":second"
    assert last["authorization"] == "Basic " + base64.b64encode(pair.encode()).decode(), last
    assert last["answered"] == "ok", last
