"""Masking: a bundle's hostnames, IP addresses, user names and home paths replaced by
tokens, for a bundle that leaves the house (`evidence pack --mask`), in the spirit of
`sos clean`.

Masking is not redaction (redact.py destroys secrets): an identifier is replaced by the
same token everywhere, so the evidence still reads (one host, one user, one address
throughout), and the way back (the mapping) stays with the operator.

Invariants:
- What to mask is learned from the whole bundle first (and from this machine, when the
  bundle is its own); then every string of every record is masked, keys included, so an
  identifier seen in one file is masked in all of them.
- The same original, whatever its case, gets the same token in every file. Tokens have
  the shape of what they replace, so URLs, paths and addresses still parse: host-N,
  domain-N.invalid, user-N, 198.18.x.y (RFC 2544's benchmarking range), 2001:db8::N
  (RFC 3849's documentation prefix); /root becomes /home/user-N.
- Every IPv4 and IPv6 address is masked except loopback and unspecified ones (127.0.0.0/8,
  ::1, 0.0.0.0, ::): they name no machine, and "listens on 127.0.0.1" is evidence.
  A version string shaped like an address (1.2.3.4) is masked too: over-masking is
  preferred to a leak.
- Names are matched whole, as DNS labels are: "vm" is masked in "vm.example.com" and
  "/home/vm", not in "total-vm" (a kernel OOM line) or "vmstat". A longer name holding
  one ("alice-laptop") is another name, masked only if learned as one.
- A string that is a word of the bundle's vocabulary (an enum, const or property name of
  schemas/, a probe or file name of its manifest) is kept whole: masking it would make
  the bundle unreadable, and a vocabulary word names nobody.
- System accounts (root, nobody, daemon...; on this machine every uid below 1000) and users
  named as a program of the bundle (ollama running ollama) are not masked as user names:
  they name a service, not a person, and masking the word would hide what ran.
"""

import ipaddress
import json
import os
import pwd
import re
import socket
from collections.abc import Iterable, Iterator
from functools import cache
from pathlib import Path
from typing import Any

import orjson

from evidence.capture.bundle import BundleWriter
from evidence.schemas import SCHEMA_DIR

KINDS = ("hosts", "domains", "addresses", "users", "homes")
# Accounts of the distributions and their daemons: they name a service, not a person.
SYSTEM_USERS = frozenset(
    "root nobody nfsnobody daemon bin sys sync games man lp mail news uucp proxy www-data "  # noqa: SIM905
    "backup list irc gnats messagebus syslog sshd polkitd avahi colord rtkit dnsmasq ntp "
    "chrony postfix uuidd tss tcpdump "
    # Cloud images' default users, named after their distribution: masking the word would
    # hide which system it is ("Ubuntu 24.04 LTS"), and it names nobody.
    "ubuntu debian fedora centos core".split()
)
FIRST_PERSON_UID = 1000  # useradd's UID_MIN: below it, the distribution's system accounts
NOBODY_UID = 65534
LOCAL_NAMES = frozenset(
    "localhost localhost.localdomain ip6-localhost ip6-loopback ip6-localnet "  # noqa: SIM905
    "ip6-mcastprefix ip6-allnodes ip6-allrouters broadcasthost".split()
)
# Domains that name no organisation: "gpu-box.local" keeps its ".local".
GENERIC_DOMAINS = frozenset({"local", "lan", "localdomain", "home", "home.arpa", "internal"})
USER_KEYS = ("user", "username")
IPV4_TOKENS = ipaddress.IPv4Network("198.18.0.0/15")
IPV6_TOKENS = ipaddress.IPv6Network("2001:db8::/32")

_IPV6 = (
    r"(?<![0-9A-Za-z:.])(?:[0-9A-Fa-f]{0,4}:){2,7}"
    r"(?:(?:[0-9]{1,3}\.){3}[0-9]{1,3}|[0-9A-Fa-f]{1,4})?(?![0-9A-Za-z:]|\.[0-9])"
)
_IPV4 = r"(?<![0-9.])(?:[0-9]{1,3}\.){3}[0-9]{1,3}(?![0-9]|\.[0-9])"
_ADDRESS = re.compile(f"{_IPV6}|{_IPV4}")
# Root's home, as a path of its own: not /var/root, not /rootfs.
_ROOT_HOME = r"(?<![A-Za-z0-9._~/-])/root(?![A-Za-z0-9._-])"
_HOME = re.compile(r"(?<![A-Za-z0-9._-])/(?:home|Users)/([A-Za-z0-9][A-Za-z0-9._-]*)")
_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?"
# An /etc/hosts line: an address, then names only.
_HOSTS_LINE = re.compile(rf"^\s*(\S+)((?:[ \t]+{_LABEL}(?:\.{_LABEL})*)+)[ \t]*(?:#.*)?$", re.M)


