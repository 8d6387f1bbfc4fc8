"""`apt purge lockwipe` keeps what it cannot give back (issue 27, item 3): the real
packaging/debian/postrm, run in a mount namespace of its own whose /etc, /var/lib and
/run are empty tmpfs (so nothing of the host is touched), with the state directory
lockwiped leaves behind. A key file in keys/ exists only while its encrypted vault holds
data; with one there, purge keeps the whole state directory (machine key, keys and the
database that names them) and says how to remove it; without, it removes it.
The e2e test (IntegrationTests/e2e/run, t_purge) purges the installed package the same way.
"""

import os
import shutil
import subprocess
from pathlib import Path

import pytest

POSTRM = Path(__file__).resolve().parents[2] / "packaging" / "debian" / "postrm"

SETUP = r"""
set -e
mount -t tmpfs tmpfs /etc
mount -t tmpfs tmpfs /var/lib
mount -t tmpfs tmpfs /run
mkdir -p /etc/lockwipe/lockwiped.toml.d /var/lib/lockwipe/keys /run/lockwipe
echo '# config' > /etc/lockwipe/lockwiped.toml
head -c 32 /dev/urandom > /var/lib/lockwipe/machine.key
echo db > /var/lib/lockwipe/state.sqlite
touch /var/lib/lockwipe/state.created
if [ "$KEY" = 1 ]; then echo '{"wrapped":"..."}' > /var/lib/lockwipe/keys/0123456789abcdef0123456789abcdef.key; fi
sh "$POSTRM" purge
echo "--- left:"
find /etc/lockwipe /var/lib/lockwipe /run/lockwipe 2>/dev/null | sort
"""


def purge(key: bool):
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("needs root and unshare(1) for a mount namespace of its own")
    p = subprocess.run(
        ["unshare", "--mount", "--propagation", "private", "sh", "-c", SETUP],
        env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "POSTRM": str(POSTRM), "KEY": "1" if key else "0"},
        capture_output=True, text=True, timeout=30)
    assert p.returncode == 0, p.stdout + p.stderr
    left = p.stdout.split("--- left:\n", 1)[1].split()
    return left, p.stderr


def test_purge_keeps_the_state_directory_while_an_encrypted_vault_holds_data():
    left, err = purge(key=True)
    for kept in ("/var/lib/lockwipe/machine.key", "/var/lib/lockwipe/keys/0123456789abcdef0123456789abcdef.key",
                 "/var/lib/lockwipe/state.sqlite", "/var/lib/lockwipe/state.created"):
        assert kept in left, f"purge removed {kept}, crypto-erasing the encrypted vault: {left}\n{err}"
    assert not any(p.startswith("/etc/lockwipe") or p.startswith("/run/lockwipe") for p in left), left
    assert "kept /var/lib/lockwipe" in err and "rm -rf /var/lib/lockwipe" in err, err


def test_purge_removes_the_state_directory_when_no_vault_key_is_left():
    left, err = purge(key=False)
    assert left == [], f"purge left {left}\n{err}"
    assert err == "", err


def test_after_purge_a_reinstalled_lockwiped_opens_the_locked_encrypted_vault(make_daemon, make_user):
    """The whole story on a real fscrypt vault: registered, written, locked (the key out of
    the kernel, the data unreadable even to root), lockwiped stopped, purge run on its
    state directory; then lockwiped started again on what purge left (as a reinstall
    does) unlocks the vault and the data reads back."""
    from test_vault import encrypted_fs, put_files, register_encrypted

    daemon = make_daemon()
    user = make_user()
    with encrypted_fs(daemon) as mnt:
        vault = mnt / "vault"
        register_encrypted(daemon, user, vault)
        files = put_files(user, vault)
        daemon.ok("lock", "--user", user.name)
        assert not (vault / "notes.txt").exists(), "the locked vault still shows its names"
        daemon.stop()

        setup = r"""
set -e
mount -t tmpfs tmpfs /etc
mount -t tmpfs tmpfs /run
mount -t tmpfs tmpfs /var/lib
mkdir -p /etc/lockwipe /run/lockwipe /var/lib/lockwipe
mount --bind "$STATE" /var/lib/lockwipe
sh "$POSTRM" purge
"""
        p = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c", setup],
                           env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "POSTRM": str(POSTRM), "STATE": str(daemon.state_dir)},
                           capture_output=True, text=True, timeout=30)
        assert (daemon.state_dir / "machine.key.cred").exists(), f"purge removed the vault's keys: {sorted(os.listdir(daemon.state_dir))}"
        assert p.returncode == 0 and "kept /var/lib/lockwipe" in p.stderr, p.stdout + p.stderr

        daemon.start()
        assert daemon.state_of(user) == "locked"
        daemon.ok("unlock", "--user", user.name)
        for rel, content in files.items():
            assert (vault / rel).read_bytes() == content, rel
