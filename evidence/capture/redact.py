"""Secret redaction: the single scrub every record passes before it reaches disk or stdout.

Invariants:
- The bundle writer calls `scrub` on every record; probes need not remember to. What the
  command line prints passes `scrub` too, because stdout of a unit goes to the journal.
- Redaction only removes: the marker keeps the flag or key name, so a reader sees
  *that* a secret was there (an engine started with --api-key is itself evidence).
- Over-redaction is preferred to a leak, except for what carries evidence: counts named
  like tokens (`n_tokens=512`, `max_tokens: 256`), ports (`-p 8080`), paths and models.
- `-p` and `-u` are ports, uids or "unbuffered" for most programs, so their values are
  redacted only after a program known to take a password there (_PASSWORD_OPTIONS).
- A URL password may hold "@" (the last "@" before the host ends it); one holding a raw
  "/" is not valid RFC 3986 and is not recognised.
- The collector never reads /proc/<pid>/environ, so environments need no scrubbing.
"""

import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

MARK = "[REDACTED]"
ARGV_KEYS = ("cmdline", "argv", "launch_command")

# The last word of a flag or key whose value is a secret. The short words (pass, pwd,
# auth, cookie, key) must be whole words (`--db-pass`, `MY_PASS`), or `bypass=1` and
# `--cache-key-size` would go too.
_LONG_WORDS = r"api[-_]?key|apikey|password|passwd|passphrase|secret|credentials?|token"
_KEY_KINDS = r"api|access|account|private|secret|session|client|encryption|signing|master|ssh"
# --api-key, --hf-token, --password, --db-pass, --gradio-auth, --cookie, -pass (openssl);
# `--no-auth` and `--disable-auth` are switches, not flags with a value.
_FLAG = rf"-{{1,2}}(?!no-|disable-)(?:[a-z0-9]+[-_])*(?:{_LONG_WORDS}|pass|pwd|auth|cookie|key)"
_SECRET_FLAG = re.compile(rf"^{_FLAG}$", re.IGNORECASE)
# A key of key=value: a long word may end any key (PGPASSWORD); a short one must be a
# whole word (MY_PASS, DB_PWD), and `key` needs its kind (api_key, not cache_key).
_WHOLE_WORDS = rf"pass|pwd|auth|cookie|(?:{_KEY_KINDS})[-_]?key"
_SECRET_KEY_TEXT = rf"[A-Za-z0-9_.-]*(?:{_LONG_WORDS})|(?:[A-Za-z0-9_.-]*[_.-])?(?:{_WHOLE_WORDS})"

# What a password option of each program looks like: its value follows (`sshpass -p X`),
# is attached only (`mysql -pX`: mysql reads `-p db` as "prompt, then the database"), or
# is `user:password` (`curl -u admin:X`: the user stays).
VALUE, ATTACHED, USERPASS = "value", "attached", "userpass"
_MYSQL = {"p": ATTACHED}
_PASSWORD_OPTIONS: dict[str, dict[str, str]] = {
    **dict.fromkeys(
        ("mysql", "mysqldump", "mysqladmin", "mysqlimport", "mysqlcheck", "mysqlshow"), _MYSQL
    ),
    **dict.fromkeys(("mariadb", "mariadb-dump", "mariadb-admin", "mariadb-import"), _MYSQL),
    "sshpass": {"p": VALUE},
    **dict.fromkeys(("redis-cli", "valkey-cli", "keydb-cli"), {"a": VALUE}),
    **dict.fromkeys(("mongo", "mongosh", "mongodump", "mongorestore"), {"p": VALUE}),
    **dict.fromkeys(("ldapsearch", "ldapadd", "ldapmodify", "ldapdelete"), {"w": VALUE}),
    **dict.fromkeys(("sqlcmd", "bcp"), {"P": VALUE}),
    **dict.fromkeys(("docker login", "podman login", "nerdctl login"), {"p": VALUE}),
    "curl": {"u": USERPASS, "U": USERPASS},
}
_LOGIN_CLIENTS = ("docker", "podman", "nerdctl")


