"""A daemon that starts with the computer: a systemd user unit on Linux, a launchd agent
on macOS, one per vault.

:func:`plan` says what memvault would write for a vault (the file, its name, the
environment file that holds the daemon's secrets); :func:`install`, :func:`uninstall`
and :func:`status` act on it. Every file memvault writes ends with a digest of what it
wrote, so a file a person edited afterwards is told apart and never replaced or removed
without ``force``. The service manager is driven through its own command (``systemctl
--user``, ``launchctl``); when it does not answer, the file stays written and the
sentence says which command starts it.

Standard library only, like :mod:`memvault.gateway.autostart`.
"""

from __future__ import annotations

import hashlib
import os
import plistlib
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from memvault.errors import ConflictError, MemvaultError
from memvault.locations import PRIVATE_FILE

Kind = Literal["systemd", "launchd"]
_DIGEST = "memvault-digest:"
_COMMAND_TIMEOUT = 30.0  # a service manager that hangs is not waited on for ever
_STOP_SECONDS = 60  # the daemon drains for up to 2 x shutdown_grace_seconds (20 s by default)


class ServiceError(MemvaultError):
    """The service could not be installed, removed or asked about."""

    code = "service_failed"
    exit_code = 1


@dataclass(frozen=True)
class Service:
    """What memvault writes for one vault: the file, its name, the secrets' file."""

    kind: Kind
    vault: Path
    name: str  # the systemd unit's name, or the launchd label
    path: Path
    env_file: Path
    text: str

    def commands(self, action: Literal["start", "stop", "state"]) -> list[list[str]]:
        """The service manager's commands that start, stop or report the service."""
        if self.kind == "systemd":
            return {
                "start": [
                    ["systemctl", "--user", "daemon-reload"],
                    ["systemctl", "--user", "enable", "--now", self.name],
                ],
                "stop": [
                    ["systemctl", "--user", "disable", "--now", self.name],
                    ["systemctl", "--user", "daemon-reload"],
                ],
                "state": [["systemctl", "--user", "is-active", self.name]],
            }[action]
        domain = f"gui/{os.getuid()}"
        return {
            "start": [["launchctl", "bootstrap", domain, str(self.path)]],
            "stop": [["launchctl", "bootout", f"{domain}/{self.name}"]],
            "state": [["launchctl", "print", f"{domain}/{self.name}"]],
        }[action]


@dataclass(frozen=True)
class Outcome:
    """What an install, uninstall or status found and did."""

    kind: Kind
    name: str
    file: str
    env_file: str
    vault: str
    installed: bool
    edited: bool  # the file differs from what memvault wrote
    changed: bool  # this command wrote or removed the file
    state: str  # the service manager's word: active, inactive, ... or "unknown"
    message: str

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def plan(
    vault: Path,
    *,
    platform: str | None = None,
    home: Path | None = None,
    python: str | None = None,
) -> Service:
    """The service file for ``vault`` on ``platform`` (default: this machine's)."""
    platform = platform or sys.platform
    home = home or Path.home()
    python = python or sys.executable
    vault = vault.expanduser().absolute()
    try:
        str(vault).encode("utf-8")
    except UnicodeEncodeError:
        raise ServiceError(
            f"The vault's path {str(vault)!r} is not valid UTF-8, which a service file must "
            "be; move or rename the vault folder."
        ) from None
    slug = re.sub(r"[^a-z0-9]+", "-", vault.name.lower()).strip("-") or "vault"
    slug = f"{slug[:40]}-{hashlib.sha256(os.fsencode(vault)).hexdigest()[:6]}"
    config = Path(os.environ.get("XDG_CONFIG_HOME") or home / ".config")
    env_file = config / "memvault" / f"{slug}.env"
    if platform.startswith("linux"):
        name = f"memvault-{slug}.service"
        path = config / "systemd" / "user" / name
        return Service("systemd", vault, name, path, env_file, _unit(vault, python, env_file))
    if platform == "darwin":
        label = f"dev.memvault.{slug}"
        path = home / "Library" / "LaunchAgents" / f"{label}.plist"
        text = _plist(label, vault, python, env_file, home)
        return Service("launchd", vault, label, path, env_file, text)
    raise ServiceError(
        f"memvault service knows systemd (Linux) and launchd (macOS), not {platform}; "
        "run `memvault serve` with this system's own way of starting programs at login."
    )


