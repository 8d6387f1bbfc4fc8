"""Configuration: --check-config, drop-ins, defaults, reload and refusal to start."""

import subprocess

import pytest

from daemon_harness import config_text
from host_helpers import child_env, wait_until

GOOD = """\
[policy]
offline_days_before_lock = 7    # integer >= 0, 0 = never
offline_days_before_wipe = 30

[lock]
terminate_processes = true
terminate_grace_seconds = 5

[hooks]
timeout_seconds = 30

[notify]
warn_before = 172800    # seconds; 0 = never warn

[control]
admin_group = "lockwipe"
max_connections = 64
max_message_bytes = 65536
idle_timeout_seconds = 60
"""

BAD = """\
[policy]
offline_days_before_lock = 5
offline_days_before_wipe = 3

[lock]
terminate_grace_seconds = "soon"

[hooks]
timout_seconds = 5
"""


def check_config(d):
    return subprocess.run(
        [str(d.bins.lockwiped), "--check-config", "--config", str(d.config)],
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=30,
        env=child_env(),
    )


def show(r):
    return f"exit {r.returncode}\n--- stdout ---\n{r.stdout}--- stderr ---\n{r.stderr}"


def problem_lines(r, path):
    return [l for l in r.stderr.splitlines() if l.startswith(f"{path}:")]


def test_check_config_accepts_a_good_file(make_daemon):
    d = make_daemon(config=GOOD, start=False)
    r = check_config(d)
    assert r.returncode == 0, "--check-config rejected the documented example: " + show(r)


def test_check_config_reports_every_problem_with_file_key_and_line(make_daemon):
    d = make_daemon(config=BAD, start=False)
    r = check_config(d)
    assert r.returncode == 1, "--check-config accepted a broken file: " + show(r)
    lines = problem_lines(r, d.config)
    f = d.config

    def has(prefix, key):
        return any(l.startswith(prefix) and key in l for l in lines)

    assert has(f"{f}:9:", "timout_seconds"), (
        "the unknown key [hooks] timout_seconds (line 9) is not reported as "
        f"'{f}:9: KEY: message':\n" + show(r)
    )
    assert has(f"{f}:6:", "terminate_grace_seconds"), (
        "the wrong type of terminate_grace_seconds (line 6) is not reported as "
        f"'{f}:6: KEY: message':\n" + show(r)
    )
    assert has(f"{f}:", "offline_days_before_"), (
        "offline_days_before_wipe (3) <= offline_days_before_lock (5) is not reported:\n"
        + show(r)
    )
    assert len(lines) >= 3, "not every problem is printed on its own line:\n" + show(r)


@pytest.mark.parametrize(
    "content",
    ['[policy]\noffline_days_before_lock = "seven"\n', "[policy\noffline_days_before_lock = 7\n"],
    ids=["wrong-type", "syntax-error"],
)
def test_check_config_names_the_broken_dropin(make_daemon, content):
    d = make_daemon(config=config_text(lock=2, wipe=5), start=False)
    d.dropins.mkdir()
    (d.dropins / "10-good.toml").write_text("[policy]\noffline_days_before_lock = 3\n")
    bad = d.dropins / "50-bad.toml"
    bad.write_text(content)
    r = check_config(d)
    assert r.returncode == 1, f"--check-config accepted the broken drop-in {bad}: " + show(r)
    assert problem_lines(r, bad), f"the problem is not reported as '{bad}:...':\n" + show(r)
    assert not problem_lines(r, d.dropins / "10-good.toml"), (
        "the good drop-in is blamed:\n" + show(r)
    )
    assert not problem_lines(r, d.config), "the good main file is blamed:\n" + show(r)


@pytest.mark.parametrize(
    "value, message",
    [("-3600", "must be 0 or more, not -3600"), ('"2d"', "must be an integer"), ("1.5", "must be an integer")],
    ids=["negative", "string", "float"],
)
def test_a_bad_warn_before_is_an_error_with_file_line_and_key(make_daemon, value, message):
    d = make_daemon(config=config_text(lock=2, wipe=5, extra=f"\n[notify]\nwarn_before = {value}\n"), start=False)
    line = d.config.read_text().splitlines().index(f"warn_before = {value}") + 1
    r = check_config(d)
    assert r.returncode == 1, f"--check-config accepted warn_before = {value}: " + show(r)
    assert any(
        l.startswith(f"{d.config}:{line}: notify.warn_before: {message}") for l in problem_lines(r, d.config)
    ), f"warn_before = {value} (line {line}) is not reported as '{d.config}:{line}: notify.warn_before: {message}':\n" + show(r)
    # The daemon refuses to start on it, naming the file.
    d.start(wait=False)
    try:
        code = d.proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pytest.fail(f"lockwiped started with warn_before = {value}\n" + d.log_tail())
    d.proc = None
    assert code == 1 and f"{d.config}:{line}: notify.warn_before" in d.log(), d.log_tail()


