"""The nginx policy server shipped as an example (packaging/examples/nginx/, docs/nginx-server.md):
Debian's nginx with the shipped configuration, administered by the shipped lockwipe-server
script, serving the real daemon over TLS with a CA the test makes.

nginx (unpacked into .build-deps/ by scripts/install-deps, or /usr/sbin/nginx, or
$LOCKWIPE_NGINX) runs as root in the foreground with everything in its own temp dir
(prefix, pid, error and access logs, temp paths) on a free loopback port; the shipped
lockwipe-server.conf is used as it is, only its paths and port replaced. The test stops
nginx and removes that directory whatever happens.
"""

import base64
import contextlib
import hashlib
import http.client
import json
import os
import re
import secrets
import shlex
import shutil
import signal
import socket
import ssl
import stat
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from daemon_harness import config_text, server_config
from host_helpers import as_user_argv, empty_or_absent, fingerprint, run_as, wait_until
from test_server import make_pki

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "packaging" / "examples" / "nginx"
PATH_PREFIX = "/mobileservices/settingsExchange/v1/registrations/"
OUTBOX_PREFIX = "/lockwipe/v1/registrations/"


def nginx_binary():
    for candidate in (os.environ.get("LOCKWIPE_NGINX"),
                      REPO / ".build-deps" / "nginx" / "usr" / "sbin" / "nginx", "/usr/sbin/nginx"):
        if candidate and os.access(candidate, os.X_OK):
            return str(candidate)
    pytest.fail("no nginx: run scripts/install-deps --for test (it unpacks Debian's nginx into .build-deps/) "
                "or set LOCKWIPE_NGINX")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Nginx:
    """nginx serving the shipped lockwipe-server.conf from `root`, and the shipped admin
    script pointed at it."""

    def __init__(self, root: Path, client_certificates=False):
        self.root = root
        self.data = root / "data"
        (root / "pki").mkdir()
        self.pki = make_pki(root / "pki")
        self.port = free_port()
        self.generation_port = free_port()
        self.url = f"https://localhost:{self.port}"
        for d in ("logs", "tmp"):
            (root / d).mkdir()
        site = (EXAMPLE / "lockwipe-server.conf").read_text()
        site = site.replace("/var/lib/lockwipe-server", str(self.data))
        site = site.replace("/etc/lockwipe-server/tls/server.", f"{self.pki}/server.")
        if client_certificates:  # the shipped, commented-out lines, switched on
            site = site.replace("#ssl_client_certificate /etc/lockwipe-server/tls/client-ca.pem;",
                                f"ssl_client_certificate {self.pki}/ca.pem;")
            site = site.replace("#ssl_verify_client on;", "ssl_verify_client on;")
            assert "\n    ssl_verify_client on;" in site, site
        site = site.replace("/var/log/nginx/", f"{root}/logs/")
        site = re.sub(r"(?m)^(\s*)listen 8443 ssl;$", rf"\1listen 127.0.0.1:{self.port} ssl;", site)
        site = re.sub(r"(?m)^\s*listen \[::\]:8443 ssl;\n", "", site)
        site = re.sub(r"(?m)^(\s*)listen 127\.0\.0\.1:8442;$", rf"\1listen 127.0.0.1:{self.generation_port};", site)
        directives = re.sub(r"(?m)^\s*#.*\n", "", site)
        assert str(self.port) in directives and not re.search(r"/var/|/etc/", directives), directives
        assert f"127.0.0.1:{self.generation_port};" in directives, directives
        (root / "lockwipe-server.conf").write_text(site)
        temps = "".join(f"    {kind}_temp_path {root}/tmp/{kind};\n"
                        for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
        (root / "nginx.conf").write_text(
            f"pid {root}/nginx.pid;\nerror_log {root}/logs/error.log;\nworker_processes 1;\n"
            f"events {{}}\nhttp {{\n{temps}    access_log {root}/logs/access.log;\n"
            f"    include {root}/lockwipe-server.conf;\n}}\n")
        self.argv = [nginx_binary(), "-p", str(root), "-c", str(root / "nginx.conf"), "-e", str(root / "logs" / "error.log")]
        self.proc = None
        self.client_certificates = client_certificates
        self.tls = ssl.create_default_context(cafile=str(self.pki / "ca.pem"))

    def admin(self, *args, ok=True):
        r = subprocess.run([str(EXAMPLE / "lockwipe-server"), "--dir", str(self.data), "--nginx", shlex.join(self.argv),
                            *args], capture_output=True, text=True, timeout=30)
        if ok:
            assert r.returncode == 0, f"lockwipe-server {' '.join(args)}: {r.returncode}\n{r.stdout}{r.stderr}"
        return r

    def start(self):
        # The files nginx includes exist before it starts (a first `policy` writes them).
        if not (self.data / "tokens.map").exists():
            self.admin("--no-reload", "policy", "--clear")
        self.proc = subprocess.Popen(self.argv + ["-g", "daemon off;"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        wait_until(lambda: self.proc.poll() is not None or self.answer("nobody")[0] == 401, 10,
                   "nginx does not answer a check-in without a token with 401",
                   details=lambda: f"{self.answer('nobody')}\n{self.error_log()}")
        assert self.proc.poll() is None, f"nginx exited: {self.proc.stderr.read().decode()}{self.error_log()}"

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGQUIT)
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)

    def error_log(self):
        with contextlib.suppress(OSError):
            return (self.root / "logs" / "error.log").read_text()[-3000:]
        return ""

    def answer(self, user, token=None):
        """(status, x-message-code, body) of one fresh check-in request, as lockwiped makes it."""
        try:
            if self.client_certificates:
                self.tls.load_cert_chain(str(self.pki / "client.pem"), str(self.pki / "client.key"))
            c = http.client.HTTPSConnection("localhost", self.port, context=self.tls, timeout=3)
            headers = {"Authorization": f"Bearer {token}"} if token else {}
            c.request("GET", PATH_PREFIX + user, headers=headers)
            r = c.getresponse()
            result = (r.status, r.getheader("x-message-code"), r.read().decode())
            c.close()
            return result
        except OSError as e:
            return (None, None, str(e))

    def upload(self, user, name, body=b"", token=None, method="PUT", headers=()):
        """(status, headers, body) of one outbox request, as lockwiped makes it (the path
        is sent as it is: nginx normalizes it)."""
        c = http.client.HTTPSConnection("localhost", self.port, context=self.tls, timeout=10)
        try:
            h = {"Content-Type": "application/octet-stream", **dict(headers)}
            if token:
                h["Authorization"] = f"Bearer {token}"
            c.request(method, f"{OUTBOX_PREFIX}{user}/outbox/{name}", body=body if method == "PUT" else None, headers=h)
            r = c.getresponse()
            return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
        finally:
            c.close()

    def workers(self):
        found = []
        for pid in filter(str.isdigit, os.listdir("/proc")):
            with contextlib.suppress(OSError):
                stat = Path(f"/proc/{pid}/stat").read_text()
                if int(stat.rsplit(")", 1)[1].split()[1]) == self.proc.pid:
                    found.append(pid)
        return found

    def serving(self, user, token, status, code=None, contains=""):
        """Waits until nginx, reloaded by the admin script, answers `user` so, and its
        old worker is gone: until then a request on a connection the daemon keeps alive
        may still be answered by the old worker with the old configuration."""
        def settled():
            a = self.answer(user, token)
            return a[0] == status and a[1] == code and contains in a[2] and len(self.workers()) == 1
        wait_until(settled, 10, f"nginx does not answer {user} with {status} {code or ''} {contains} from one worker",
                   details=lambda: f"{self.answer(user, token)}, workers {self.workers()}\n{self.error_log()}")


@contextlib.contextmanager
def running_nginx(before_start=None, **kw):
    """nginx started on the shipped configuration; before_start(server) runs the admin
    script first, as the install steps do (--no-reload, before nginx reads the maps)."""
    root = Path(tempfile.mkdtemp(prefix="lwt-nginx-"))
    os.chmod(root, 0o755)  # nginx's workers (nobody) read the settings documents
    server = None
    try:
        server = Nginx(root, **kw)
        if before_start:
            before_start(server)
        server.start()
        yield server
    finally:
        if server:
            server.stop()
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def nginx():
    with running_nginx() as server:
        yield server


def served(make_daemon, server):
    return make_daemon(config=config_text(extra=server_config(server.url, 3600, 3, ca_file=server.pki / "ca.pem")))


def registered(d, server, make_user, token=True, extra=()):
    user = make_user()
    user.vault = d.make_vault(user, f"vault-{user.name}", files={"work.txt": b"field data\n"})
    extra = list(extra)
    if token:
        user.token = server.admin("token", user.name).stdout.strip()
        assert re.fullmatch(r"[0-9a-f]{64}", user.token), user.token
        server.serving(user.name, user.token, 200)  # nginx reloads in the background
        path = d.root / f"token-{user.name}"
        path.write_text(user.token + "\n")
        os.chmod(path, 0o600)
        extra += ["--token-file", path]
    d.ok("register", "--user", user.name, "--dir", user.vault, *extra)
    wait_until(lambda: d.registration(user).get("last_attempt"), 10,
               "the check-in a registration makes at once was not answered")
    return user


def test_lock_wipe_block_and_policy_written_by_the_admin_script_reach_the_daemon(nginx, make_daemon, make_user):
    nginx.admin("policy", "--lock-days", "3", "--wipe-days", "9")
    d = served(make_daemon, nginx)
    a = registered(d, nginx, make_user)
    b = registered(d, nginx, make_user)

    # The settings document, served as a static file: a contact, with the global policy.
    for user in (a, b):
        reg = d.registration(user)
        assert reg["last_error"] is None and reg["credentials"] == "token", reg
        assert reg["policy"] == {"offline_days_before_lock": 3, "offline_days_before_wipe": 9, "source": "server"}, reg

    # A policy of a's own; b keeps the global one.
    nginx.admin("policy", "--user", a.name, "--lock-days", "5", "--wipe-days", "20")
    nginx.serving(a.name, a.token, 200, contains='"blockDisconnectedPeriod": 5')
    for user in (a, b):
        assert "contact ok" in d.ok("check-in", "--user", user.name).out
    assert d.registration(a)["policy"]["offline_days_before_lock"] == 5, d.registration(a)
    assert d.registration(a)["policy"]["offline_days_before_wipe"] == 20, d.registration(a)
    assert d.registration(b)["policy"]["offline_days_before_lock"] == 3, d.registration(b)

    # Lock: 403 TRAFFIC_REG_LOCKED from the order map.
    nginx.admin("lock", a.name)
    nginx.serving(a.name, a.token, 403, "TRAFFIC_REG_LOCKED", '"TRAFFIC_REG_LOCKED"')
    d.ctl("check-in", "--user", a.name)
    reg = d.registration(a)
    assert reg["state"] == "locked" and reg["lock_trigger"] == "server", reg
    assert d.state_of(b) == "active"

    # ok: the document again, a contact.
    nginx.admin("ok", a.name)
    nginx.serving(a.name, a.token, 200)
    r = d.ok("check-in", "--user", a.name)
    assert "contact ok" in r.out and d.registration(a)["last_error"] is None, r.describe()

    # Block: shown, no data touched; unblock lifts it.
    before_b = fingerprint(b.vault)
    nginx.admin("block", b.name, "TRAFFIC_REG_BLOCKED")
    nginx.serving(b.name, b.token, 403, "TRAFFIC_REG_BLOCKED")
    assert d.ctl("check-in", "--user", b.name).code == 1
    reg = d.registration(b)
    assert reg["blocked"] is True and reg["blocked_code"] == "TRAFFIC_REG_BLOCKED" and reg["state"] == "active", reg
    assert fingerprint(b.vault) == before_b
    nginx.admin("unblock", b.name)
    nginx.serving(b.name, b.token, 200)
    d.ok("check-in", "--user", b.name)
    assert d.registration(b)["blocked"] is False, d.registration(b)

    # Wipe: a's vault only, nothing outside it (a symlink out of the vault).
    d.outside.joinpath("canary.txt").write_text("outside\n")
    (a.vault / "link").symlink_to(d.outside / "canary.txt")
    outside = fingerprint(d.outside)
    before_b = fingerprint(b.vault)
    nginx.admin("wipe", a.name)
    nginx.serving(a.name, a.token, 403, "TRAFFIC_REG_WIPED")
    d.ctl("check-in", "--user", a.name)
    wait_until(lambda: empty_or_absent(a.vault), 5, "the wipe ordered through nginx did not happen", details=d.log_tail)
    assert d.registration(a)["state"] == "wiped", d.registration(a)
    wipes = [e for e in d.history(a) if e["kind"] == "wipe"]
    assert wipes and wipes[-1]["trigger"] == "server", wipes
    assert fingerprint(d.outside) == outside and fingerprint(b.vault) == before_b

    # The server keeps only hashes of the tokens.
    for path in nginx.data.rglob("*"):
        if path.is_file():
            assert a.token not in path.read_text() and b.token not in path.read_text(), f"a token is stored in {path}"

    # nginx's access log is the check-in log: each of them, with its answer.
    log = (nginx.root / "logs" / "lockwipe-server.access.log").read_text()
    assert re.search(rf'"GET {PATH_PREFIX}{a.name} HTTP/1.1" 403 .*"lockwiped/', log), log


def test_an_order_is_served_as_soon_as_the_admin_script_returns(nginx, make_daemon, make_user):
    """Issue 42: `lockwipe-server lock` returned while nginx, reloading in the background,
    still served the old maps, so a check-in made at once got the settings document (a
    contact) and the lock came a check-in later. The script returns once nginx serves
    the new files: no wait between the command and the check-in here."""
    d = served(make_daemon, nginx)
    a = registered(d, nginx, make_user)

    r = nginx.admin("lock", a.name)
    assert "nginx serves it now" in r.stdout, r.stdout
    c = d.ctl("check-in", "--user", a.name)
    reg = d.registration(a)
    assert reg["state"] == "locked" and reg["lock_trigger"] == "server", (c.describe(), reg)

    nginx.admin("ok", a.name)
    c = d.ctl("check-in", "--user", a.name)
    assert c.code == 0 and "contact ok" in c.out, c.describe()
    assert d.registration(a)["last_error"] is None, d.registration(a)

    nginx.admin("wipe", a.name)
    c = d.ctl("check-in", "--user", a.name)
    wait_until(lambda: empty_or_absent(a.vault), 5, f"the wipe ordered just before the check-in did not happen: {c.describe()}",
               details=d.log_tail)
    assert d.registration(a)["state"] == "wiped", d.registration(a)


def test_a_new_registration_after_a_wipe_order_is_not_wiped(nginx, make_daemon, make_user):
    """Issue 42: orders were keyed on the user name, so a wipe order outlived the
    registration it was given for: after the wipe, the user unregistered and registered
    again with a new token (as the status line advises), and the new registration's first
    check-in got the old 403 TRAFFIC_REG_WIPED and was wiped. An order is bound to the
    token it was given for; a new token is a new registration, without it."""
    d = served(make_daemon, nginx)
    a = registered(d, nginx, make_user)
    old_token = a.token
    nginx.admin("wipe", a.name)
    nginx.serving(a.name, a.token, 403, "TRAFFIC_REG_WIPED")
    d.ctl("check-in", "--user", a.name)
    wait_until(lambda: empty_or_absent(a.vault), 5, "the wipe ordered through nginx did not happen", details=d.log_tail)
    assert d.registration(a)["state"] == "wiped", d.registration(a)

    # The user starts again: unregistered, a new token from the admin script, registered.
    d.ok("unregister", "--user", a.name)
    r = nginx.admin("token", a.name, "--output", str(d.root / f"token-{a.name}"))
    assert "TRAFFIC_REG_WIPED" in r.stdout and "dropped" in r.stdout, r.stdout
    nginx.serving(a.name, (d.root / f"token-{a.name}").read_text().strip(), 200)
    new_vault = d.make_vault(a, f"new-{a.name}", files={"work.txt": b"the new registration's data\n"})
    before = fingerprint(new_vault)
    d.ok("register", "--user", a.name, "--dir", new_vault, "--token-file", d.root / f"token-{a.name}")
    wait_until(lambda: d.registration(a).get("last_attempt"), 10,
               "the check-in a registration makes at once was not answered")
    c = d.ctl("check-in", "--user", a.name)
    reg = d.registration(a)
    assert c.code == 0 and "contact ok" in c.out, (c.describe(), reg)
    assert reg["state"] == "active" and reg["last_error"] is None, reg
    assert fingerprint(new_vault) == before, "the old registration's wipe order touched the new registration's vault"
    # The old token is no longer anybody's; the order is not lying in wait for a next one.
    assert nginx.answer(a.name, old_token)[0] == 401
    assert "order: none" in nginx.admin("show").stdout


def test_a_wrong_or_missing_token_is_refused_and_gets_no_order(nginx, make_daemon, make_user):
    d = served(make_daemon, nginx)
    a = registered(d, nginx, make_user)
    other = registered(d, nginx, make_user)
    nobody = registered(d, nginx, make_user, token=False)
    nginx.admin("lock", a.name)
    # An order goes to the registration holding the user's token: without one, there is none to give it to.
    r = nginx.admin("lock", nobody.name, ok=False)
    assert r.returncode == 1 and f"{nobody.name} has no token" in r.stderr and "nothing changed" in r.stderr, r
    nginx.serving(a.name, a.token, 403, "TRAFFIC_REG_LOCKED")

    # No token; another user's token; a token one digit off; a revoked token: 401, no contact, no lock.
    wrong = a.token[:-1] + ("0" if a.token[-1] != "0" else "1")
    cases = [(nobody, None), (a, other.token), (a, wrong)]
    for user, token in cases:
        assert nginx.answer(user.name, token)[0] == 401, (user.name, token)
    for token in (other.token, wrong):
        path = d.root / "bad-token"
        path.write_text(token + "\n")
        os.chmod(path, 0o600)
        d.ok("credentials", "--user", a.name, "--token-file", path)
        for user in (a, nobody):
            r = d.ctl("check-in", "--user", user.name)
            assert r.code == 1 and "401" in r.out, r.describe()
            reg = d.registration(user)
            assert "401" in reg["last_error"] and reg["state"] == "active", reg
            assert os.listdir(user.vault) == ["work.txt"]

    # Revoked: the right token stops working.
    other_contact = d.registration(other)["last_contact"]
    nginx.admin("revoke", other.name)
    nginx.serving(other.name, other.token, 401)
    r = d.ctl("check-in", "--user", other.name)
    assert r.code == 1 and "401" in r.out, r.describe()
    assert d.registration(other)["last_contact"] == other_contact, "a refused check-in counted as a contact"


def test_the_admin_script_refuses_what_nginx_or_lockwiped_would_not_take(nginx):
    r = nginx.admin("policy", "--lock-days", "9", "--wipe-days", "3", ok=False)
    assert r.returncode == 1 and "the wipe (3 days) must come after the lock (9 days)" in r.stderr, r
    r = nginx.admin("block", "alice", "NO_SUCH_CODE", ok=False)
    assert r.returncode == 1 and "'NO_SUCH_CODE' is not a block code" in r.stderr, r
    r = nginx.admin("lock", "../etc", ok=False)
    assert r.returncode == 1 and "'../etc' is not a user name" in r.stderr, r
    # A configuration nginx refuses leaves the old files in place and says why.
    tokens = (nginx.data / "tokens.map").read_text()
    (nginx.root / "lockwipe-server.conf").write_text("this is not nginx configuration\n")
    r = nginx.admin("token", "carol", ok=False)
    assert r.returncode == 1 and "nginx refused its configuration" in r.stderr, r
    assert (nginx.data / "tokens.map").read_text() == tokens
    assert not (nginx.data / "settings" / "carol").exists()
    assert oct(os.stat(nginx.data / "tokens.map").st_mode & 0o777) == "0o600"
    shown = nginx.admin("show", ok=False).stdout
    assert "carol" not in shown


def test_client_certificates_of_the_operators_ca_when_switched_on(make_daemon, make_user):
    with running_nginx(client_certificates=True) as server:
        d = served(make_daemon, server)
        with_cert = registered(d, server, make_user,
                               extra=["--client-cert", server.pki / "client.pem", "--client-key", server.pki / "client.key"])
        without = registered(d, server, make_user)
        reg = d.registration(with_cert)
        assert reg["last_error"] is None and reg["credentials"] == "token+certificate", reg
        r = d.ctl("check-in", "--user", without.name)
        reg = d.registration(without)
        # nginx refuses a TLS connection without a client certificate with a 400: not a contact.
        assert r.code == 1 and "HTTP 400" in reg["last_error"], (r.describe(), reg)


# nginx's map block takes these words as its own parameters, not as keys.
MAP_KEYWORDS = ("include", "default", "hostnames", "volatile")


def test_users_named_as_nginx_map_keywords_are_served_like_any_other():
    tokens = {}

    def install_steps(server):
        # As docs/nginx-server.md's install steps run the script: before nginx reads the maps.
        for name in MAP_KEYWORDS:
            tokens[name] = server.admin("--no-reload", "token", name).stdout.strip()
        server.admin("--no-reload", "lock", "volatile")

    with running_nginx(before_start=install_steps) as server:
        for name in ("include", "default", "hostnames"):
            assert server.answer(name, tokens[name])[0] == 200, (name, server.answer(name, tokens[name]))
            assert server.answer(name)[0] == 401, name
        assert server.answer("volatile", tokens["volatile"])[:2] == (403, "TRAFFIC_REG_LOCKED")
        # No name's token is everybody's: not default's above all.
        for name in ("nobody", "include"):
            assert server.answer(name, tokens["default"])[0] == 401, name
        assert server.answer("volatile", tokens["include"])[0] == 401

        # Through the reload: orders and tokens of these names change like any other's.
        server.admin("lock", "default")
        server.serving("default", tokens["default"], 403, "TRAFFIC_REG_LOCKED")
        server.admin("ok", "volatile")
        server.serving("volatile", tokens["volatile"], 200)
        server.admin("revoke", "include")
        server.serving("include", tokens["include"], 401)
        server.serving("hostnames", tokens["hostnames"], 200)


def token_md5(token):
    """What tokens.map holds for a token: the MD5 of its Authorization header, base64url
    without padding (what nginx's secure_link compares)."""
    return base64.urlsafe_b64encode(hashlib.md5(f"Bearer {token}".encode()).digest()).decode().rstrip("=")


def older_configuration(current, keys):
    """The shipped configuration as it was before issue 42 (orders and documents keyed on
    the user name, no generation to ask), and with keys "bare" before issue 40 (maps on
    the bare name)."""
    conf = current.replace('map "u:$lockwipe_user:$lockwipe_token_md5" $lockwipe_order', 'map "u:$lockwipe_user" $lockwipe_order')
    conf = conf.replace("try_files /$lockwipe_token_md5 =404;", "try_files /$lockwipe_user =404;")
    conf = re.sub(r"(?s)\n# The generation of the files.*?\n}\n", "\n", conf)
    conf = re.sub(r"(?s)\n# What lockwipe-server asks after a reload.*\Z", "\n", conf)
    if keys == "bare":
        conf = conf.replace('map "u:$lockwipe_user"', "map $lockwipe_user")
    assert "$lockwipe_generation" not in conf and "lockwipe_token_md5 =404" not in conf, conf
    return conf


def older_files(data, keys, tokens, orders, policy):
    """The files an older lockwipe-server wrote: maps keyed on the user name (behind u:,
    or bare before issue 40), settings/USER, state.json without the token of an order."""
    prefix = "u:" if keys == "u:" else ""
    header = "# Written by lockwipe-server: do not edit.\n"
    (data / "settings").mkdir(parents=True)
    (data / "tokens.map").write_text(header + "".join(f'{prefix}{u} "{token_md5(t)}";\n' for u, t in sorted(tokens.items())))
    os.chmod(data / "tokens.map", 0o600)
    (data / "orders.map").write_text(header + "".join(f"{prefix}{u} {code};\n" for u, code in sorted(orders.items())))
    users = sorted(set(tokens) | set(orders))
    state = {"policy": policy, "users": {u: {"order": orders.get(u), "policy": None} for u in users}}
    (data / "state.json").write_text(json.dumps(state, indent=2) + "\n")
    os.chmod(data / "state.json", 0o600)
    document = {"mobileservices": {"settingsExchange": {"blockWipingPolicy": {
        "blockWipeEnabled": True, "blockDisconnectedPeriod": policy["lock_days"], "wipeDisconnectedPeriod": policy["wipe_days"]}}}}
    for u in users:
        (data / "settings" / u).write_text(json.dumps(document, indent=2) + "\n")


@pytest.mark.parametrize("keys", ["bare", "u:"])
def test_an_upgrade_changes_the_configuration_and_the_maps_together(keys):
    """A lockwipe-server.conf and files from before issue 42 (orders and documents keyed
    on the user name; with keys "bare", from before issue 40 too): the script refuses to
    reload nginx onto files that configuration would not match (no order would be served,
    every document a 404), and once the shipped configuration is in place, `rewrite`
    brings the files over: the tokens issued before keep working, an order stays with the
    token its user has, and an order of a user without a token (which reached no
    registration) is dropped, so that it never reaches the user's next registration."""
    tokens = {"alice": secrets.token_hex(32), "bob": secrets.token_hex(32)}
    policy = {"enabled": True, "lock_days": 3, "wipe_days": 9}
    current = {}

    def older_install(server):
        conf = server.root / "lockwipe-server.conf"
        current["conf"] = conf.read_text()
        conf.write_text(older_configuration(current["conf"], keys))
        older_files(server.data, keys, tokens, {"bob": "TRAFFIC_REG_LOCKED", "carol": "TRAFFIC_REG_WIPED"}, policy)

    with running_nginx(before_start=older_install) as server:
        conf = server.root / "lockwipe-server.conf"
        server.serving("alice", tokens["alice"], 200, contains='"blockDisconnectedPeriod": 3')
        server.serving("bob", tokens["bob"], 403, "TRAFFIC_REG_LOCKED")
        before = {p: p.read_text() for p in server.data.rglob("*") if p.is_file()}

        r = server.admin("lock", "alice", ok=False)
        assert r.returncode == 1, r
        assert "older than this script" in r.stderr and "nothing changed" in r.stderr, r.stderr
        assert 'no map on "u:$lockwipe_user:$lockwipe_token_md5"' in r.stderr and "lockwipe-server rewrite" in r.stderr, r.stderr
        assert ('map on "u:$lockwipe_user" (the token map)' in r.stderr) == (keys == "bare"), r.stderr
        assert {p: p.read_text() for p in server.data.rglob("*") if p.is_file()} == before, "a refused command changed files"
        assert server.answer("alice", tokens["alice"])[0] == 200

        # The upgrade: the shipped configuration, then the files.
        conf.write_text(current["conf"])
        r = server.admin("rewrite")
        assert "every file written again (nginx serves it now)" in r.stdout, r.stdout
        assert "carol: the TRAFFIC_REG_WIPED order is dropped: carol had no token" in r.stdout, r.stdout
        # No wait: the script returned once nginx served the new files.
        assert server.answer("alice", tokens["alice"])[0] == 200
        assert '"blockDisconnectedPeriod": 3' in server.answer("alice", tokens["alice"])[2]
        assert server.answer("bob", tokens["bob"])[:2] == (403, "TRAFFIC_REG_LOCKED")
        assert server.answer("alice", tokens["bob"])[0] == 401
        entries = [line for name in ("tokens.map", "orders.map")
                   for line in (server.data / name).read_text().splitlines() if not line.startswith("#")]
        assert sorted(entries) == sorted([f'u:alice "{token_md5(tokens["alice"])}";', f'u:bob "{token_md5(tokens["bob"])}";',
                                          f'u:bob:{token_md5(tokens["bob"])} TRAFFIC_REG_LOCKED;']), entries
        assert sorted(os.listdir(server.data / "settings")) == sorted(token_md5(t) for t in tokens.values())

        # carol's next registration does not get the wipe she was ordered before.
        carol = server.admin("token", "carol").stdout.strip()
        assert server.answer("carol", carol)[0] == 200
        # bob's next one does not get his lock.
        bob = server.admin("token", "bob").stdout.strip()
        assert server.answer("bob", bob)[0] == 200 and server.answer("bob", tokens["bob"])[0] == 401


def tree(root):
    """Every path under root (not following links), with its bytes for files."""
    return {str(p.relative_to(root)): (p.read_bytes() if p.is_file() and not p.is_symlink() else None)
            for p in root.rglob("*")}


def test_outbox_uploads_are_stored_per_registration_with_a_receipt(nginx):
    """PUT {url}/lockwipe/v1/registrations/USER/outbox/NAME.lwo (docs/server-protocol.md,
    "Outbox upload"): stored byte for byte in outbox/USER/HASH/, one directory per
    registration (token), readable by nginx's workers' user only; a receipt id in the
    answer and the access log; refused without USER's token, for a name the protocol does
    not give, and for anything but PUT; accepted with a wipe order pending."""
    alice = nginx.admin("token", "alice").stdout.strip()
    bob = nginx.admin("token", "bob").stdout.strip()
    outbox = nginx.data / "outbox"
    worker_uid = int(re.search(r"(?m)^Uid:\s+(\d+)", Path(f"/proc/{nginx.workers()[0]}/status").read_text()).group(1))
    st = os.lstat(outbox)
    assert stat.S_ISDIR(st.st_mode) and st.st_uid == worker_uid and stat.S_IMODE(st.st_mode) == 0o700, (st, worker_uid)

    body = secrets.token_bytes(70000) + b"\0\r\n"
    name = "3f0c2a9be1d84c7f.20261129t180000z.a1b2c3.lwo"
    status, headers, _ = nginx.upload("alice", name, body, alice)
    assert status == 201, (status, headers, nginx.error_log())
    receipt = headers.get("x-lockwipe-receipt", "")
    assert re.fullmatch(r"[0-9a-f]{32}", receipt), headers
    stored = outbox / "alice" / token_md5(alice) / name
    assert stored.read_bytes() == body
    for path in (stored, stored.parent, stored.parent.parent):
        assert os.lstat(path).st_mode & 0o077 == 0 and os.lstat(path).st_uid == worker_uid, (path, oct(os.lstat(path).st_mode))
    # The same name again (a retry after a lost answer): 204, also a receipt.
    status, headers, _ = nginx.upload("alice", name, body, alice)
    assert status == 204 and re.fullmatch(r"[0-9a-f]{32}", headers.get("x-lockwipe-receipt", "")), (status, headers)
    assert headers["x-lockwipe-receipt"] != receipt and stored.read_bytes() == body
    log = (nginx.root / "logs" / "lockwipe-server.access.log").read_text()
    assert re.search(rf'"PUT {OUTBOX_PREFIX}alice/outbox/{re.escape(name)} HTTP/1.1" 201 .* receipt={receipt}\b', log), log
    # Too big for client_max_body_size (256m): 413 on the Content-Length alone.
    status, _, _ = nginx.upload("alice", "big.lwo", b"", alice, headers={"Content-Length": str(257 << 20)})
    assert status == 413, status

    data_before = tree(nginx.data)
    # No token, another user's token, a token for another user's path: 401, nothing stored.
    for user, token in (("alice", None), ("alice", bob), ("bob", alice), ("nobody", alice)):
        status, headers, _ = nginx.upload(user, "x1.lwo", b"intruder", token)
        assert status == 401 and headers.get("www-authenticate") == "Bearer", (user, status, headers)
    # Names the protocol does not give, and ways out of the directory: 404 (or 400).
    for bad in ("x.txt", "../x.lwo", "..%2Fx.lwo", "%2e%2e/x.lwo", "Upper.lwo", "-x.lwo", ".lwo", "x.lwo/", "x.lwo%00"):
        status, _, _ = nginx.upload("alice", bad, b"outside", alice)
        assert status in (400, 404), (bad, status)
    status, _, _ = nginx.upload("../alice", "x2.lwo", b"outside", alice)
    assert status in (400, 404), status
    # Not served back, not deleted: only PUT.
    for method in ("GET", "HEAD", "DELETE", "POST"):
        status, _, answer = nginx.upload("alice", name, b"", alice, method=method)
        assert status != 200 and status not in (201, 204) and body not in answer, (method, status)
    assert tree(nginx.data) == data_before, "a refused upload changed files"

    # A pending wipe does not stop the upload: it is what a wiped registration sends before its wipe.
    nginx.admin("wipe", "alice")
    assert nginx.answer("alice", alice)[:2] == (403, "TRAFFIC_REG_WIPED")
    status, _, _ = nginx.upload("alice", "before-the-wipe.lwo", b"last work", alice)
    assert status == 201, status

    # A new token is a new registration: its uploads go to a directory of their own.
    new = nginx.admin("token", "alice").stdout.strip()
    assert nginx.upload("alice", "x3.lwo", b"old", alice)[0] == 401
    assert nginx.upload("alice", "after.lwo", b"new registration", new)[0] == 201
    assert (outbox / "alice" / token_md5(new) / "after.lwo").read_bytes() == b"new registration"
    assert sorted(os.listdir(outbox / "alice")) == sorted([token_md5(alice), token_md5(new)])

    # uploads: oldest first, which registration, never a token.
    r = nginx.admin("uploads", "alice")
    lines = r.stdout.splitlines()
    assert lines[0].split()[:2] == ["RECEIVED", "USER"] and len(lines) == 4, r.stdout
    old_label = f"earlier registration {token_md5(alice)[:8]}"
    for line, (label, file_name, size) in zip(lines[1:], [(old_label, name, len(body)),
                                                          (old_label, "before-the-wipe.lwo", 9),
                                                          ("current", "after.lwo", 16)]):
        assert f" alice  {label} " in line and line.endswith("/" + file_name) and f" {size} " in line, r.stdout
    assert alice not in r.stdout + r.stderr and new not in r.stdout + r.stderr
    listed = json.loads(nginx.admin("uploads", "--json").stdout)
    assert [(e["user"], e["registration"], e["name"]) for e in listed] == [
        ("alice", "earlier", name), ("alice", "earlier", "before-the-wipe.lwo"), ("alice", "current", "after.lwo")], listed
    assert "no outbox received from bob" in nginx.admin("uploads", "bob").stdout

    # remove keeps what was received, and says so.
    r = nginx.admin("remove", "alice")
    assert "the 3 outbox files received from alice are kept" in r.stdout, r.stdout
    assert stored.read_bytes() == body
    assert "current" not in nginx.admin("uploads", "alice").stdout


def test_open_runs_lockwipectl_and_says_when_it_is_missing(tmp_path):
    script = str(EXAMPLE / "lockwipe-server")
    missing = tmp_path / "no-such-lockwipectl"
    r = subprocess.run([script, "open", "x.lwo", "--key-file", "org.key"], capture_output=True, text=True,
                       env={**os.environ, "LOCKWIPE_CTL": str(missing)}, timeout=30)
    assert r.returncode == 127 and r.stdout == "", r
    assert f"cannot run '{missing}'" in r.stderr and "lockwipectl, from the lockwipe package" in r.stderr, r.stderr
    # What it runs, with the status and output of that command as its own.
    fake = tmp_path / "fake-lockwipectl"
    fake.write_text('#!/bin/sh\necho "$@"\nexit 3\n')
    fake.chmod(0o755)
    r = subprocess.run([script, "--dir", str(tmp_path / "unused"), "open", "a.lwo", "--key-file", "org.key",
                        "--output", "out", "--lockwipectl", str(fake)], capture_output=True, text=True, timeout=30)
    assert r.returncode == 3 and r.stdout == "outbox open a.lwo --key-file org.key --output out\n", r
    assert not (tmp_path / "unused").exists(), "open touched the server's directory"


# --------------------------------------------------------------------------- outboxes (issue 44)


def organisation_key(bins, root):
    """The organisation's key pair, made by lockwipectl recovery-key new: (private key
    file, its [keys] line)."""
    key = root / "organisation.key"
    r = subprocess.run([str(bins.lockwipectl), "recovery-key", "new", str(key)], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r
    return key, next(line for line in r.stdout.splitlines() if line.startswith("recovery_public_key"))


def outbox_daemon(make_daemon, bins, server, wait=20, extra=""):
    key_root = Path(tempfile.mkdtemp(prefix="lockwipe-org-", dir="/tmp"))
    key, line = organisation_key(bins, key_root)
    d = make_daemon(config=config_text(extra=server_config(server.url, 3600, 3, ca_file=server.pki / "ca.pem")
                                       + f'\n[keys]\n{line}\n\n[outbox]\ndirectory = "outbox"\nupload_wait_seconds = {wait}\n' + extra))
    shutil.move(str(key), d.root / "organisation.key")
    shutil.rmtree(key_root)
    return d, d.root / "organisation.key"


def write_outbox(user, count=50):
    """`count` pending records in the user's outbox, each with a marker of its own; the
    records by name."""
    box = user.vault / "outbox"
    box.mkdir()
    records = {f"record-{i:02}.json": (f'{{"record": {i}, "marker": "PENDING-{user.name}-{i:02}-{secrets.token_hex(8)}"}}\n'
                                       + "x" * (100 * i)).encode() for i in range(count)}
    for name, body in records.items():
        (box / name).write_bytes(body)
        os.chown(box / name, user.uid, user.gid)
        os.chmod(box / name, 0o600)
    os.chown(box, user.uid, user.gid)
    os.chmod(box, 0o700)
    return records


def received(server, user):
    """The outbox files nginx stored for `user`, by name."""
    base = server.data / "outbox" / user.name
    return {p.name: p for p in base.rglob("*.lwo")} if base.exists() else {}


def opened(server, bins, d, path, key):
    """The files of a received outbox, opened by lockwipe-server open (lockwipectl): by
    their path in the vault."""
    out = d.root / f"opened-{path.stem}"
    r = server.admin("open", str(path), "--key-file", str(key), "--output", str(out), "--lockwipectl", str(bins.lockwipectl))
    assert r.returncode == 0, r
    return {str(p.relative_to(out)): p.read_bytes() for p in out.rglob("*") if p.is_file()}


def test_a_shift_change_hands_the_pending_records_to_the_organisation_and_none_to_the_next_user(nginx, make_daemon, make_user, bins):
    """Issue 44: alice's 50 pending records are sealed before her vault locks, uploaded
    with her registration's token while bob works, and open with the organisation's key
    to the same bytes; bob reads none of them, neither in the vault nor sealed."""
    d, key = outbox_daemon(make_daemon, bins, nginx)
    alice = registered(d, nginx, make_user)
    bob = registered(d, nginx, make_user)
    records = write_outbox(alice)
    d.outside.joinpath("canary.txt").write_text("outside\n")
    (alice.vault / "outbox" / "escape").symlink_to(d.outside / "canary.txt")
    outside = fingerprint(d.outside)

    # Her lock (an administrator's here; the booted e2e test logs her out): sealed first.
    r = d.ok("lock", "--user", alice.name)
    assert d.state_of(alice) == "locked", r.describe()
    wait_until(lambda: len(received(nginx, alice)) == 1, 15, "alice's sealed outbox did not reach nginx", details=d.log_tail)
    wait_until(lambda: not list((d.state_dir / "outbox").glob("*.lwo")), 10, "the uploaded outbox is still kept on the machine")
    (path,) = received(nginx, alice).values()
    # nginx stored it in alice's registration's directory, and lockwipe-server lists it.
    assert path.parent.parent.name == alice.name
    listing = nginx.admin("uploads", alice.name).stdout
    assert path.name in listing and "current" in listing, listing

    # The organisation's key opens it to the 50 records, byte for byte, with their paths.
    files = opened(nginx, bins, d, path, key)
    want = {str((alice.vault / "outbox" / n).relative_to("/")): body for n, body in records.items()}
    assert files == want, sorted(set(files) ^ set(want))
    # What is sealed is ciphertext: no record, no marker.
    sealed = path.read_bytes()
    assert all(body[:40] not in sealed for body in records.values())
    # The symlink was not followed, and nothing outside the vault changed.
    assert fingerprint(d.outside) == outside

    # History and journal: sealed, then uploaded with nginx's receipt.
    events = d.history(alice)
    kinds = [e["kind"] for e in events]
    assert "outbox-sealed" in kinds and "outbox-uploaded" in kinds, kinds
    uploaded = next(e for e in events if e["kind"] == "outbox-uploaded")
    receipt = re.search(r"receipt ([0-9a-f]{32})", uploaded["detail"])
    assert receipt, uploaded
    log = (nginx.root / "logs" / "lockwipe-server.access.log").read_text()
    assert f"receipt={receipt.group(1)}" in log and f"/outbox/{path.name} HTTP/1.1\" 201" in log, log
    sealed_event = next(e for e in events if e["kind"] == "outbox-sealed")
    assert "sealed 50 file(s)" in sealed_event["detail"] and "1 entr(ies) skipped" in sealed_event["detail"], sealed_event

    # bob, who works on now, reads nothing of hers: not the vault, not a sealed copy.
    for target in [alice.vault / "outbox" / "record-01.json", path]:
        r = run_as(bob, ["cat", str(target)])
        assert r.returncode != 0 and r.stdout == "", (target, r)
    r = run_as(bob, ["find", str(d.state_dir), str(alice.vault), "-type", "f", "-readable"])
    assert r.stdout == "", r.stdout
    # Nor does alice herself, from a sealed copy: only the organisation's key opens one.
    r = subprocess.run(as_user_argv(alice, [str(bins.lockwipectl), "outbox", "open", str(path), "--key-file", str(key),
                                            "--output", str(d.root / "alice-try")]), capture_output=True, text=True, timeout=30)
    assert r.returncode != 0 and not (d.root / "alice-try").exists(), r


def test_a_server_wipe_waits_for_the_upload_and_certifies_the_receipt(nginx, make_daemon, make_user, bins):
    d, key = outbox_daemon(make_daemon, bins, nginx, wait=30)
    carol = registered(d, nginx, make_user)
    records = write_outbox(carol, count=5)
    nginx.admin("wipe", carol.name)
    nginx.serving(carol.name, carol.token, 403, "TRAFFIC_REG_WIPED")
    d.ctl("check-in", "--user", carol.name)
    wait_until(lambda: d.state_of(carol) == "wiped", 30, "the server's wipe did not happen", details=d.log_tail)
    assert empty_or_absent(carol.vault)
    # Uploaded first, then wiped: the receipt is in the certificate.
    kinds = [e["kind"] for e in d.history(carol)]
    assert kinds.index("outbox-uploaded") < kinds.index("wipe"), kinds
    cert = json.loads(d.ok("certificate", "--user", carol.name, "--json").out)
    outbox = cert["outbox"]
    assert outbox["handling"] == "uploaded" and len(outbox["copies"]) == 1, outbox
    copy = outbox["copies"][0]
    assert copy["uploaded"] and copy["http_status"] == 201 and re.fullmatch(r"[0-9a-f]{32}", copy["receipt"]), copy
    (path,) = received(nginx, carol).values()
    assert copy["name"] == path.name and copy["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
    assert "receipt" in d.ok("certificate", "--user", carol.name).out
    files = opened(nginx, bins, d, path, key)
    assert sorted(files.values()) == sorted(records.values())


def test_with_the_server_unreachable_an_admin_wipe_waits_its_bound_and_the_outbox_goes_at_the_next_contact(
        nginx, make_daemon, make_user, bins):
    d, key = outbox_daemon(make_daemon, bins, nginx, wait=3)
    dave = registered(d, nginx, make_user)
    erin = registered(d, nginx, make_user)
    records = write_outbox(dave, count=3)
    nginx.stop()
    started = time.monotonic()
    d.ok("wipe", "--user", dave.name, "--yes")
    elapsed = time.monotonic() - started
    assert d.state_of(dave) == "wiped" and empty_or_absent(dave.vault)
    assert elapsed < 25, f"the wipe waited {elapsed:.0f} s for an unreachable server (bound: 3 s)"
    cert = json.loads(d.ok("certificate", "--user", dave.name, "--json").out)
    assert cert["outbox"]["handling"] == "kept" and not cert["outbox"]["copies"][0]["uploaded"], cert["outbox"]
    kept = list((d.state_dir / "outbox").glob("*.lwo"))
    assert len(kept) == 1 and stat.S_IMODE(kept[0].stat().st_mode) == 0o600, kept
    # The server is back: the next contact (erin's: dave's registration is wiped and
    # checks in no more) uploads it with dave's registration's token.
    nginx.start()
    nginx.serving(erin.name, erin.token, 200)
    d.ok("check-in", "--user", erin.name)
    wait_until(lambda: len(received(nginx, dave)) == 1, 15, "the kept outbox was not uploaded at the next contact", details=d.log_tail)
    wait_until(lambda: not kept[0].exists(), 10, "the uploaded outbox is still kept")
    (path,) = received(nginx, dave).values()
    assert sorted(opened(nginx, bins, d, path, key).values()) == sorted(records.values())