def install(service: Service, *, force: bool = False, start: bool = True) -> Outcome:
    """Write the service file (and an empty secrets file), then start the service."""
    current = _read(service.path)
    edited = current is not None and not _intact(current)
    if edited and not force:
        raise ConflictError(
            f"{service.path} was edited since memvault wrote it, so it is kept as it is; "
            "run `memvault service install --force` to replace it (the edits are lost).",
            path=str(service.path),
        )
    changed = current != service.text
    if changed:
        _write(service.path, service.text, mode=0o644)
    if not service.env_file.exists():
        _write(service.env_file, _ENV_HEADER, mode=PRIVATE_FILE)
    if service.kind == "launchd":  # launchd opens the log file, not its folder
        (service.path.parents[1] / "Logs" / "memvault").mkdir(parents=True, exist_ok=True)
    verb = "Installed" if current is None else "Replaced" if changed else "Already installed"
    message = f"{verb} {service.path}."
    if not start:
        message = f"{message} Start it with: {_shown(service.commands('start'))}"
    elif (failed := _run(service, "start")) is not None:
        raise ServiceError(
            f"{message} But {failed}, so it did not start; start it yourself with: "
            f"{_shown(service.commands('start'))}",
            path=str(service.path),
        )
    else:
        message = f"{message} The daemon runs now and starts at every login."
    return _outcome(service, installed=True, edited=False, changed=changed, message=message)


def uninstall(service: Service, *, force: bool = False, stop: bool = True) -> Outcome:
    """Stop the service and remove its file; the secrets file is kept."""
    current = _read(service.path)
    if current is None:
        message = f"No memvault service is installed for {service.vault}; nothing to remove."
        return _outcome(service, installed=False, edited=False, changed=False, message=message)
    if not _intact(current) and not force:
        raise ConflictError(
            f"{service.path} was edited since memvault wrote it, so it is kept; remove it "
            "yourself, or run `memvault service uninstall --force`.",
            path=str(service.path),
        )
    failed = _run(service, "stop") if stop else None
    service.path.unlink(missing_ok=True)
    message = f"Removed {service.path}; {service.env_file} (the daemon's secrets) is kept."
    if failed is not None:  # a unit that never ran cannot be stopped: the file goes anyway
        message = f"{message} ({failed}.)"
    return _outcome(service, installed=False, edited=False, changed=True, message=message)


def status(service: Service) -> Outcome:
    """Whether the service is installed, edited since, and what its manager says of it."""
    current = _read(service.path)
    if current is None:
        message = f"No memvault service is installed for {service.vault}."
        return _outcome(service, installed=False, edited=False, changed=False, message=message)
    edited = not _intact(current)
    state = _state(service)
    message = f"{service.name} is installed ({state})" + (
        ", and was edited since memvault wrote it." if edited else "."
    )
    return _outcome(
        service, installed=True, edited=edited, changed=False, message=message, state=state
    )


# -- the files ---------------------------------------------------------------------------

_ENV_HEADER = """\
# Secrets for the memvault daemon, one NAME=value a line (the variables the vault's
# config names: api_key_env, token_env ...). Read by the service at start; keep it 0600.
"""


def _unit(vault: Path, python: str, env_file: Path) -> str:
    command = " ".join(
        _systemd_word(word) for word in (python, "-m", "memvault", "--vault", str(vault), "serve")
    )
    body = f"""\
# Written by `memvault service install`. memvault never replaces or removes this file once
# it was edited: change it freely, or run `memvault service install --force` to start over.
[Unit]
Description=memvault daemon for {_systemd_text(str(vault))}
After=network-online.target
Wants=network-online.target

[Service]
Type=simple
ExecStart={command}
EnvironmentFile=-{_systemd_text(str(env_file))}
Environment=PYTHONUNBUFFERED=1
Restart=on-failure
RestartSec=5
TimeoutStopSec={_STOP_SECONDS}

[Install]
WantedBy=default.target
"""
    return _stamped(body, "# {}\n")