def test_check_config_validates_the_merged_policy(make_daemon):
    d = make_daemon(config=config_text(lock=2, wipe=5), start=False)
    d.dropins.mkdir()
    (d.dropins / "50-wipe.toml").write_text("[policy]\noffline_days_before_wipe = 1\n")
    r = check_config(d)
    assert r.returncode == 1, (
        "a drop-in making wipe (1) <= lock (2) was accepted: " + show(r)
    )
    assert "offline_days_before_" in r.stderr, show(r)


def test_dropins_apply_in_lexical_order_and_only_toml(make_daemon):
    d = make_daemon(config=config_text(lock=2, wipe=9), start=False)
    d.dropins.mkdir()
    (d.dropins / "20-later.toml").write_text("[policy]\noffline_days_before_lock = 4\n")
    (d.dropins / "10-earlier.toml").write_text("[policy]\noffline_days_before_lock = 3\n")
    (d.dropins / "99-ignored.toml.bak").write_text("this is not TOML [\n")
    r = check_config(d)
    assert r.returncode == 0, "only *.toml files are drop-ins: " + show(r)
    d.start()
    policy = d.status()["policy"]
    assert policy["offline_days_before_lock"] == 4, (
        f"drop-ins 10- then 20- should give lock = 4 (later wins), status says {policy}"
    )
    assert policy["offline_days_before_wipe"] == 9, policy


@pytest.mark.parametrize("kind", ["missing", "directory", "device"])
def test_a_named_config_that_is_missing_or_not_a_file_is_an_error(make_daemon, kind):
    """`--config FILE` names a file: a typo must not mean the defaults (never lock, never
    wipe). Only the default path may be missing (unit-tested: it is outside the test's
    directory)."""
    d = make_daemon(config=None, start=False)
    if kind == "directory":
        d.config.mkdir()
    elif kind == "device":
        d.config = d.root / "null-config"
        subprocess.run(["mknod", "-m", "0644", str(d.config), "c", "1", "3"], check=True)
    expected = {"missing": "no such file", "directory": "is a directory", "device": "not a regular file"}[kind]
    r = check_config(d)
    assert r.returncode == 1, f"--check-config accepted a {kind} --config: " + show(r)
    assert "configuration valid" not in r.stdout, show(r)
    assert any(expected in l for l in problem_lines(r, d.config)), (
        f"the problem is not reported as '{d.config}: ... {expected}':\n" + show(r))
    for leak in ("Domain", "error 256", "Error(", "NSCocoa"):
        assert leak not in r.stderr, f"the message leaks an internal name ({leak!r}):\n" + show(r)
    d.start(wait=False)
    try:
        code = d.proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pytest.fail(f"lockwiped started with a {kind} --config {d.config}\n" + d.log_tail())
    d.proc = None
    assert code == 1, f"lockwiped exited {code} on a {kind} --config, expected 1\n" + d.log_tail()
    assert f"{d.config}: " in d.log() and expected in d.log(), d.log_tail()


def test_check_config_orders_problems_by_file_and_line(make_daemon):
    main = """\
[policy]
offline_days_before_lock = 5
offline_days_before_wipe = "never"

[lock]
terminate_processes = 5
terminate_grace_seconds = "soon"

[hooks]
timout_seconds = 5

[control]
max_connections = -1
"""
    d = make_daemon(config=main, start=False)
    d.dropins.mkdir()
    (d.dropins / "10-a.toml").write_text("[wipe]\npasses = 99\n\n[control]\nadmin_group = 7\n")
    r = check_config(d)
    assert r.returncode == 1, show(r)
    order = [str(d.config), str(d.dropins / "10-a.toml")]
    places = []
    for l in r.stderr.splitlines():
        file, _, rest = l.partition(":")
        line = rest.split(":", 1)[0]
        assert file in order and line.isdigit(), f"a problem without FILE:LINE: {l!r}\n" + show(r)
        places.append((order.index(file), int(line)))
    assert len(places) >= 6, "not every problem is reported:\n" + show(r)
    assert places == sorted(places), "the problems are not in file and line order:\n" + show(r)
    assert "not a integer" not in r.stderr and "not an integer (5)" in r.stderr, (
        "terminate_processes = 5 is not reported as 'not an integer (5)':\n" + show(r))


