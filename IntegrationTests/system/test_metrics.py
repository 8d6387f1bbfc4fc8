"""Prometheus metrics through node_exporter's textfile collector (`[metrics] textfile`).

The real daemon writes the file; a real Debian `prometheus-node-exporter` (unpacked into
.build-deps/ by scripts/install-deps, never installed as a service) is started by the
test on a loopback port with only the textfile collector, and the test reads what it
serves over HTTP. A read-only bind mount stands in for a metrics directory the daemon
cannot write (root can write anywhere else).
"""

from __future__ import annotations

import grp
import os
import re
import shutil
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from daemon_harness import config_text
from host_helpers import REPO, as_user_argv, child_env, run_as, wait_until

DAY = 86_400


# --------------------------------------------------------------------------- node_exporter


def find_node_exporter() -> str:
    candidates = [
        os.environ.get("LOCKWIPE_NODE_EXPORTER"),
        str(REPO / ".build-deps" / "prometheus-node-exporter" / "usr" / "bin" / "prometheus-node-exporter"),
        shutil.which("prometheus-node-exporter"),
    ]
    for c in candidates:
        if c and os.access(c, os.X_OK):
            return c
    pytest.fail(
        "Debian's prometheus-node-exporter is not available: run scripts/install-deps "
        "--for test (it unpacks it into .build-deps/) or set LOCKWIPE_NODE_EXPORTER"
    )


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class NodeExporter:
    def __init__(self, directory: Path, log: Path, user=None):
        self.directory = directory
        self.log = log
        self.user = user
        self.proc = None
        self.url = None

    def start(self):
        binary = find_node_exporter()
        if self.user is not None:
            # Another account may not reach the repository (a checkout under /root): a copy
            # beside the log, in the test's own 0755 directory.
            copy = self.log.parent / "prometheus-node-exporter"
            shutil.copy2(binary, copy)
            os.chmod(copy, 0o755)
            binary = str(copy)
        for _ in range(5):  # the port picked may be taken by someone else meanwhile
            port = free_port()
            with open(self.log, "ab") as log:
                self.proc = subprocess.Popen(
                    as_user_argv(self.user, [
                        binary,
                        f"--web.listen-address=127.0.0.1:{port}",
                        "--collector.disable-defaults",
                        "--collector.textfile",
                        f"--collector.textfile.directory={self.directory}",
                    ]),
                    stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=child_env(),
                )
            self.url = f"http://127.0.0.1:{port}/metrics"
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and self.proc.poll() is None:
                try:
                    self.scrape_text()
                    return self
                except OSError:
                    time.sleep(0.1)
            self.stop()
        pytest.fail("node_exporter did not serve /metrics:\n" + self.log.read_text(errors="replace"))

    def scrape_text(self) -> str:
        with urllib.request.urlopen(self.url, timeout=5) as r:
            return r.read().decode()

    def scrape(self) -> dict:
        return parse_exposition(self.scrape_text())

    def stop(self):
        p, self.proc = self.proc, None
        if p is not None and p.poll() is None:
            p.terminate()
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(timeout=5)


@pytest.fixture
def node_exporter():
    """Factory: node_exporter(directory, user=None) started on a free loopback port (as
    `user` when given, as root otherwise); ended at teardown, also when the test fails."""
    started = []

    def make(directory: Path, user=None):
        e = NodeExporter(directory, directory.parent / "node-exporter.log", user)
        started.append(e)
        return e.start()

    try:
        yield make
    finally:
        for e in started:
            e.stop()


SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)",?')


def parse_exposition(text: str) -> dict:
    """{metric name: [(labels, value)]} from the text format, label values unescaped."""
    out: dict = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = SAMPLE.match(line)
        assert m, f"not a sample line: {line!r}"
        labels = {}
        for name, raw in LABEL.findall(m.group(2) or ""):
            labels[name] = re.sub(r'\\(.)', lambda e: {"n": "\n"}.get(e.group(1), e.group(1)), raw)
        out.setdefault(m.group(1), []).append((labels, float(m.group(3))))
    return out