@dataclass(frozen=True)
class _Rule:
    """A substitution, tried only on text holding one of its triggers (lowercase): most
    strings hold none, and a substring test is much cheaper than a regex pass."""

    triggers: tuple[str, ...]
    pattern: re.Pattern[str]
    replace: str | Callable[[re.Match[str]], str]


def _keep_group_1(match: re.Match[str]) -> str:
    return match.group(1) + MARK


# A quoted value: a JSON string with its escapes (`"a\"b"` goes whole), a single-quoted
# one, or an escaped JSON string inside a JSON string (`\"pw\"`).
_QUOTED = r"(?:\"(?:[^\"\\\n]|\\.)*\"|'[^'\n]*'|\\\"(?:[^\"\\\n]|\\[^\"])*\\\")"
_BARE = r"[^\s&\"',;]+"


def _quoted_mark(quoted: str) -> str:
    """The marker in the value's own quotes, so JSON stays JSON."""
    if quoted.startswith('\\"'):
        return f'\\"{MARK}\\"'
    return quoted[0] + MARK + quoted[0]


def _key_value(match: re.Match[str]) -> str:
    key, sep, value = match.group("key"), match.group("sep"), match.group("value")
    if key.upper() in ("PWD", "OLDPWD") and value.startswith("/"):
        return match.group(0)  # the shell's working directory, not a password
    if key.lower().endswith("token") and re.fullmatch(r"[0-9]+", value):
        return match.group(0)  # `n_token=512`: a count
    if value[0] in "\"'" or value.startswith('\\"'):
        return key + sep + _quoted_mark(value)
    return key + sep + MARK


def _private_key_block(match: re.Match[str]) -> str:
    return match.group(1) + MARK + (match.group(2) or "")


_PRIVATE_KEY = re.compile(
    r"(-----BEGIN[ A-Z0-9_-]*PRIVATE KEY(?: BLOCK)?-----)"
    r"(?:(?!-----END)[\s\S])*?(?:(-----END[ A-Z0-9_-]*PRIVATE KEY(?: BLOCK)?-----)|\Z)"
)


def redact_key_blocks(text: str) -> str:
    """Remove the body of PEM private keys, across lines: a log tail must call this on
    its whole text before splitting it, or each base64 line would pass alone."""
    if "PRIVATE KEY" not in text:
        return text
    return _PRIVATE_KEY.sub(_private_key_block, text)


def _program_pattern() -> re.Pattern[str]:
    names = sorted(_PASSWORD_OPTIONS, key=len, reverse=True)
    alternatives = "|".join(re.escape(n).replace(r"\ ", r"\s+") for n in names)
    program = rf"(?<![\w.-])(?:[\w./-]*/)?(?:{alternatives})(?![\w.-])"
    # The program's own words, up to the end of its command (a pipe, ;, &&, newline) or
    # the next such program (`curl ... 'mysql -pX'` in one string).
    words = rf"((?:(?!{program})[^\n;|&])*)"
    return re.compile(rf"(?={program})(?:[\w./-]*/)?({alternatives}){words}")


_PROGRAM = _program_pattern()


def _program_options(match: re.Match[str]) -> str:
    unused = dict(_PASSWORD_OPTIONS[" ".join(match.group(1).split())])
    rest = re.sub(
        rf"(?<=\s)-([{''.join(unused)}])([ \t]+)?((?:{_QUOTED}|[^\s'\"]+))",
        lambda m: _option_value(m, unused),
        match.group(2),
    )
    return match.group(0)[: match.start(2) - match.start(0)] + rest


def _option_value(match: re.Match[str], unused: dict[str, str]) -> str:
    """Each option once: in `sshpass -p X ssh -p 2222` the second -p is ssh's port."""
    letter, space, value = match.group(1), match.group(2) or "", match.group(3)
    mode = unused.get(letter)
    if mode is None or value.startswith("-") or (mode == ATTACHED and space):
        return match.group(0)  # used already, another flag, or mysql's prompt
    del unused[letter]
    return f"-{letter}{space}{_hidden_value(value, mode)}"


def _hidden_value(value: str, mode: str) -> str:
    if mode != USERPASS:
        return MARK
    user, colon, _password = value.strip("'\"").partition(":")
    return f"{user}:{MARK}" if colon else value