def test_a_rejected_reload_shows_in_status_until_a_good_one(make_daemon):
    d = make_daemon(config=config_text(lock=3, wipe=9))
    assert not [w for w in d.status()["warnings"] if "reload" in w], d.status()["warnings"]
    d.write_config(BAD)
    d.hup()
    warnings = wait_until(
        lambda: [w for w in d.status()["warnings"] if "reload" in w and str(d.config) in w], 10,
        "status to warn that the reload was rejected, naming the file", details=d.log_tail)
    assert any(f"{d.config}:9:" in w for w in warnings), f"the warning does not say FILE:LINE: {warnings}"
    human = d.ctl("status")
    assert "reload" in human.out + human.err, "plain `lockwipectl status` does not show the warning: " + human.describe()
    assert d.status()["policy"]["offline_days_before_lock"] == 3, "the old configuration was not kept"

    d.write_config(config_text(lock=4, wipe=9))
    d.hup()
    wait_until(lambda: d.status()["policy"]["offline_days_before_lock"] == 4, 10,
               "the good reload to apply", details=d.log_tail)
    left = [w for w in d.status()["warnings"] if "reload" in w]
    assert not left, f"the warning stays after a good reload: {left}"


def test_daemon_refuses_to_start_on_broken_config(make_daemon):
    d = make_daemon(config=BAD, start=False)
    d.start(wait=False)
    p = d.proc
    try:
        code = p.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pytest.fail("lockwiped started with a broken configuration\n" + d.log_tail())
    d.proc = None
    assert code == 1, f"lockwiped exited {code} on a broken configuration, expected 1"
    assert str(d.config) in d.log(), (
        "the start-up failure does not name the broken file\n" + d.log_tail()
    )


def test_sighup_reloads_and_keeps_old_policy_on_broken_config(make_daemon):
    d = make_daemon(config=config_text(lock=3, wipe=9))
    d.write_config(config_text(lock=4, wipe=9))
    d.hup()
    wait_until(lambda: d.status()["policy"]["offline_days_before_lock"] == 4, 10,
               "SIGHUP did not load the new policy (lock 3 -> 4)", details=d.log_tail)

    mark = len(d.log().splitlines())
    d.write_config(BAD)
    d.hup()
    wait_until(lambda: d.log_lines(str(d.config), since=mark), 10,
               "after SIGHUP with a broken config the daemon logged no error naming "
               "the file", details=d.log_tail)
    assert d.running(), "the daemon died on a broken configuration at SIGHUP\n" + d.log_tail()
    policy = d.status()["policy"]
    assert (policy["offline_days_before_lock"], policy["offline_days_before_wipe"]) == (4, 9), (
        f"a broken config at SIGHUP replaced the policy: {policy}"
    )


def test_version(make_daemon):
    d = make_daemon()
    r = subprocess.run([str(d.bins.lockwiped), "--version"], capture_output=True,
                       text=True, timeout=10, stdin=subprocess.DEVNULL)
    assert r.returncode == 0, show(r)
    version = d.status()["version"]
    assert version in r.stdout, f"--version says {r.stdout!r}, status says {version!r}"


def test_a_socket_path_too_long_for_unix_sockets_is_named_before_start(make_daemon):
    """A --socket longer than sun_path holds (107 bytes) is refused by name, with the
    limit, for both programs, before the daemon touches anything."""
    d = make_daemon(start=False)
    long_path = str(d.root / ("s" * 60) / ("o" * 60) / "io.lockwipe.Manager")
    r = subprocess.run([str(d.bins.lockwiped), "--config", str(d.config), "--socket", long_path],
                       capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
    assert r.returncode == 64, show(r)
    assert f"--socket {long_path}" in r.stderr and "at most 107" in r.stderr, show(r)
    assert not (d.root / ("s" * 60)).exists(), "lockwiped made the socket's directory before refusing it"
    r = subprocess.run([str(d.bins.lockwipectl), "--socket", long_path, "status"],
                       capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
    assert r.returncode != 0 and "longer than 107 bytes" in r.stderr, show(r)