def _plist(label: str, vault: Path, python: str, env_file: Path, home: Path) -> str:
    # launchd has no environment file: a shell reads it, then becomes the daemon.
    env = shlex.quote(str(env_file))
    serve = shlex.join([python, "-m", "memvault", "--vault", str(vault), "serve"])
    script = f"set -a; if [ -r {env} ]; then . {env}; fi; set +a; exec {serve}"
    logs = home / "Library" / "Logs" / "memvault"
    document = {
        "Label": label,
        "ProgramArguments": ["/bin/sh", "-c", script],
        "RunAtLoad": True,
        "KeepAlive": {"SuccessfulExit": False},  # again after a crash, not after a stop
        "ThrottleInterval": 5,
        "ExitTimeOut": _STOP_SECONDS,
        "EnvironmentVariables": {"PYTHONUNBUFFERED": "1"},
        "StandardOutPath": str(logs / f"{label}.log"),
        "StandardErrorPath": str(logs / f"{label}.log"),
    }
    return _stamped(plistlib.dumps(document).decode("utf-8"), "<!-- {} -->\n")


def _systemd_text(text: str) -> str:
    """``text`` where systemd expands specifiers and variables: ``%`` and ``$`` doubled."""
    return text.replace("%", "%%").replace("$", "$$")


def _systemd_word(word: str) -> str:
    """One ExecStart word, quoted as systemd reads it when it holds spaces or quotes."""
    word = _systemd_text(word)
    if re.fullmatch(r"[\w@%+=:,./$-]+", word):
        return word
    return '"' + word.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _stamped(body: str, line: str) -> str:
    return body + line.format(f"{_DIGEST} {_digest(body)}")


def _digest(body: str) -> str:
    return hashlib.sha256(body.encode("utf-8")).hexdigest()[:16]


def _intact(text: str) -> bool:
    """Whether ``text`` is still what memvault wrote (its last line the digest of the rest)."""
    body, _, last = text.rstrip("\n").rpartition("\n")
    found = re.search(rf"{_DIGEST} ([0-9a-f]{{16}})", last)
    return found is not None and found.group(1) == _digest(body + "\n")


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except UnicodeDecodeError:
        return ""  # not text: not what memvault wrote, so it counts as edited
    except OSError as exc:
        raise ServiceError(f"Cannot read {path}: {exc.strerror or exc}.") from None


def _write(path: Path, text: str, *, mode: int) -> None:
    """``text`` into ``path`` whole or not at all."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(text)
                handle.flush()
                os.fsync(handle.fileno())
            os.chmod(temporary, mode)
            os.replace(temporary, path)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise
    except OSError as exc:
        raise ServiceError(f"Cannot write {path}: {exc.strerror or exc}.") from None


# -- the service manager -----------------------------------------------------------------


def _run(service: Service, action: Literal["start", "stop"]) -> str | None:
    """Run the manager's commands for ``action``: None, or which one failed and why."""
    for command in service.commands(action):
        failure = _failure(command)
        if failure is not None:
            return f"`{shlex.join(command)}` failed ({failure})"
    return None


def _state(service: Service) -> str:
    command = service.commands("state")[0]
    if shutil.which(command[0]) is None:
        return "unknown"
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=_COMMAND_TIMEOUT, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    if service.kind == "systemd":
        return done.stdout.strip() or "unknown"
    return "loaded" if done.returncode == 0 else "not loaded"


def _failure(command: list[str]) -> str | None:
    """None when ``command`` succeeded, else why not, in a few words."""
    if shutil.which(command[0]) is None:
        return f"{command[0]} is not on PATH"
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=_COMMAND_TIMEOUT, check=False
        )
    except subprocess.TimeoutExpired:
        return f"no answer in {_COMMAND_TIMEOUT:.0f} s"
    except OSError as exc:
        return exc.strerror or str(exc)
    if done.returncode == 0:
        return None
    said = (done.stderr or done.stdout).strip().splitlines()
    return said[-1] if said else f"exit status {done.returncode}"


def _shown(commands: list[list[str]]) -> str:
    return " && ".join(shlex.join(command) for command in commands)


def _outcome(
    service: Service,
    *,
    installed: bool,
    edited: bool,
    changed: bool,
    message: str,
    state: str = "unknown",
) -> Outcome:
    return Outcome(
        kind=service.kind,
        name=service.name,
        file=str(service.path),
        env_file=str(service.env_file),
        vault=str(service.vault),
        installed=installed,
        edited=edited,
        changed=changed,
        state=state,
        message=message,
    )