@cache
def vocabulary() -> frozenset[str]:
    """Every enum, const and property name of the bundle schemas: the words a bundle is made
    of, which masking must leave whole."""
    words: set[str] = set()

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            words.update(k for k in node.get("properties", {}) if isinstance(k, str))
            words.update(v for v in node.get("enum", []) if isinstance(v, str))
            if isinstance(node.get("const"), str):
                words.add(node["const"])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    for path in sorted(SCHEMA_DIR.glob("*.schema.json")):
        walk(json.loads(path.read_text()))
    return frozenset(words)


class Masker:
    """The identifiers of one bundle and their tokens: learn_host() the bundle's own names,
    learn() every record, then mask() every record."""

    def __init__(self, keep: Iterable[str] = ()) -> None:
        self._keep = vocabulary() | frozenset(keep)
        self._tokens: dict[str, str] = {}  # original, lower case -> token
        self._kinds: dict[str, str] = {}  # original, lower case -> one of KINDS
        self._counts = {"host": 0, "domain": 0, "user": 0, 4: 0, 6: 0}
        self._system = set(SYSTEM_USERS)
        self._programs: set[str] = set()
        self._users: set[str] = set()
        self._hosts: set[str] = set()
        self._real: set[ipaddress.IPv4Address | ipaddress.IPv6Address] = set()
        self._root_home = False
        self._pattern: re.Pattern[str] | None = None

    def learn_host(self, name: str) -> None:
        """One of the bundle's own host names (its manifest's, its host probe's, this
        machine's): masked as a word, and in the fully qualified names it starts.
        Called before learn(), which looks for those."""
        name = name.lower().rstrip(".")
        self._hosts.add(name)
        self._hosts.add(name.partition(".")[0])

    def learn_local(self) -> None:
        """This machine's names and people, for a bundle captured here: the names it goes
        by, and every user with a uid from 1000 up; the others are system accounts."""
        for name in (os.uname().nodename, socket.gethostname()):
            self.learn_host(name)
        for entry in pwd.getpwall():
            if FIRST_PERSON_UID <= entry.pw_uid < NOBODY_UID:
                self._users.add(entry.pw_name)
            else:
                self._system.add(entry.pw_name.lower())

    def learn(self, record: Any) -> None:
        """Note the identifiers one record names: user fields, home paths, /etc/hosts
        lines, fully qualified names of the host, addresses."""
        fqdn = self._fqdn_pattern()
        for key, value in _items(record):
            if isinstance(value, dict) and "pid" in value:
                self._programs.update(_programs(value))  # a process: not a user name
            elif isinstance(value, str):
                if key in USER_KEYS:
                    self._users.add(value)
                self._learn_text(value, fqdn)

    def mask(self, record: Any) -> Any:
        """The record with every identifier learned, and every address, replaced."""
        if isinstance(record, str):
            return self.text(record)
        if isinstance(record, dict):
            return {self.text(k): self.mask(v) for k, v in record.items()}
        if isinstance(record, list):
            return [self.mask(v) for v in record]
        return record

    def text(self, value: str) -> str:
        if value in self._keep:
            return value
        return self._compiled().sub(self._token_of, value)

    def mapping(self) -> dict[str, dict[str, str]]:
        """Original -> token, by kind: the way back, for the operator only."""
        self._compiled()
        out: dict[str, dict[str, str]] = {kind: {} for kind in KINDS}
        for original, token in self._tokens.items():
            out[self._kinds[original]][original] = token
        return out

    def _learn_text(self, value: str, fqdn: re.Pattern[str] | None) -> None:
        self._users.update(m.group(1) for m in _HOME.finditer(value))
        self._root_home = self._root_home or re.search(_ROOT_HOME, value) is not None
        for match in _HOSTS_LINE.finditer(value):
            names = match.group(2).split()
            if _address(match.group(1)) is not None and (len(names) > 1 or "." in names[0]):
                self._hosts.update(n.lower() for n in names)
        if fqdn is not None:
            for match in fqdn.finditer(value):
                if match.group(0).rsplit(".", 1)[-1].isalpha():  # a domain ends in a word
                    self._hosts.add(match.group(0).lower())
        self._real.update(_addresses(value))

    def _fqdn_pattern(self) -> re.Pattern[str] | None:
        """The bundle's own host names followed by two labels or more: gpu-box.lab.example.com."""
        bare = sorted((h for h in self._hosts if h and "." not in h), key=lambda h: (-len(h), h))
        if not bare:
            return None
        names = "|".join(re.escape(h) for h in bare)
        return re.compile(rf"(?<![A-Za-z0-9_-])(?:{names})(?:\.{_LABEL}){{2,}}", re.IGNORECASE)

    def _compiled(self) -> re.Pattern[str]:
        """The one pattern every string is masked with, made once everything is learned."""
        if self._pattern is None:
            self._settle()
            words = sorted(
                (n for n, kind in self._kinds.items() if kind in ("hosts", "domains", "users")),
                key=lambda n: (-len(n), n),  # the longest first: an FQDN before its host
            )
            named = "|".join(re.escape(w) for w in words)
            parts = [_ADDRESS.pattern]
            if self._root_home:
                parts.append(_ROOT_HOME)
            if named:
                parts.append(rf"(?<![A-Za-z0-9_-])(?:{named})(?![A-Za-z0-9_-])")
            self._pattern = re.compile("|".join(parts), re.IGNORECASE)
        return self._pattern

    def _settle(self) -> None:
        """A token for everything learned, in a stable order."""
        hosts = self._hosts - LOCAL_NAMES - {""}
        for host in sorted(h for h in hosts if "." not in h):
            self._add(host, "hosts", self._next("host"))
        for host in sorted(h for h in hosts if "." in h):
            self._fqdn(host)
        for user in sorted(self._users, key=str.lower):
            if self._person(user):
                self._add(user.lower(), "users", self._next("user"))
        if self._root_home:
            self._add("/root", "homes", f"/home/{self._next('user')}")
        for address in sorted(self._real, key=lambda a: (a.version, int(a))):
            if not (address.is_loopback or address.is_unspecified):
                self._add(str(address), "addresses", self._address_token(address.version))

    def _fqdn(self, name: str) -> None:
        if _address(name) is not None:
            return
        head, _, domain = name.partition(".")
        host = self._tokens[head] if self._kinds.get(head) == "hosts" else self._next("host")
        if domain not in GENERIC_DOMAINS:
            self._add(domain, "domains", f"{self._next('domain')}.invalid")
            domain = self._tokens[domain]
        self._add(name, "hosts", f"{host}.{domain}")

    def _person(self, user: str) -> bool:
        low = user.lower()
        return not (
            len(low) < 2
            or low.isdigit()  # a uid with no passwd entry: a number, not a name
            or low in self._system
            or low.startswith(("systemd-", "_"))
            or low in self._programs
            or user in self._keep
            or low in self._tokens  # already a host of the same name: one token for both
        )

    def _add(self, original: str, kind: str, token: str) -> None:
        if original not in self._tokens:
            self._tokens[original], self._kinds[original] = token, kind

    def _next(self, stem: str) -> str:
        self._counts[stem] += 1
        return f"{stem}-{self._counts[stem]}"

    def _address_token(self, version: int) -> str:
        network = IPV4_TOKENS if version == 4 else IPV6_TOKENS
        while True:
            self._counts[version] += 1
            token = network[self._counts[version]]
            if token not in self._real:  # a real address in the token range stays unambiguous
                return str(token)

    def _token_of(self, match: re.Match[str]) -> str:
        found = match.group(0)
        address = _address(found)
        original = found.lower() if address is None else str(address)
        return self._tokens.get(original, found)  # loopback, unspecified, not an address: kept


