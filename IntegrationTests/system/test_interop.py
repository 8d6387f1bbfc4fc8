"""Generic varlink tooling works: the daemon driven by an independent client, the
`varlink` package from PyPI (scripts/test installs it when it is missing)."""

import pytest

varlink = pytest.importorskip(
    "varlink", reason="the PyPI varlink package is missing (scripts/test installs it)"
)


def client(d):
    return varlink.Client(address=f"unix:{d.socket}")


def test_get_info_lists_both_interfaces(daemon):
    with client(daemon) as c, c.open("org.varlink.service") as service:
        info = service.GetInfo()
    assert info["product"] == "lockwiped"
    assert info["version"] == daemon.ok("--version").out.split()[-1]
    assert set(info["interfaces"]) == {"org.varlink.service", "io.lockwipe.Manager"}


def test_interface_descriptions_parse_with_the_reference_scanner(daemon):
    with client(daemon) as c, c.open("org.varlink.service") as service:
        for name in ("io.lockwipe.Manager", "org.varlink.service"):
            text = service.GetInterfaceDescription(name)["description"]
            parsed = varlink.Interface(text)  # raises on anything that is not valid varlink IDL
            assert parsed.name == name
            if name == "io.lockwipe.Manager":
                for method in ("GetStatus", "Lock", "Unlock", "Wipe", "Register", "GetHistory"):
                    assert parsed.get_method(method), f"{method} is missing from the description"


def test_get_status_through_the_generic_client(daemon, make_user):
    user = make_user()
    vault = daemon.make_vault(user, "vault")
    daemon.ok("register", "--user", user.name, "--dir", vault)
    with client(daemon) as c, c.open("io.lockwipe.Manager") as manager:
        status = manager.GetStatus()
        regs = status["registrations"]
        assert [r["user"] for r in regs] == [user.name]
        assert regs[0]["state"] == "active"
        assert regs[0]["directories"] == [str(vault)]
        # The same answer as lockwipectl's stable JSON.
        assert daemon.status()["registrations"][0]["user"] == user.name


def test_errors_arrive_as_varlink_errors(daemon):
    with client(daemon) as c, c.open("io.lockwipe.Manager") as manager:
        with pytest.raises(varlink.VarlinkError) as e:
            manager.GetStatus(user="no-such-user-here")
        assert e.value.error() == "io.lockwipe.Manager.NoSuchRegistration"
        assert e.value.parameters()["user"] == "no-such-user-here"
    with client(daemon) as c, c.open("org.varlink.service") as service:
        with pytest.raises(varlink.VarlinkError) as e:
            service.GetInterfaceDescription("com.example.Nothing")
        assert e.value.error() == "org.varlink.service.InterfaceNotFound"
