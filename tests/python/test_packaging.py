"""The systemd units the release ships (packaging/): `systemd-analyze verify`
finds nothing to say of them on a root laid out as packaging/INSTALL.md
installs them (verify also checks that ExecStart's binary is there), and the
backup service runs as the server's user, on its data folder, hardened as it is."""

import os
import re
import shutil
import subprocess

import pytest
from conftest import TICKS_BIN

PACKAGING = os.path.join(os.path.dirname(__file__), "..", "..", "packaging")
UNITS = ["ticks.service", "ticks-backup.service", "ticks-backup.timer"]


def settings(unit):
    """`(section, key) -> [values]` of a unit file, in order."""
    found, section = {}, None
    with open(os.path.join(PACKAGING, unit)) as f:
        for line in f:
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            if line.startswith("["):
                section = line.strip("[]")
                continue
            key, value = line.split("=", 1)
            found.setdefault((section, key), []).append(value)
    return found


@pytest.fixture(scope="module")
def installed_root(tmp_path_factory):
    """A root with the system's units, the binary at /usr/local/bin/ticks and packaging/'s units in
    /etc/systemd/system, as scripts/release checks ticks.service."""
    if shutil.which("systemd-analyze") is None:
        if os.environ.get("CI"):
            pytest.fail("CI must check the units: systemd-analyze is missing (apt-get install systemd)")
        pytest.skip("systemd-analyze is missing (apt-get install systemd)")
    root = tmp_path_factory.mktemp("root")
    os.makedirs(root / "usr/local/bin")
    os.makedirs(root / "etc/systemd/system")
    os.makedirs(root / "usr/lib/systemd")
    shutil.copytree("/lib/systemd/system", root / "usr/lib/systemd/system", symlinks=True)
    shutil.copy(TICKS_BIN, root / "usr/local/bin/ticks")
    for unit in UNITS:
        shutil.copy(os.path.join(PACKAGING, unit), root / "etc/systemd/system" / unit)
    return root


@pytest.mark.parametrize("unit", UNITS)
def test_systemd_analyze_verify_says_nothing(installed_root, unit):
    # A bad value is only a warning (exit 0): anything printed fails, as in scripts/release.
    result = subprocess.run(["systemd-analyze", "verify", f"--root={installed_root}", unit],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0 and not (result.stdout + result.stderr).strip(), result.stdout + result.stderr


def test_the_backup_service_runs_as_the_server_on_its_data_folder():
    server, backup, timer = (settings(unit) for unit in UNITS)
    # The server's dynamic user is named after its unit: the backup asks for that name, so both share the UID.
    assert ("Service", "User") not in server and server[("Service", "DynamicUser")] == ["yes"]
    assert backup[("Service", "DynamicUser")] == ["yes"] and backup[("Service", "User")] == ["ticks"]
    assert backup[("Service", "Type")] == ["oneshot"]
    [command] = backup[("Service", "ExecStart")]
    data = re.search(r"--data-dir (\S+)", server[("Service", "ExecStart")][0]).group(1)
    assert re.search(rf"^/usr/local/bin/ticks backup --data-dir {re.escape(data)} --to (\S+) --keep 7 --quiet$",
                     command), command
    to = re.search(r"--to (\S+)", command).group(1)
    # Both folders are systemd's StateDirectory=, made 0700 and owned by the user.
    state = backup[("Service", "StateDirectory")][0].split()
    assert [f"/var/lib/{name}" for name in state] == [data, to], (state, data, to)
    assert backup[("Service", "StateDirectoryMode")] == ["0700"] and backup[("Service", "UMask")] == ["0077"]
    # Every hardening setting of the server, but for its network, which a backup has none of.
    network = {"RestrictAddressFamilies"}
    for key, values in server.items():
        if key[0] == "Service" and key[1] not in network | {"Type", "ExecStart", "Environment", "EnvironmentFile",
                                                            "KillSignal", "TimeoutStopSec", "Restart", "RestartSec",
                                                            "StateDirectory", "LimitNOFILE"}:
            assert backup.get(key) == values, (key, backup.get(key), values)
    assert backup[("Service", "RestrictAddressFamilies")] == ["AF_UNIX"]
    assert backup[("Service", "PrivateNetwork")] == ["yes"]
    assert timer[("Timer", "OnCalendar")] == ["daily"] and timer[("Timer", "Persistent")] == ["true"]
    assert timer[("Install", "WantedBy")] == ["timers.target"]


def test_the_release_ships_every_unit():
    with open(os.path.join(PACKAGING, "..", "scripts", "release")) as f:
        release = f.read()
    for unit in UNITS:
        assert f"packaging/{unit}" in release, unit