_RULES: list[_Rule] = [
    _Rule(("private key",), _PRIVATE_KEY, _private_key_block),
    # Authorization headers, whatever the scheme: keep the header name.
    _Rule(
        ("authorization",),
        re.compile(
            r"(?i)\b((?:proxy-)?authorization[\"']?\s*[:=]\s*[\"']?)"
            r"(?:(?:bearer|basic|token|digest|negotiate)\s+)?[^\s\"',;]+"
        ),
        _keep_group_1,
    ),
    _Rule(("bearer",), re.compile(r"(?i)\b(bearer\s+)[A-Za-z0-9._~+/=-]{8,}"), _keep_group_1),
    # Cookies go whole: every pair in them may be a session.
    _Rule(
        ("cookie",),
        re.compile(r"(?i)\b((?:set-)?cookie2?:[ \t]*)[^\r\n\"']+"),
        _keep_group_1,
    ),
    # A secret flag inside free text (a command line in a log or a `bash -c` string).
    _Rule(
        ("key", "token", "secret", "pass", "pwd", "auth", "cookie", "credential"),
        re.compile(rf"(?i)(?<![\w-])({_FLAG}(?:[ \t]+|=))(?!-)(?:{_QUOTED}|{_BARE})"),
        _keep_group_1,
    ),
    # `--user admin:pw` (curl, wget, many clients); numeric `uid:gid` is no password.
    _Rule(
        ("--user", "--proxy-user"),
        re.compile(
            r"(?i)(?<![\w-])(--(?:proxy-)?user(?:[ \t]+|=)['\"]?[^\s:'\"]+:)"
            r"(?![0-9]+(?:[\s'\"]|$))[^\s'\"]+"
        ),
        _keep_group_1,
    ),
    # Short password options of programs known to take one (-p is a port elsewhere).
    _Rule(tuple(p.split()[0] for p in _PASSWORD_OPTIONS), _PROGRAM, _program_options),
    # openssl's -passin/-passout/-pass `pass:X`.
    _Rule(("pass:",), re.compile(r"(?<![\w-])(pass:)[^\s\"',;]+"), _keep_group_1),
    # Token shapes issued by the services these boxes talk to (gitleaks' rule families).
    _Rule(("sk-",), re.compile(r"\bsk-[A-Za-z0-9_-]{8,}"), MARK),  # OpenAI, Anthropic
    _Rule(("sk_", "rk_"), re.compile(r"\b[sr]k_(?:live|test)_[A-Za-z0-9]{10,}"), MARK),  # Stripe
    _Rule(("hf_",), re.compile(r"\bhf_[A-Za-z0-9]{8,}"), MARK),  # Hugging Face
    _Rule(
        ("ghp_", "gho_", "ghu_", "ghs_", "ghr_"),
        re.compile(r"\b(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{20,}"),
        MARK,
    ),  # GitHub
    _Rule(("github_pat_",), re.compile(r"\bgithub_pat_[A-Za-z0-9_]{20,}"), MARK),
    _Rule(("glpat-",), re.compile(r"\bglpat-[A-Za-z0-9_-]{16,}"), MARK),  # GitLab
    _Rule(("xox",), re.compile(r"\bxox[abeprs]-[A-Za-z0-9-]{10,}"), MARK),  # Slack
    _Rule(
        ("hooks.slack.com",),
        re.compile(r"(hooks\.slack\.com/(?:services|workflows|triggers)/)[A-Za-z0-9/+_-]+"),
        _keep_group_1,
    ),
    _Rule(
        ("/api/webhooks/",),
        re.compile(r"(/api/webhooks/[0-9]+/)[A-Za-z0-9_-]+"),  # Discord
        _keep_group_1,
    ),
    _Rule(("akia", "asia"), re.compile(r"\b(?:AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16}\b"), MARK),  # AWS
    _Rule(("aiza",), re.compile(r"\bAIza[0-9A-Za-z_-]{35}"), MARK),  # Google API
    _Rule(("npm_",), re.compile(r"\bnpm_[A-Za-z0-9]{36}"), MARK),
    _Rule(("pypi-",), re.compile(r"\bpypi-[A-Za-z0-9_-]{50,}"), MARK),
    _Rule(("sg.",), re.compile(r"\bSG\.[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{16,}"), MARK),  # SendGrid
    _Rule(("_v1_",), re.compile(r"\bdo[opr]_v1_[a-f0-9]{64}"), MARK),  # DigitalOcean
    _Rule(("hvs.", "hvb."), re.compile(r"\bhv[sb]\.[A-Za-z0-9_-]{24,}"), MARK),  # Vault
    _Rule(("gsk_", "r8_"), re.compile(r"\b(?:gsk|r8)_[A-Za-z0-9]{20,}"), MARK),  # Groq, Replicate
    _Rule((":a",), re.compile(r"\b[0-9]{5,16}:A[A-Za-z0-9_-]{34}\b"), MARK),  # Telegram bot
    _Rule(
        ("eyj",), re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"), MARK
    ),
    # Credentials inside URLs: the password runs to the last "@" before the path.
    _Rule(
        ("://",),
        re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://[^/\s:@]*:)[^\s/?#]*@"),
        lambda m: m.group(1) + MARK + "@",
    ),
    _Rule(
        ("key=", "sig", "code=", "token=", "auth=", "password="),
        re.compile(
            r"(?i)([?&](?:key|sig|signature|code|token|access_token|api_key|auth|password)=)"
            r"[^&\s\"']+"
        ),
        _keep_group_1,
    ),
    # key=value, KEY="value" and "key": "value" where the key names a secret. `tokens`
    # (a count) is spared by requiring the secret word to end the key.
    _Rule(
        ("key", "pass", "pwd", "secret", "credential", "token", "auth", "cookie"),
        re.compile(
            rf"(?i)(?<![A-Za-z0-9_.-])(?P<key>{_SECRET_KEY_TEXT})"
            r"(?P<sep>\\?[\"']?\s*[=:]\s*)"
            rf"(?P<value>{_QUOTED}|[\"'][^\"'\s]*|(?![\\{{\[])(?!\[REDACTED\]){_BARE})"
        ),
        _key_value,
    ),
]


