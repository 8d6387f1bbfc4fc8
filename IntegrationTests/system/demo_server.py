"""The policy server of the system tests: scripts/lockwipe-demo-server, really started
on a free loopback port (`DemoServer`); the fixture that makes one is in conftest.py.
"""

from __future__ import annotations

import json
import secrets
import subprocess
from pathlib import Path

from host_helpers import REPO, Processes, wait_until


class DemoServer:
    """scripts/lockwipe-demo-server on a free loopback port: the real HTTP server the
    daemon checks in with, told per registration how to answer."""

    def __init__(self, procs: Processes, root: Path, extra_args=()):
        self.procs = procs
        self.root = root
        self.extra_args = list(extra_args)
        self.proc = None
        self.url = None
        self.log_path = root / "demo-server.log"

    def start(self, port=0):
        assert self.proc is None
        url_file = self.root / f"url-{secrets.token_hex(3)}"
        self.log = open(self.log_path, "ab")
        self.proc = self.procs.spawn(None, [
            "/usr/bin/env", "python3", REPO / "scripts" / "lockwipe-demo-server",
            "--port", str(port), "--url-file", url_file, "--state", self.root / "demo-state.json",
            *self.extra_args,
        ], stdout=self.log, stderr=self.log)
        self.url = wait_until(
            lambda: url_file.exists() and url_file.read_text().strip(), 10,
            "the demo policy server did not start", details=lambda: self.log_path.read_text())
        return self

    def stop(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)
        self.proc = None
        if getattr(self, "log", None):
            self.log.close()
            self.log = None

    @property
    def port(self):
        return int(self.url.rsplit(":", 1)[1])

    def _request(self, method, path, body=None):
        import urllib.request
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(
            self.url + path, data=data, method=method,
            headers={"Content-Type": "application/json", "Connection": "close"})
        ctx = None
        if self.url.startswith("https"):
            import ssl
            ctx = ssl.create_default_context()
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        with urllib.request.urlopen(req, timeout=10, context=ctx) as r:
            return json.loads(r.read())

    def set(self, user, **config):
        """How the server answers `user` (a User, a name, or "*" for everyone else)."""
        name = user if isinstance(user, str) else user.name
        return self._request("POST", f"/control/{name}", config)

    def stats(self, user=None):
        if user is None:
            return self._request("GET", "/control")
        name = user if isinstance(user, str) else user.name
        return self._request("GET", f"/control/{name}")["stats"] or {"requests": 0, "answers": {}, "held": 0}

    def reset_stats(self):
        return self._request("POST", "/control/_stats/reset", {})

    # ---- OAuth 2.0 (the stand-in's token endpoint, POST /oauth/token)

    @property
    def token_url(self):
        return self.url + "/oauth/token"

    def oauth(self, **config):
        """Configure the token endpoint (enabled, lifetime, client_id, client_secret,
        rotate, answer, delay; revoke_access=True, reset_requests=True)."""
        return self._request("POST", "/control/_oauth", config)

    def issue_refresh_token(self, user):
        """A new refresh token for `user` (a User or a name), as an enrolment gives one."""
        name = user if isinstance(user, str) else user.name
        return self._request("POST", "/control/_oauth", {"issue": name})["refresh_token"]

    def oauth_report(self):
        """{"config", "requests": [{method, path, content_type, accept, authorization, form,
        body, answered}], "valid": {refresh token: user}, "consumed": {...}, "access": {...}}"""
        return self._request("GET", "/control/_oauth")