def _programs(process: dict[str, Any]) -> Iterator[str]:
    """The names a process record runs under: its comm and its program's file name."""
    if isinstance(process.get("name"), str):
        yield process["name"].lower()
    argv = process.get("cmdline")
    if isinstance(argv, list) and argv and isinstance(argv[0], str):
        yield os.path.basename(argv[0]).lower()


def _address(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        return None


def _addresses(text: str) -> Iterator[ipaddress.IPv4Address | ipaddress.IPv6Address]:
    for match in _ADDRESS.finditer(text):
        address = _address(match.group(0))
        if address is not None:
            yield address


def _items(record: Any) -> Iterator[tuple[str | None, Any]]:
    """(key, value) for every value of a record, however nested; keys are values too."""
    if isinstance(record, dict):
        for key, value in record.items():
            yield None, key
            yield key, value
            yield from _items(value)
    elif isinstance(record, list):
        for value in record:
            yield None, value
            yield from _items(value)


def masked_copy(
    bundle: Path, manifest: dict[str, Any], records: dict[str, list[Any]], target: Path
) -> Masker:
    """Write the masked copy of a valid bundle (its manifest and every file's records, as
    read and checked) into the new directory target, through the bundle writer: its
    manifest lists the masked files with their own sizes and checksums. Returns the
    masker, whose mapping() is the way back.

    A bundle captured on this machine is masked of this machine's names and people too."""
    masker = Masker(keep=[*manifest["probes"], *(e["name"] for e in manifest["files"])])
    names = [manifest["host"]["hostname"]]
    names += [r.get("hostname") for r in records.get("host.json", []) if isinstance(r, dict)]
    for name in names:
        if isinstance(name, str):
            masker.learn_host(name)
    if str(names[0]).lower() in {os.uname().nodename.lower(), socket.gethostname().lower()}:
        masker.learn_local()
    masker.learn(manifest)
    for lines in records.values():
        for record in lines:
            masker.learn(record)
    target.mkdir(mode=0o700)
    writer = BundleWriter(target)
    for entry in manifest["files"]:
        name = entry["name"]
        masked = [orjson.dumps(masker.mask(r)) for r in records[name]]
        data = b"".join(m + b"\n" for m in masked) if name.endswith(".jsonl") else masked[0]
        writer.write_scrubbed(name, data, entry["probe"], priority=0)
    copy = masker.mask(manifest)
    writer.dropped = copy["dropped"]
    writer.write_manifest(copy)
    return masker