def value(metrics: dict, name: str, **labels):
    found = [v for l, v in metrics.get(name, []) if all(l.get(k) == str(x) for k, x in labels.items())]
    assert len(found) == 1, f"{name}{labels}: expected one sample, found {found}; served: {sorted(metrics)}"
    return found[0]


# --------------------------------------------------------------------------- helpers


def metrics_daemon(make_daemon, textfile_dir_name="textfile", create_dir=True, lock=7, wipe=30, start=True, metrics=""):
    d = make_daemon(config=None, start=False)
    directory = d.root / textfile_dir_name
    if create_dir:
        directory.mkdir(mode=0o755)
    d.metrics_dir = directory
    d.metrics_file = directory / "lockwipe.prom"
    d.write_config(config_text(lock=lock, wipe=wipe, extra=f'\n[metrics]\ntextfile = "{d.metrics_file}"\n{metrics}'))
    if start:
        d.start()
    return d


def file_shows(d, needle, timeout=10):
    return wait_until(
        lambda: d.metrics_file.exists() and needle in d.metrics_file.read_text(),
        timeout, f"{d.metrics_file} to show {needle!r}",
        details=lambda: (d.metrics_file.read_text() if d.metrics_file.exists() else "(no file)") + "\n" + d.log_tail(),
    )


def check_config(d):
    return subprocess.run(
        [str(d.bins.lockwiped), "--check-config", "--config", str(d.config)],
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=30, env=child_env(),
    )


class ReadOnlyBind:
    """`directory` read-only for everyone, root included, until undone."""

    def __init__(self, directory: Path):
        self.directory = directory
        self.mounted = False

    def __enter__(self):
        subprocess.run(["mount", "--bind", str(self.directory), str(self.directory)], check=True)
        self.mounted = True
        subprocess.run(["mount", "-o", "remount,bind,ro", str(self.directory)], check=True)
        return self

    def undo(self):
        if self.mounted:
            subprocess.run(["umount", str(self.directory)], check=True)
            self.mounted = False

    def __exit__(self, *exc):
        self.undo()


# --------------------------------------------------------------------------- tests


def test_node_exporter_serves_the_registrations_state(make_daemon, make_user, node_exporter):
    d = metrics_daemon(make_daemon)
    user = make_user()
    vault = d.make_vault(user, "work")
    before = int(time.time())
    d.ok("register", "--user", user.name, "--dir", vault)
    file_shows(d, f'user="{user.name}"')
    exporter = node_exporter(d.metrics_dir)

    m = exporter.scrape()
    assert value(m, "node_textfile_scrape_error") == 0, exporter.scrape_text()
    status = d.status()
    reg = d.registration(user)
    assert value(m, "lockwipe_build_info", version=status["version"]) == 1
    for state in ("active", "locked", "lock-failed", "wipe-pending", "wiping", "wiped"):
        expected = 1 if state == "active" else 0
        assert value(m, "lockwipe_registration_state", user=user.name, uid=user.uid, state=state) == expected, state
    assert value(m, "lockwipe_registration_info", user=user.name, uid=user.uid, protection=reg["protection"]) == 1
    assert value(m, "lockwipe_registration_blocked", user=user.name) == 0
    assert value(m, "lockwipe_registration_check_in_failures", user=user.name) == 0
    assert 0 <= value(m, "lockwipe_registration_offline_seconds", user=user.name) < 60
    next_lock = value(m, "lockwipe_registration_next_action_seconds", user=user.name, action="lock")
    assert 7 * DAY - 60 < next_lock <= 7 * DAY
    contact = value(m, "lockwipe_registration_last_contact_timestamp_seconds", user=user.name)
    assert before - 1 <= contact <= time.time() + 1
    written = value(m, "lockwipe_metrics_last_write_timestamp_seconds")
    assert before - 1 <= written <= time.time() + 1
    assert value(m, "lockwipe_wipes_total", result="complete") == 0
    assert value(m, "lockwipe_degraded") == 0
    assert value(m, "lockwipe_machine_key_unavailable") == 0
    assert value(m, "lockwipe_registration_at_rest", user=user.name, uid=user.uid, at_rest=reg["at_rest"]) == 1

    # The file node_exporter reads (as root here): 0640, and nothing else left in the directory.
    assert os.stat(d.metrics_file).st_mode & 0o7777 == 0o640
    assert sorted(os.listdir(d.metrics_dir)) == ["lockwipe.prom"]

    # A lock shows at the next scrape: every state change rewrites the file.
    d.ok("lock", "--user", user.name)
    m = wait_until(
        lambda: (lambda s: s if value(s, "lockwipe_registration_state", user=user.name, state="locked") == 1 else None)(exporter.scrape()),
        10, "node_exporter to serve the lock", details=exporter.scrape_text,
    )
    assert value(m, "lockwipe_registration_state", user=user.name, state="active") == 0
    assert value(m, "lockwipe_registration_next_action_seconds", user=user.name, action="wipe") > 29 * DAY
    assert value(m, "lockwipe_metrics_last_write_timestamp_seconds") >= written

    # A wipe is counted.
    d.ok("wipe", "--user", user.name, "--yes")
    m = wait_until(
        lambda: (lambda s: s if value(s, "lockwipe_registration_state", user=user.name, state="wiped") == 1 else None)(exporter.scrape()),
        30, "node_exporter to serve the wipe", details=exporter.scrape_text,
    )
    assert value(m, "lockwipe_wipes_total", result="complete") == 1
    assert value(m, "lockwipe_wipes_total", result="incomplete") == 0
    assert "lockwipe_registration_next_action_seconds" not in m