# One search for any trigger first: most strings (a path, `--port`, `8080`) hold none.
_ANY_TRIGGER = re.compile("|".join(re.escape(t) for r in _RULES for t in r.triggers))


def redact_text(text: str) -> str:
    """Remove secrets from free text: log lines, URLs, kernel messages, shell strings."""
    lowered = text.lower()
    if not _ANY_TRIGGER.search(lowered):
        return text
    for rule in _RULES:
        if any(t in lowered for t in rule.triggers):
            text = rule.pattern.sub(rule.replace, text)
    return text


def redact_argv(argv: list[str]) -> list[str]:
    """Remove secrets from a command line: `--api-key X`, `--token=X`, a known program's
    password option (`sshpass -p X`, `mysql -pX`, `curl -u user:X`) and any text pattern."""
    out: list[str] = []
    hide: str | None = None  # the mode the next argument is hidden in
    program: str | None = None
    unused: dict[str, str] = {}  # the program's password options not seen yet
    for arg in argv:
        if hide is not None and arg in ("=", ":"):
            out.append(arg)  # `key = value` split by a shell: the value is still to come
            continue
        if hide is not None and not arg.startswith("--"):  # `--api-key --port 80`: no value
            out.append(_hidden_value(arg, hide))
            hide = None
            continue
        known = _program_of(arg, program)
        if known != program:
            program, unused = known, dict(_PASSWORD_OPTIONS.get(known or "", {}))
        hide, shown = _flag(arg, unused)
        out.append(shown)
    return out


def _program_of(arg: str, current: str | None) -> str | None:
    if arg == "login" and current in _LOGIN_CLIENTS:
        return f"{current} login"
    name = os.path.basename(arg)
    return name if name in _PASSWORD_OPTIONS or name in _LOGIN_CLIENTS else current


