"""Secret redaction: the single scrub every record passes before it reaches disk.

Invariants:
- The bundle writer calls `scrub` on every record; probes need not remember to.
- Redaction only removes: the marker keeps the flag or key name, so a reader sees
  *that* a secret was there (an engine started with --api-key is itself evidence).
- Over-redaction is preferred to a leak, except for counts that carry evidence
  (`n_tokens=512`, `max_tokens: 256`), which are not secrets.
- The collector never reads /proc/<pid>/environ, so environments need no scrubbing.
"""

import re
from typing import Any

MARK = "[REDACTED]"
ARGV_KEYS = ("cmdline", "argv", "launch_command")

# A flag whose *next* argument (or `=value`) is a secret: --api-key, --hf-token,
# --password, --auth-token, --secret, --key, --db-pass ...
_SECRET_FLAG = re.compile(
    r"^--?(?:[a-z0-9]+[-_])*(?:api[-_]?key|apikey|key|token|secret|password|passwd|pass|pwd"
    r"|auth|credentials?)$",
    re.IGNORECASE,
)

_PATTERNS: list[tuple[re.Pattern[str], str]] = [
    # Authorization headers, whatever the scheme: keep the header name.
    (
        re.compile(
            r"(?i)\b((?:proxy-)?authorization[\"']?\s*[:=]\s*[\"']?)"
            r"(?:(?:bearer|basic|token|digest)\s+)?[^\s\"',;]+"
        ),
        r"\1" + MARK,
    ),
    (re.compile(r"(?i)\b(bearer\s+)[A-Za-z0-9._~+/=-]{8,}"), r"\1" + MARK),
    # A secret flag inside free text (a command line in a log or a config dump).
    (
        re.compile(
            r"(?i)(--?(?:[a-z0-9]+[-_])*(?:api[-_]?key|apikey|key|token|secret|password|passwd"
            r"|auth[-_]?token)(?:\s+|=))(?!-)[^\s\"',;]+"
        ),
        r"\1" + MARK,
    ),
    # Token shapes issued by the services these boxes talk to.
    (re.compile(r"\bsk-[A-Za-z0-9_-]{8,}"), MARK),  # OpenAI and compatible gateways
    (re.compile(r"\bhf_[A-Za-z0-9]{8,}"), MARK),  # Hugging Face
    (re.compile(r"\b(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{20,}"), MARK),  # GitHub
    (re.compile(r"\bgithub_pat_[A-Za-z0-9_]{20,}"), MARK),
    (re.compile(r"\bglpat-[A-Za-z0-9_-]{16,}"), MARK),  # GitLab
    (re.compile(r"\bxox[abprs]-[A-Za-z0-9-]{10,}"), MARK),  # Slack
    (re.compile(r"\bAKIA[0-9A-Z]{16}\b"), MARK),  # AWS access key id
    (re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"), MARK),  # JWT
    # Credentials inside URLs.
    # userinfo cannot hold a raw "/" (RFC 3986), so the password ends at "@" or "/".
    (re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://[^/\s:@]*:)[^@\s/]+@"), r"\1" + MARK + "@"),
    (
        re.compile(r"(?i)([?&](?:key|sig|signature|code|token|access_token|api_key)=)[^&\s\"']+"),
        r"\1" + MARK,
    ),
    # key=value and "key": "value" where the key names a secret. `tokens` (a count)
    # is excluded by requiring the secret word to end the key; a bare number after a
    # `token` key is a count too (`n_token=512`), after a password it is still secret.
    (
        re.compile(
            r"(?i)\b([A-Za-z0-9_.-]*(?:api[_-]?key|apikey|access[_-]?key|private[_-]?key"
            r"|secret[_-]?key|secret|password|passwd|pwd|credentials?)[\"']?\s*[=:]\s*[\"']?)"
            r"[^\s&\"',;]+"
        ),
        r"\1" + MARK,
    ),
    (
        re.compile(
            r"(?i)\b([A-Za-z0-9_.-]*token[\"']?\s*[=:]\s*[\"']?)(?![0-9]+(?:[\s&\"',;]|$))"
            r"[^\s&\"',;]+"
        ),
        r"\1" + MARK,
    ),
]


# Every pattern above needs one of these words; most strings have none, and one search
# is much cheaper than every substitution.
_MAYBE = re.compile(
    r"auth|bearer|sk-|hf_|gh[pousr]_|github_pat|glpat|xox|akia|eyj|://|key|sig|code|token"
    r"|secret|pass|pwd|credential",
    re.IGNORECASE,
)


def redact_text(text: str) -> str:
    """Remove secrets from free text: log lines, URLs, kernel messages."""
    if not _MAYBE.search(text):
        return text
    for pattern, replacement in _PATTERNS:
        text = pattern.sub(replacement, text)
    return text


def redact_argv(argv: list[str]) -> list[str]:
    """Remove secrets from a command line: `--api-key X`, `--token=X`, and any text pattern."""
    out: list[str] = []
    hide_next = False
    for arg in argv:
        if hide_next:
            out.append(MARK)
            hide_next = False
            continue
        flag, eq, _value = arg.partition("=")
        if _SECRET_FLAG.match(flag):
            if eq:
                out.append(f"{flag}={MARK}")
            else:
                out.append(arg)
                hide_next = True
            continue
        out.append(redact_text(arg))
    return out


# A mapping key that names a secret: its text value is the secret itself, whatever it
# looks like ({"password": "hunter2"} in an engine's answer or an alert's labels). Whole
# words only, so "token_usage" or "max_total_num_tokens" stay readable.
_SECRET_KEY = re.compile(
    r"(?:^|[_.\-])(?:pass(?:word|wd|phrase)?|secret|token|api[_\-]?key|apikey|auth(?:orization)?"
    r"|credentials?|private[_\-]?key|access[_\-]?key|session[_\-]?key|cookie)$",
    re.IGNORECASE,
)


def scrub(value: Any) -> Any:
    """Redact every string in a record; lists under an ARGV_KEYS key are treated as argv,
    and a text value under a key that names a secret goes whole."""
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, dict):
        return {k: _scrub_item(k, v) for k, v in value.items()}
    if isinstance(value, list):
        return [scrub(v) for v in value]
    return value


def _scrub_item(key: Any, value: Any) -> Any:
    if key in ARGV_KEYS and isinstance(value, list):
        return redact_argv(value)
    if isinstance(value, str) and value and isinstance(key, str) and _SECRET_KEY.search(key):
        return MARK
    return scrub(value)