def test_check_config_names_a_metrics_directory_it_cannot_write(make_daemon):
    d = metrics_daemon(make_daemon, create_dir=False, start=False)
    line = d.config.read_text().splitlines().index(f'textfile = "{d.metrics_file}"') + 1

    r = check_config(d)
    assert r.returncode == 1, r.stdout + r.stderr
    assert f"{d.config}:{line}: metrics.textfile: the directory {d.metrics_dir} does not exist" in r.stderr, r.stderr

    d.metrics_dir.mkdir(mode=0o755)
    r = check_config(d)
    assert r.returncode == 0, r.stderr
    assert f"metrics: written to {d.metrics_file}" in r.stdout

    with ReadOnlyBind(d.metrics_dir):
        r = check_config(d)
        assert r.returncode == 1, r.stdout + r.stderr
        assert f"{d.config}:{line}: metrics.textfile: the directory {d.metrics_dir} is not writable: Read-only file system" in r.stderr, r.stderr

    for bad, phrase in ((f'"{d.metrics_dir}/lockwipe.txt"', "ending in .prom"), ('"lockwipe.prom"', "must be an absolute path")):
        d.write_config(config_text(extra=f"\n[metrics]\ntextfile = {bad}\n"))
        r = check_config(d)
        assert r.returncode == 1 and "metrics.textfile: " in r.stderr and phrase in r.stderr, r.stderr


def test_a_metrics_file_that_cannot_be_written_never_stops_enforcement(make_daemon, make_user):
    # The directory is missing at start: the daemon says so, starts, and enforces.
    d = metrics_daemon(make_daemon, create_dir=False)
    assert d.running()
    assert d.log_lines("metrics.textfile", "does not exist", "enforces as configured"), d.log_tail()
    user = make_user()
    vault = d.make_vault(user, "work")
    d.ok("register", "--user", user.name, "--dir", vault)
    d.ok("lock", "--user", user.name)
    assert d.state_of(user) == "locked"

    # It appears: the next change writes the file, and the recovery is logged.
    d.metrics_dir.mkdir(mode=0o755)
    d.ok("unlock", "--user", user.name)
    file_shows(d, f'lockwipe_registration_state{{user="{user.name}",uid="{user.uid}",state="active"}} 1')
    d.wait_log(lambda l: "the metrics file is written again" in l, 10, "the recovery to be logged")

    # Read-only while the daemon runs: locks and unlocks go on, one error for the streak.
    failures_before = len(d.log_lines("cannot write the metrics file"))
    with ReadOnlyBind(d.metrics_dir) as ro:
        d.ok("lock", "--user", user.name)
        assert d.state_of(user) == "locked"
        d.wait_log(lambda l: "cannot write the metrics file" in l and "Read-only file system" in l, 10, "the failure to be logged")
        d.ok("unlock", "--user", user.name)
        d.ok("lock", "--user", user.name)
        assert d.state_of(user) == "locked"
        time.sleep(2.5)  # the writes those changes made (at least a second apart) have failed
        assert len(d.log_lines("cannot write the metrics file")) == failures_before + 1, d.log_tail()
        assert sorted(os.listdir(d.metrics_dir)) == ["lockwipe.prom"]
        ro.undo()
        d.ok("unlock", "--user", user.name)
        file_shows(d, f'lockwipe_registration_state{{user="{user.name}",uid="{user.uid}",state="active"}} 1')
    assert d.state_of(user) == "active"
    assert sorted(os.listdir(d.metrics_dir)) == ["lockwipe.prom"]