def _flag(arg: str, unused: dict[str, str]) -> tuple[str | None, str]:
    """(how to hide the next argument, or None; this argument as shown). A program's
    password option is taken out of `unused`: each counts once, as in the text rule."""
    flag, eq, _value = arg.partition("=")
    if _SECRET_FLAG.match(flag):
        return (None, f"{flag}={MARK}") if eq else (VALUE, arg)
    if flag in ("--user", "--proxy-user"):
        return (None, redact_text(arg)) if eq else (USERPASS, arg)
    if len(arg) >= 2 and arg[0] == "-" and arg[1] in unused:
        mode, value = unused.pop(arg[1]), arg[2:]
        if not value:
            return (None if mode == ATTACHED else mode), arg
        return None, arg[:2] + _hidden_value(value, mode)
    if _IDENTIFIER.fullmatch(arg) and names_a_secret(arg):
        # `aws configure set aws_secret_access_key X`, or `key = X` split by a shell. Only
        # a compound name: a bare `token` or `auth` is a verb (`gh auth login`).
        return VALUE, arg
    return None, redact_text(arg)


_IDENTIFIER = re.compile(r"[A-Za-z][\w-]*[_.][\w.-]*")


# Whole words of a mapping key that make its value a secret ({"password": "hunter2"} in
# an engine's answer, {"session_cookie": ...} in /props). Anywhere in the key:
_SECRET_PARTS = {
    "password",
    "passwd",
    "passphrase",
    "secret",
    "secrets",
    "credential",
    "credentials",
    "cookie",
    "cookies",
    "apikey",
    "privatekey",
    "jwt",
}
# Only as the key's last word: `token_usage` and `auth_enabled` are readings.
_SECRET_LAST = {"token", "pass", "pwd", "auth", "authorization", "bearer", "sessionid"}
# `<kind>_key` is a secret for these kinds; `group_key` and `cache_key` are not.
_KEY_QUALIFIERS = set(_KEY_KINDS.split("|")) | {"auth", "storage", "license"}
# A model's vocabulary has tokens too: `eos_token: "</s>"` is not a credential.
_VOCABULARY = {"bos", "eos", "eot", "pad", "unk", "sep", "cls", "mask", "next", "stop"}
_CAMEL = re.compile(r"([a-z0-9])([A-Z])")
_WORD_BREAK = re.compile(r"[^A-Za-z0-9]+")


def names_a_secret(key: str) -> bool:
    """Whether a mapping key names a secret: its text value is the secret itself,
    whatever it looks like. Whole words only, so `max_total_num_tokens` stays readable."""
    words = _words(key)
    if not words:
        return False
    if _SECRET_PARTS.intersection(words) or any(
        w.endswith(("password", "passwd", "secret")) for w in words
    ):
        return True
    last, before = words[-1], words[-2] if len(words) > 1 else None
    if last == "key":
        return before in _KEY_QUALIFIERS
    return last in _SECRET_LAST and before not in _VOCABULARY


def _words(key: str) -> list[str]:
    return [w for w in _WORD_BREAK.split(_CAMEL.sub(r"\1_\2", key).lower()) if w]


def scrub(value: Any) -> Any:
    """Redact every string in a record; lists under an ARGV_KEYS key are treated as argv,
    and a value under a key that names a secret goes whole."""
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, dict):
        return {k: _scrub_item(k, v) for k, v in value.items()}
    if isinstance(value, list):
        return [scrub(v) for v in value]
    return value


def _scrub_item(key: Any, value: Any) -> Any:
    if key in ARGV_KEYS and isinstance(value, list) and all(isinstance(v, str) for v in value):
        return redact_argv(value)
    if isinstance(key, str) and names_a_secret(key):
        return _hide(value, counts_kept=_words(key)[-1] == "token")
    return scrub(value)


def _hide(value: Any, counts_kept: bool) -> Any:
    """A secret's value, however nested: strings and numbers go (`"auth": {"basic": X}`),
    booleans and nulls stay (`"auth": false` is evidence), and so do the keys."""
    if isinstance(value, dict):
        return {k: _hide(v, counts_kept) for k, v in value.items()}
    if isinstance(value, list):
        return [_hide(v, counts_kept) for v in value]
    if isinstance(value, str):
        if counts_kept and re.fullmatch(r"[0-9.]+", value):
            return value  # `"token_usage"`-like readings written as text
        return MARK if value else value
    if isinstance(value, int | float) and not isinstance(value, bool) and not counts_kept:
        return MARK
    return value