# --------------------------------------------------------------------------- who reads it


def default_group() -> tuple[str, int]:
    """The group the file gets by default: prometheus where it exists, else root's."""
    try:
        return "prometheus", grp.getgrnam("prometheus").gr_gid
    except KeyError:
        return "root", 0


def cannot_read(user, path):
    r = run_as(user, ["cat", str(path)])
    return r.returncode != 0 and "Permission denied" in r.stderr and r.stdout == ""


def test_by_default_other_users_cannot_read_the_metrics_file(make_daemon, make_user, node_exporter):
    """The file lists every registration (user, uid, state, last contact), which `status`
    shows an ordinary user only for her own: by default it is 0640 to the group
    node_exporter runs as (root's group where there is no prometheus group), never
    world-readable; node_exporter (as root here) still serves it."""
    d = metrics_daemon(make_daemon)
    owner, other = make_user(), make_user()
    d.ok("register", "--user", owner.name, "--dir", d.make_vault(owner, "work"))
    file_shows(d, f'user="{owner.name}"')

    st = os.stat(d.metrics_file)
    name, gid = default_group()
    assert (st.st_mode & 0o7777, st.st_uid, st.st_gid) == (0o640, 0, gid), (oct(st.st_mode), st.st_uid, st.st_gid)
    for u in (owner, other):
        assert cannot_read(u, d.metrics_file), f"{u.name} can read {d.metrics_file}: {run_as(u, ['cat', str(d.metrics_file)])}"
    # Not even for a moment: every rewrite comes with the same mode and group.
    d.ok("lock", "--user", owner.name)
    file_shows(d, f'lockwipe_registration_state{{user="{owner.name}",uid="{owner.uid}",state="locked"}} 1')
    st = os.stat(d.metrics_file)
    assert (st.st_mode & 0o7777, st.st_gid) == (0o640, gid)
    assert sorted(os.listdir(d.metrics_dir)) == ["lockwipe.prom"]

    m = node_exporter(d.metrics_dir).scrape()
    assert value(m, "node_textfile_scrape_error") == 0
    assert value(m, "lockwipe_registration_state", user=owner.name, uid=owner.uid, state="locked") == 1

    r = check_config(d)
    assert r.returncode == 0, r.stderr
    assert f"metrics: written to {d.metrics_file}, mode 0640, group {name}" in r.stdout, r.stdout


def test_mode_and_group_as_configured_and_node_exporter_reads_it_through_the_group(
        make_daemon, make_user, make_group, node_exporter):
    """`[metrics] mode` and `group`: the file has them; node_exporter running as an
    account of that group (as Debian's runs as prometheus) scrapes it, a user outside
    the group cannot read it."""
    group = make_group()
    exporter_account = make_user(groups=(group,))
    d = metrics_daemon(make_daemon, metrics=f'mode = "0640"\ngroup = "{group}"\n')
    user, other = make_user(), make_user()
    d.ok("register", "--user", user.name, "--dir", d.make_vault(user, "work"))
    file_shows(d, f'user="{user.name}"')

    st = os.stat(d.metrics_file)
    assert (st.st_mode & 0o7777, st.st_uid, st.st_gid) == (0o640, 0, grp.getgrnam(group).gr_gid)
    assert cannot_read(other, d.metrics_file)
    assert run_as(exporter_account, ["cat", str(d.metrics_file)]).returncode == 0

    exporter = node_exporter(d.metrics_dir, user=exporter_account)
    m = exporter.scrape()
    assert value(m, "node_textfile_scrape_error") == 0, exporter.scrape_text()
    assert value(m, "lockwipe_registration_state", user=user.name, uid=user.uid, state="active") == 1

    # A mode that lets every local user read it is the operator's explicit choice.
    d.write_config(config_text(extra=f'\n[metrics]\ntextfile = "{d.metrics_file}"\nmode = "0644"\ngroup = "{group}"\n'))
    d.hup()
    wait_until(lambda: os.stat(d.metrics_file).st_mode & 0o7777 == 0o644, 10, "the reload to rewrite the file 0644", details=d.log_tail)
    assert run_as(other, ["cat", str(d.metrics_file)]).returncode == 0


def test_check_config_names_a_bad_mode_or_a_missing_group(make_daemon):
    d = metrics_daemon(make_daemon, start=False)
    for extra, key, phrase in (
        ('mode = "0666"', "metrics.mode", "lets others than root write the file"),
        ('mode = "rw-r-----"', "metrics.mode", "octal file mode"),
        ("mode = 640", "metrics.mode", "as a string"),
        ('user_labels = "no"', "metrics.user_labels", "must be true or false"),
        ('group = "lwt-no-such-group"', "metrics.group", 'the group "lwt-no-such-group" does not exist'),
    ):
        d.write_config(config_text(extra=f'\n[metrics]\ntextfile = "{d.metrics_file}"\n{extra}\n'))
        line = d.config.read_text().splitlines().index(extra) + 1
        r = check_config(d)
        assert r.returncode == 1, r.stdout + r.stderr
        assert f"{d.config}:{line}: {key}: " in r.stderr and phrase in r.stderr, r.stderr


def test_without_user_labels_no_user_name_or_uid_is_shown(make_daemon, make_user, node_exporter):
    """`[metrics] user_labels = false`: node_exporter serves the file to anyone who reaches
    its port; every per-registration series is labelled by the registration id (which
    `status --json` shows root), and no user name or uid appears anywhere."""
    d = metrics_daemon(make_daemon, metrics="user_labels = false\n")
    alice, bob = make_user(), make_user()
    d.ok("register", "--user", alice.name, "--dir", d.make_vault(alice, "a"))
    d.ok("register", "--user", bob.name, "--dir", d.make_vault(bob, "b"))
    d.ok("lock", "--user", bob.name)
    ids = {u.name: d.registration(u)["registration_id"] for u in (alice, bob)}
    assert all(re.fullmatch(r"[0-9a-f]{32}", i) for i in ids.values()), ids
    file_shows(d, f'lockwipe_registration_state{{registration="{ids[bob.name]}",state="locked"}} 1')

    exporter = node_exporter(d.metrics_dir)
    text = exporter.scrape_text()
    lockwipe_lines = [l for l in text.splitlines() if "lockwipe_" in l]
    for u in (alice, bob):
        for needle in (u.name, f'"{u.uid}"'):
            assert needle not in text and needle not in d.metrics_file.read_text(), f"{needle} is shown:\n" + "\n".join(lockwipe_lines)
    assert not [l for l in lockwipe_lines if "user=" in l or "uid=" in l], lockwipe_lines

    # The series and the alert rules' selectors (docs/fleet.md) work by registration.
    m = exporter.scrape()
    assert value(m, "node_textfile_scrape_error") == 0
    assert value(m, "lockwipe_registration_state", registration=ids[alice.name], state="active") == 1
    assert value(m, "lockwipe_registration_state", registration=ids[bob.name], state="locked") == 1
    assert value(m, "lockwipe_registration_info", registration=ids[bob.name], protection=d.registration(bob)["protection"]) == 1
    assert 7 * DAY - 60 < value(m, "lockwipe_registration_next_action_seconds", registration=ids[alice.name], action="lock") <= 7 * DAY
    assert value(m, "lockwipe_registration_next_action_seconds", registration=ids[bob.name], action="wipe") > 29 * DAY
    assert len([1 for l, _ in m["lockwipe_registration_blocked"]]) == 2
